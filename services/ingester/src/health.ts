/**
 * What keeps the ingester from doing its job, as readiness and as metrics: every failed
 * delivery (the queue's `assigned`, read or handler) and every failed flush is classified,
 * logged, counted by stage and reason, and held as a fault of its partition until the
 * same work succeeds again. `/ready` answers 503 with the faults' text while any is held.
 */
import { isRetriable } from "@sieve/kit";
import type { DeliveryFailure, DeliveryStage } from "@sieve/queue";
import { isStoreFailure, StorageError } from "@sieve/storage";
import type { Logger } from "pino";
import { IngesterError } from "./errors.js";
import type { IngesterMetrics } from "./metrics.js";

/**
 * Why something failed, the `reason` label of `sieve_ingester_failures_total`: shared by
 * the metric, the logs and the readiness text (Loki's validation reasons pattern).
 */
export const FAILURE_REASONS = {
  object_store: "object store unavailable",
  queue: "queue unavailable",
  bug: "internal error",
  invalid_data: "invalid data",
  other: "failed",
} as const;

/** A key of {@link FAILURE_REASONS}. */
export type FailureReason = keyof typeof FAILURE_REASONS;

/** A stage that can fail: the queue consumer's, or the flush of a partition. */
export type FailureStage = DeliveryStage | "flush";

/**
 * The error the ingester lets the queue consumer see: object store failures become
 * `IngesterError`s that say whether a retry can help (a store that is down: yes; a key
 * the store refuses: no), so the consumers' shared classification (`isRetriable`) applies.
 */
export function asRetryable(error: unknown): unknown {
  if (isStoreFailure(error)) {
    return new IngesterError("store_unavailable", error.message, { cause: error });
  }
  if (error instanceof StorageError) {
    return new IngesterError("store_refused", error.message, { cause: error });
  }
  return error;
}

/** The reason label of an error (see {@link FAILURE_REASONS}). */
function failureReason(error: unknown): FailureReason {
  const e = asRetryable(error);
  if (e instanceof IngesterError) {
    if (e.code === "store_unavailable") return "object_store";
    if (e.code === "corrupt_manifest") return "invalid_data";
    return "bug";
  }
  if ((e as { name?: unknown } | null)?.name === "QueueError") {
    return isRetriable(e) ? "queue" : "invalid_data";
  }
  if (e instanceof SyntaxError) return "invalid_data";
  if (!isRetriable(e)) return "bug";
  return "other";
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The faults of an ingester and what they make of readiness. */
export class Health {
  /** By `<stage>:<partition>`: the readiness text of each fault held now. */
  private readonly faults = new Map<string, string>();

  constructor(
    private readonly logger: Logger,
    private readonly metrics: IngesterMetrics,
  ) {}

  /** True while no fault is held. */
  get ok(): boolean {
    return this.faults.size === 0;
  }

  /** The distinct texts of the faults held, joined; undefined when none. */
  get reason(): string | undefined {
    if (this.faults.size === 0) return undefined;
    return [...new Set(this.faults.values())].join("; ");
  }

  /** Logs, counts and holds a failed delivery attempt of the queue consumer. */
  deliveryFailed(f: DeliveryFailure): void {
    this.failed(f.stage, f.partition, f.error, f.retrying, f.attempt);
  }

  /** Logs, counts and holds a failure of `stage` for `partition`. */
  failed(
    stage: FailureStage,
    partition: number,
    error: unknown,
    retrying: boolean,
    attempt = 1,
  ): void {
    const reason = failureReason(error);
    this.metrics.failures.inc({ stage, reason });
    const what = stage === "flush" ? "flush" : `delivery (${stage})`;
    const state = retrying ? "failing, retrying" : "stopped";
    const text =
      reason === "object_store"
        ? `${FAILURE_REASONS.object_store}: ${what} of partition ${partition} ${state}`
        : `${what} of partition ${partition} ${state}: ${FAILURE_REASONS[reason]}: ${message(error)}`;
    this.faults.set(`${stage}:${partition}`, text);
    const log = { partition, stage, reason, attempt, retrying, err: error };
    // The first failure and every final one are errors; the repeats of a retry are warnings.
    if (!retrying || attempt === 1) this.logger.error(log, text);
    else this.logger.warn(log, text);
  }

  /** Drops the faults of `stages` for `partition`: that work succeeded again. */
  recovered(partition: number, stages: readonly FailureStage[]): void {
    for (const stage of stages) {
      if (this.faults.delete(`${stage}:${partition}`)) {
        this.logger.info({ partition, stage }, "recovered");
      }
    }
  }

  /** Drops every fault of `partition` (it was revoked). */
  forget(partition: number): void {
    for (const key of [...this.faults.keys()]) {
      if (key.endsWith(`:${partition}`)) this.faults.delete(key);
    }
  }
}
