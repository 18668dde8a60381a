import type { Logger } from "pino";
import { Limiter } from "@sieve/bloom";
import {
  LabelsError,
  fingerprint,
  fingerprintKey,
  isValidLabelName,
  labelsString,
  parseLabels,
  partitionOf,
} from "@sieve/labels";
import type { Label } from "@sieve/labels";
import { encodeQueueRecord } from "@sieve/proto";
import type { OutgoingRecord, QueueWriter } from "@sieve/queue";
import type { DistributorConfig } from "./config.js";
import type { IncomingEntry, IncomingStream } from "./decode.js";
import { OverridableLimits, StreamRates, TokenBucket } from "./limits.js";
import type { Limits, TenantLimits } from "./limits.js";
import type { DistributorMetrics } from "./metrics.js";
import {
  REASONS,
  messages,
  structuredMetadataBytes,
  tenantIdError,
  timeBounds,
  utf8Bytes,
  validateEntry,
  validateLabels,
} from "./validation.js";
import type { Reason, Rejection } from "./validation.js";

/** What a push comes to: 204, 400 or 429 with Loki's messages, or 5xx if the queue failed. */
export interface PushResult {
  readonly status: 204 | 400 | 429 | 503;
  /** The rejections' messages, one per line; empty for 204. */
  readonly body: string;
  /** Lines accepted into the queue. */
  readonly acceptedLines: number;
  /** Reasons of the refusals, for logs. */
  readonly reasons: readonly Reason[];
}

/** The distributor's dependencies, passed in. */
export interface DistributorDeps {
  readonly config: DistributorConfig;
  readonly queue: QueueWriter;
  readonly logger: Logger;
  readonly metrics: DistributorMetrics;
  /** Per-tenant limits; default: `config.limits` with `config.overrides`. */
  readonly limits?: Limits;
  /** The clock, in milliseconds; injectable for tests. */
  readonly now?: () => number;
}

interface TenantState {
  readonly ingestion: TokenBucket;
  readonly hourly: Limiter;
  readonly daily: Limiter;
  readonly streams: StreamRates;
}

interface Accepted {
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly entries: IncomingEntry[];
  lineBytes: number;
  /** Line plus structured metadata bytes: what rate limits count, as Loki. */
  bytes: number;
}

const HOUR_MS = 3_600_000;

/** Messages listed in a refusal's body; the rest are counted, so a body stays small. */
export const MAX_LISTED_REJECTIONS = 100;

function responseBody(rejections: readonly Rejection[]): string {
  const listed = rejections.slice(0, MAX_LISTED_REJECTIONS).map((r) => r.message);
  const more = rejections.length - listed.length;
  if (more > 0) listed.push(`and ${more} more refused entries or streams`);
  return listed.join("\n");
}

/**
 * Validates pushes with Loki's rules, applies tenant limits (ingestion rate, per-stream rate,
 * new-stream limiter), and writes every accepted stream as one queue record to the
 * partition of its fingerprint; a push is acknowledged only once the queue has them all.
 */
export class Distributor {
  private readonly config: DistributorConfig;
  private readonly queue: QueueWriter;
  private readonly logger: Logger;
  private readonly metrics: DistributorMetrics;
  private readonly limits: Limits;
  private readonly now: () => number;
  private readonly tenants = new Map<string, TenantState>();

  constructor(deps: DistributorDeps) {
    this.config = deps.config;
    this.queue = deps.queue;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.limits = deps.limits ?? new OverridableLimits(deps.config.limits, deps.config.overrides);
    this.now = deps.now ?? Date.now;
  }

  private state(tenant: string, limits: TenantLimits): TenantState {
    let s = this.tenants.get(tenant);
    if (s === undefined) {
      const now = this.now;
      s = {
        ingestion: new TokenBucket(limits.ingestionRateBytes, limits.ingestionBurstBytes, now()),
        hourly: new Limiter({ maxItems: limits.maxNewStreamsPerHour, intervalMs: HOUR_MS, now }),
        daily: new Limiter({ maxItems: limits.maxNewStreamsPerDay, intervalMs: 24 * HOUR_MS, now }),
        streams: new StreamRates(),
      };
      this.tenants.set(tenant, s);
    }
    return s;
  }

  /**
   * Pushes the streams of one request for `tenant`. Never throws for bad data: refusals
   * (an invalid tenant ID too) are in the result; a queue failure answers 503.
   */
  async push(tenant: string, streams: readonly IncomingStream[]): Promise<PushResult> {
    // Checked here too, not only by the HTTP layer: the tenant ends up in metrics, records
    // and, downstream, storage keys.
    const tenantError = tenantIdError(tenant);
    if (tenantError !== undefined) {
      return { status: 400, body: tenantError, acceptedLines: 0, reasons: [] };
    }
    const limits = this.limits.forTenant(tenant);
    const state = this.state(tenant, limits);
    const nowMs = this.now();
    const bounds = timeBounds(limits, nowMs);
    const rejections: Rejection[] = [];
    const discard = (reason: Reason, lines: number, bytes: number): void => {
      if (lines === 0) return;
      this.metrics.discardedLines.inc({ tenant, reason }, lines);
      this.metrics.discardedBytes.inc({ tenant, reason }, bytes);
    };
    const entriesBytes = (entries: readonly IncomingEntry[]): number => {
      let n = 0;
      for (const e of entries)
        n += utf8Bytes(e.line) + structuredMetadataBytes(e.structuredMetadata);
      return n;
    };

    // 1. Validation: labels per stream, then each entry (Loki drops single entries).
    const accepted: Accepted[] = [];
    for (const stream of streams) {
      let labels: readonly Label[];
      try {
        labels = stream.labels ?? parseLabels(stream.labelsText);
        const bad =
          stream.labels === undefined ? undefined : labels.find((l) => !isValidLabelName(l.name));
        if (bad !== undefined) {
          throw new LabelsError("invalid_label_name", JSON.stringify(bad.name));
        }
      } catch (error) {
        if (!(error instanceof LabelsError)) throw error;
        rejections.push({
          reason: "invalid_labels",
          message: messages.invalidLabels(stream.labelsText, error.message),
        });
        discard("invalid_labels", stream.entries.length, entriesBytes(stream.entries));
        continue;
      }
      const labelError = validateLabels(labels, stream.labelsText, limits);
      if (labelError !== undefined) {
        rejections.push(labelError);
        discard(labelError.reason, stream.entries.length, entriesBytes(stream.entries));
        continue;
      }
      const canonical = labelsString(labels);
      const kept: Accepted = {
        labels: canonical,
        fingerprint: fingerprint(canonical),
        entries: [],
        lineBytes: 0,
        bytes: 0,
      };
      for (const entry of stream.entries) {
        const lineBytes = utf8Bytes(entry.line);
        const metadata = entry.structuredMetadata;
        const metadataBytes = metadata.length === 0 ? 0 : structuredMetadataBytes(metadata);
        const error = validateEntry(
          entry.timestampNs,
          lineBytes,
          metadata,
          metadataBytes,
          canonical,
          limits,
          bounds,
        );
        if (error !== undefined) {
          rejections.push(error);
          discard(error.reason, 1, lineBytes + metadataBytes);
          continue;
        }
        kept.entries.push(entry);
        kept.lineBytes += lineBytes;
        kept.bytes += lineBytes + metadataBytes;
      }
      if (kept.entries.length > 0) accepted.push(kept);
    }

    // 2. Tenant ingestion rate: the whole request's valid bytes, all or nothing (as Loki).
    let lines = 0;
    let bytes = 0;
    for (const a of accepted) {
      lines += a.entries.length;
      bytes += a.bytes;
    }
    if (bytes > 0 && !state.ingestion.allow(bytes, nowMs)) {
      rejections.push({
        reason: "rate_limited",
        message: messages.rateLimited(tenant, limits.ingestionRateBytes, lines, bytes),
      });
      discard("rate_limited", lines, bytes);
      accepted.length = 0;
    }

    // 3. New-stream limiter (hour, day), then each stream's own rate.
    const records: OutgoingRecord[] = [];
    let acceptedLines = 0;
    let acceptedBytes = 0;
    for (const a of accepted) {
      const key = fingerprintKey(a.fingerprint);
      const limit = !state.hourly.add(key)
        ? (["maxNewStreamsPerHour", limits.maxNewStreamsPerHour] as const)
        : !state.daily.add(key)
          ? (["maxNewStreamsPerDay", limits.maxNewStreamsPerDay] as const)
          : undefined;
      if (limit !== undefined) {
        rejections.push({
          reason: "stream_limit",
          message: messages.streamLimit(a.labels, tenant, limit[0], limit[1]),
        });
        discard("stream_limit", a.entries.length, a.bytes);
        continue;
      }
      if (!state.streams.allow(a.fingerprint, a.bytes, limits, nowMs)) {
        rejections.push({
          reason: "per_stream_rate_limit",
          message: messages.perStreamRateLimit(limits.perStreamRateBytes, a.labels, a.bytes),
        });
        discard("per_stream_rate_limit", a.entries.length, a.bytes);
        continue;
      }
      records.push({
        partition: partitionOf(a.fingerprint, this.queue.partitions),
        key,
        value: encodeQueueRecord({
          tenant,
          labels: a.labels,
          fingerprint: a.fingerprint,
          entries: a.entries,
        }),
      });
      acceptedLines += a.entries.length;
      acceptedBytes += a.lineBytes;
    }

    // 4. Durable before acknowledged.
    if (records.length > 0) {
      const started = performance.now();
      try {
        await this.queue.append(records);
      } catch (error) {
        this.metrics.queueWriteDuration.observe(
          { outcome: "error" },
          (performance.now() - started) / 1000,
        );
        this.logger.error({ err: error, tenant, records: records.length }, "queue append failed");
        return {
          status: 503,
          body: `the queue could not store the push durably: ${(error as Error).message}`,
          acceptedLines: 0,
          reasons: [],
        };
      }
      this.metrics.queueWriteDuration.observe(
        { outcome: "ok" },
        (performance.now() - started) / 1000,
      );
      this.metrics.receivedLines.inc({ tenant }, acceptedLines);
      this.metrics.receivedBytes.inc({ tenant }, acceptedBytes);
    }

    if (rejections.length === 0) return { status: 204, body: "", acceptedLines, reasons: [] };
    const reasons = [...new Set(rejections.map((r) => r.reason))];
    const status = reasons.some((r) => REASONS[r] === 429) ? 429 : 400;
    this.logger.info(
      { tenant, reasons, rejected: rejections.length, acceptedLines },
      "push partly or wholly refused",
    );
    return { status, body: responseBody(rejections), acceptedLines, reasons };
  }
}
