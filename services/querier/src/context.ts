/**
 * What one query runs with: its deadline and counters ({@link QueryContext}), and the
 * querier's shared parts it reads through ({@link QuerierParts}).
 */
import type { SegmentListings } from "./listings.js";
import type { ChunkReader } from "@sieve/chunk";
import type { Retention } from "@sieve/logql";
import type { IndexedSeries } from "@sieve/index";
import { deadlineSignal, settleBy } from "@sieve/kit";
import type { ObjectCache } from "./cache.js";
import type { QuerierConfig, QueryLimits } from "./config.js";
import type { DeleteRequestsSource } from "./deletes.js";
import type { QuerierStore } from "./deps.js";
import type { ChunkFilter, IngesterQuerier } from "@sieve/proto";
import { ERR_DEADLINE_EXCEEDED, QueryError, queryMemory } from "./errors.js";
import { Explain } from "./explain.js";
import type { ChunkEnd, TailSizes } from "./fetch.js";
import type { ParsedLabels } from "./labels.js";
import type { QuerierMetrics } from "./metrics.js";
import { QueryStats } from "./stats.js";

/** How many lines a scan reads between two looks at the deadline. */
export const DEADLINE_CHECK_EVERY = 4096;

/** The querier's shared parts a query reads through: one set per querier, every tenant. */
export interface QuerierParts {
  readonly config: QuerierConfig;
  readonly store: QuerierStore;
  /** Unflushed data (`NO_INGESTERS` when the querier has none). */
  readonly ingesters: IngesterQuerier;
  /** The bloom gateway (`KEEP_ALL_FILTER` when the querier has none). */
  readonly chunkFilter: ChunkFilter;
  /** Where the querier counts (absent: not counted). */
  readonly metrics: QuerierMetrics | undefined;
  /** Decoded segments by key, sized by their encoded bytes. */
  readonly segments: ObjectCache<LoadedSegment>;
  /** Index listings, cached while the store is unchanged (listings.ts). */
  readonly listings: SegmentListings;
  /** Fetched chunks by key, as checked readers, sized by what they hold. */
  readonly chunks: ObjectCache<ChunkReader>;
  /** How much of a chunk's tail to read first (fetch.ts). */
  readonly tails: TailSizes;
  /** Chunk ends (footer and symbol filter) by key, for chunks not read further (fetch.ts). */
  readonly chunkEnds: ObjectCache<ChunkEnd>;
  /** How much of a chunk's end to read first (fetch.ts). */
  readonly endSizes: TailSizes;
  /** Label records of the series' canonical label strings. */
  readonly labels: ParsedLabels;
  /**
   * The compactor's retention rules: lines older than their stream's period are never
   * answered, whether the compactor has deleted them yet or not.
   */
  readonly retention: Retention;
  /** The tenants' delete requests that queries filter (deletes.ts). */
  readonly deletes: DeleteRequestsSource;
}

/**
 * What holding an entry costs, in bytes: V8 strings take 1 or 2 bytes a character (2
 * assumed: an estimate that errs on the safe side) plus the record and array slot
 * around it. Labels and metadata records are mostly shared between entries and not counted.
 */
export function entryBytes(line: string): number {
  return 2 * line.length + ENTRY_OVERHEAD_BYTES;
}

/** The record, its timestamp and its array slot, roughly. */
const ENTRY_OVERHEAD_BYTES = 96;

/** The deadline, counters, memory budget and, when asked, explain of one query. */
export class QueryContext {
  readonly stats = new QueryStats();
  /** Where the plan says why each chunk was kept or pruned (`explain=true` only). */
  readonly explain: Explain | undefined;
  /** Bytes held outside the answer buffer (ingester entries, metric rows). */
  private heldBytes = 0;
  readonly started = performance.now();
  private readonly deadline: number;
  /**
   * Aborts at the query's deadline (none without `queryTimeoutMs`): passed to the ingesters
   * and to the store reads that are the query's own, which then stop.
   */
  readonly signal: AbortSignal;

  constructor(
    readonly limits: QueryLimits,
    explain = false,
  ) {
    this.explain = explain ? new Explain() : undefined;
    const timeoutMs = limits.queryTimeoutMs > 0 ? limits.queryTimeoutMs : undefined;
    this.deadline = timeoutMs === undefined ? Number.POSITIVE_INFINITY : this.started + timeoutMs;
    this.signal = deadlineSignal(timeoutMs);
  }

  /** Throws the timeout error once the deadline has passed. */
  check(): void {
    if (performance.now() > this.deadline) throw new QueryError("timeout", ERR_DEADLINE_EXCEEDED);
  }

  /**
   * Counts `bytes` more held by the query (`transient`: also held, by the answer buffer,
   * but counted there); throws the `maxQueryMemoryBytes` error past the tenant's budget.
   */
  hold(bytes: number, transient = 0): void {
    this.heldBytes += bytes;
    const max = this.limits.maxQueryMemoryBytes;
    if (max > 0 && this.heldBytes + transient > max) throw queryMemory(max);
  }

  /**
   * What an ingester call may take: the query's signal, and the time left before the
   * deadline, if any (the HTTP client sends it on, for the ingester to stop there).
   */
  callOptions(): { signal: AbortSignal; timeoutMs?: number } {
    if (this.deadline === Number.POSITIVE_INFINITY) return { signal: this.signal };
    return {
      signal: this.signal,
      timeoutMs: Math.max(1, Math.ceil(this.deadline - performance.now())),
    };
  }

  /**
   * `p`, or the timeout error once the deadline has passed: as soon as it passes (work
   * that does not take the signal, or a shared cache load, is not waited for), or when `p`
   * fails because the signal aborted it.
   */
  race<T>(p: Promise<T>): Promise<T> {
    return settleBy(p, this.signal).catch((e: unknown) => {
      if (this.signal.aborted) throw new QueryError("timeout", ERR_DEADLINE_EXCEEDED);
      throw e;
    });
  }

  /** Wall time so far, in seconds. */
  elapsed(): number {
    return (performance.now() - this.started) / 1000;
  }

  /**
   * Ends the context. Nothing to release any more: the deadline is `AbortSignal.timeout`'s,
   * whose timer does not keep the process alive and goes with the signal.
   */
  close(): void {
    // nothing to do (see above)
  }
}

/**
 * A decoded segment as the querier caches it: its readable series only, each one's chunk
 * refs built and its labels parsed once, so that a query matches its selector and cuts
 * chunks to its range without parsing, looking up or building anything per series.
 */
export interface LoadedSegment {
  /** Its readable series, indexed once (`@sieve/index`'s `indexSegment`). */
  readonly series: readonly IndexedSeries[];
  /** `labels[i]` is `series[i]`'s, parsed. */
  readonly labels: readonly Readonly<Record<string, string>>[];
  readonly bytes: number;
  /** Series positions by label name and value, made at a selector's first use (plan.ts). */
  postings?: Map<string, Map<string, number[]>>;
}
