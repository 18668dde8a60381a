import type { Logger } from "pino";
import { Limiter } from "@sieve/bloom";
import { fingerprintKey, partitionOf } from "@sieve/labels";
import type { OutgoingRecord, QueueWriter } from "@sieve/queue";
import type { DistributorConfig } from "./config.js";
import type { IncomingStream } from "./decode.js";
import { OverridableLimits, StreamRates, TokenBucket } from "./limits.js";
import type { Limits, TenantLimits } from "./limits.js";
import type { DistributorMetrics } from "./metrics.js";
import { prepareStreams } from "./prepare.js";
import type { PreparedPush } from "./prepare.js";
import { REASONS, messages, tenantIdError } from "./validation.js";
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
  /** When the tenant last pushed an accepted stream, ms. */
  lastPushMs: number;
}

const HOUR_MS = 3_600_000;

/** Messages listed in a refusal's body; the rest are counted, so a body stays small. */
const MAX_LISTED_REJECTIONS = 100;

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
 *
 * Tenant state (~440 KB, mostly the new-stream limiters) is created only for a push with at
 * least one valid stream, and forgotten once the tenant has pushed nothing for
 * `tenantIdleMs` and holds nothing a new state would not: its rate bucket has refilled and
 * both new-stream limiters have rolled into an interval with no new stream. Per-stream
 * buckets are forgotten once refilled. Limits therefore hold exactly as without eviction
 * (up to where a new limiter's interval starts); the price is that a tenant which created
 * streams keeps its state until its daily interval rolls over.
 */
export class Distributor {
  private readonly config: DistributorConfig;
  private readonly queue: QueueWriter;
  private readonly logger: Logger;
  private readonly metrics: DistributorMetrics;
  private readonly limits: Limits;
  private readonly now: () => number;
  private readonly tenants = new Map<string, TenantState>();
  private lastEvictionMs: number;

  constructor(deps: DistributorDeps) {
    this.config = deps.config;
    this.queue = deps.queue;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.limits = deps.limits ?? new OverridableLimits(deps.config.limits, deps.config.overrides);
    this.now = deps.now ?? Date.now;
    this.lastEvictionMs = this.now();
  }

  /** The limits of `tenant` (a valid tenant ID), as plain data. */
  limitsFor(tenant: string): TenantLimits {
    return this.limits.forTenant(tenant);
  }

  /** Tenants holding limiter state. */
  get tenantCount(): number {
    return this.tenants.size;
  }

  /** Per-stream rate buckets held, over all tenants. */
  get streamBucketCount(): number {
    let n = 0;
    for (const s of this.tenants.values()) n += s.streams.size;
    return n;
  }

  private state(tenant: string, limits: TenantLimits, nowMs: number): TenantState {
    let s = this.tenants.get(tenant);
    if (s === undefined) {
      const now = this.now;
      s = {
        ingestion: new TokenBucket(limits.ingestionRateBytes, limits.ingestionBurstBytes, nowMs),
        hourly: new Limiter({ maxItems: limits.maxNewStreamsPerHour, intervalMs: HOUR_MS, now }),
        daily: new Limiter({ maxItems: limits.maxNewStreamsPerDay, intervalMs: 24 * HOUR_MS, now }),
        streams: new StreamRates(),
        lastPushMs: nowMs,
      };
      this.tenants.set(tenant, s);
    }
    s.lastPushMs = nowMs;
    return s;
  }

  /**
   * Forgets the state of tenants idle for `tenantIdleMs` that hold nothing a new state would
   * not (see the class), and the refilled stream buckets of the others. Runs from `push` at most once per interval
   * (a tenth of the idle time, at most a minute) and from the HTTP server's timer.
   */
  evictIdle(): void {
    const nowMs = this.now();
    this.lastEvictionMs = nowMs;
    for (const [tenant, s] of this.tenants) {
      const idle =
        nowMs - s.lastPushMs >= this.config.tenantIdleMs &&
        s.ingestion.isFull(nowMs) &&
        s.hourly.count === 0 &&
        s.daily.count === 0;
      if (idle) {
        this.tenants.delete(tenant);
      } else {
        s.streams.sweep(nowMs);
      }
    }
    this.metrics.tenants.set(this.tenants.size);
  }

  /** How often eviction runs, ms. */
  get evictionIntervalMs(): number {
    return Math.min(60_000, Math.max(1, Math.floor(this.config.tenantIdleMs / 10)));
  }

  /**
   * Pushes the streams of one request for `tenant`, validating them on this thread. Never
   * throws for bad data: refusals (an invalid tenant ID too) are in the result; a queue
   * failure answers 503.
   */
  async push(tenant: string, streams: readonly IncomingStream[]): Promise<PushResult> {
    const tenantError = tenantIdError(tenant);
    if (tenantError !== undefined) {
      return { status: 400, body: tenantError, acceptedLines: 0, reasons: [] };
    }
    const prepared = prepareStreams(tenant, streams, this.limitsFor(tenant), this.now());
    return this.admit(tenant, prepared);
  }

  /**
   * Applies the tenant's stateful limits to a prepared push (see prepare.ts) and writes the
   * admitted records to the queue. Per stream, not per entry: the entries were validated
   * and encoded where the push was prepared.
   */
  async admit(tenant: string, prepared: PreparedPush): Promise<PushResult> {
    // Checked here too, not only by the HTTP layer: the tenant ends up in metrics, records
    // and, downstream, storage keys.
    const tenantError = tenantIdError(tenant);
    if (tenantError !== undefined) {
      return { status: 400, body: tenantError, acceptedLines: 0, reasons: [] };
    }
    const nowMs = this.now();
    if (nowMs - this.lastEvictionMs >= this.evictionIntervalMs) this.evictIdle();
    const limits = this.limitsFor(tenant);
    const rejections = [...prepared.rejections];
    const discard = (reason: Reason, lines: number, bytes: number): void => {
      if (lines === 0) return;
      this.metrics.discardedLines.inc({ tenant, reason }, lines);
      this.metrics.discardedBytes.inc({ tenant, reason }, bytes);
    };
    for (const d of prepared.discarded) discard(d.reason, d.lines, d.bytes);

    const { streams } = prepared;
    const records: OutgoingRecord[] = [];
    let acceptedLines = 0;
    let acceptedBytes = 0;
    if (streams.length > 0) {
      // Created only now: a push with no valid stream leaves no state behind.
      const state = this.state(tenant, limits, nowMs);
      // 1. Tenant ingestion rate: the whole request's valid bytes, all or nothing (as Loki).
      let lines = 0;
      let bytes = 0;
      for (const a of streams) {
        lines += a.lines;
        bytes += a.bytes;
      }
      const admitted = bytes === 0 || state.ingestion.allow(bytes, nowMs);
      if (!admitted) {
        rejections.push({
          reason: "rate_limited",
          message: messages.rateLimited(tenant, limits.ingestionRateBytes, lines, bytes),
        });
        discard("rate_limited", lines, bytes);
      }

      // 2. New-stream limiter (hour, day), then each stream's own rate.
      let start = 0;
      for (const a of admitted ? streams : []) {
        const value = prepared.records.subarray(start, a.recordEnd);
        start = a.recordEnd;
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
          discard("stream_limit", a.lines, a.bytes);
          continue;
        }
        if (!state.streams.allow(a.fingerprint, a.bytes, limits, nowMs)) {
          rejections.push({
            reason: "per_stream_rate_limit",
            message: messages.perStreamRateLimit(limits.perStreamRateBytes, a.labels, a.bytes),
          });
          discard("per_stream_rate_limit", a.lines, a.bytes);
          continue;
        }
        records.push({ partition: partitionOf(a.fingerprint, this.queue.partitions), key, value });
        acceptedLines += a.lines;
        acceptedBytes += a.lineBytes;
      }
      this.metrics.tenants.set(this.tenants.size);
    }

    // 3. Durable before acknowledged.
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
