/**
 * What one query runs with: its deadline and counters ({@link QueryContext}), and the
 * querier's shared parts it reads through ({@link QuerierParts}).
 */
import type { SegmentListings } from "./listings.js";
import type { ChunkReader } from "@sieve/chunk";
import type { Retention } from "@sieve/logql";
import type { IndexedSeries } from "@sieve/index";
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

/** What the signal of a query past its deadline aborts with (`AbortSignal.timeout`'s). */
function timeoutReason(): DOMException {
  return new DOMException("The operation was aborted due to timeout", "TimeoutError");
}

/**
 * What a query on the main thread may spend before it is handed to a query worker (see
 * inline.ts): wall time, and chunks in range (its bloom stage is one synchronous pass).
 */
export interface QueryBudget {
  readonly ms: number;
  readonly chunks: number;
}

/**
 * A query went past its {@link QueryBudget}: not an answer, but a sign to run it again
 * where time is not counted so (a query worker). Nothing of the attempt is kept.
 */
export class OverBudget extends Error {
  override readonly name = "OverBudget";
}

/** The deadline, counters, memory budget and, when asked, explain of one query. */
export class QueryContext {
  readonly stats = new QueryStats();
  /** Where the plan says why each chunk was kept or pruned (`explain=true` only). */
  readonly explain: Explain | undefined;
  /** Bytes held outside the answer buffer (ingester entries, metric rows). */
  private heldBytes = 0;
  readonly started = performance.now();
  private readonly deadline: number;
  /** Whether {@link deadline} is the budget's end (an {@link OverBudget}), not the timeout. */
  private readonly budgeted: boolean;
  /** Made at the first use of {@link signal}: most queries hand it to nothing. */
  private controller: AbortController | undefined;
  /** The rejections of the races pending now (see {@link race}). */
  private readonly waiting = new Set<(error: Error) => void>();
  /** Fires at the deadline, set while a race is pending (see {@link race}). */
  private timer: NodeJS.Timeout | undefined;
  private expired = false;

  constructor(
    readonly limits: QueryLimits,
    explain = false,
    private readonly budget?: QueryBudget,
  ) {
    this.explain = explain ? new Explain() : undefined;
    const timeoutMs = limits.queryTimeoutMs;
    const timeout = timeoutMs > 0 ? this.started + timeoutMs : Number.POSITIVE_INFINITY;
    const end = budget === undefined ? Number.POSITIVE_INFINITY : this.started + budget.ms;
    this.budgeted = end < timeout;
    this.deadline = Math.min(timeout, end);
  }

  /** What passing the deadline throws: Loki's timeout, or {@link OverBudget}. */
  private late(): Error {
    return this.budgeted
      ? new OverBudget(`past the budget of ${this.budget!.ms} ms`)
      : new QueryError("timeout", ERR_DEADLINE_EXCEEDED);
  }

  /** Throws {@link OverBudget} when a budget is set and `chunks` in range pass it. */
  afford(chunks: number): void {
    const max = this.budget?.chunks;
    if (max !== undefined && chunks > max) throw new OverBudget(`${chunks} chunks in range`);
  }

  /**
   * Aborts at the query's deadline (never without `queryTimeoutMs`): passed to the ingesters
   * and to the store reads that are the query's own, which then stop. It aborts on time
   * while the work holding it is raced ({@link race}), as all of it is.
   */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.expired) this.controller.abort(timeoutReason());
    }
    return this.controller.signal;
  }

  /** Throws the timeout error (or {@link OverBudget}) once the deadline has passed. */
  check(): void {
    if (performance.now() > this.deadline) throw this.late();
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
   * `{ signal }` for a call that may not read it: the query's {@link signal}, made when read.
   * Most needles' index listings are answered by the cache, and in `sieve all` their
   * ingesters' calls empty by the watermark, without it; making it took 8 µs of a needle's
   * ~180 on the main thread.
   */
  signalOnUse(): { readonly signal: AbortSignal } {
    const signal = (): AbortSignal => this.signal;
    return {
      get signal(): AbortSignal {
        return signal();
      },
    };
  }

  /**
   * What an ingester call may take: the query's signal ({@link signalOnUse}), and the time
   * left before the deadline, if any (the HTTP client sends it on, for the ingester to stop
   * there).
   */
  callOptions(): { readonly signal: AbortSignal; timeoutMs?: number } {
    const options = this.signalOnUse();
    if (this.deadline === Number.POSITIVE_INFINITY) return options;
    return Object.assign(options, {
      timeoutMs: Math.max(1, Math.ceil(this.deadline - performance.now())),
    });
  }

  /**
   * `p`, or the timeout error once the deadline has passed: as soon as it passes (work
   * that does not take the signal, or a shared cache load, is not waited for), or when `p`
   * fails because the signal aborted it.
   *
   * One timer a query, set only while a race is pending and cleared when the last one
   * settles, and a set of waiters: not `AbortSignal.timeout` and an abort listener a race,
   * which cost a needle query ~7 of its ~44 µs on a warm worker (its weak reference,
   * EventTarget and listeners; `node --cpu-prof` over 20,000 queries).
   */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.deadline === Number.POSITIVE_INFINITY) return p;
    const left = this.deadline - performance.now();
    if (this.expired || left <= 0) {
      p.catch(() => undefined); // settled later, by nobody: not an unhandled rejection
      this.expire();
      return Promise.reject(this.late());
    }
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      this.timer ??= setTimeout(() => {
        this.expire();
      }, Math.ceil(left));
      p.then(
        (value) => {
          this.settled(reject);
          resolve(value);
        },
        (error: unknown) => {
          this.settled(reject);
          reject(this.expired ? this.late() : (error as Error));
        },
      );
    });
  }

  /** A race is over: the timer goes with the last one. */
  private settled(reject: (error: Error) => void): void {
    this.waiting.delete(reject);
    if (this.waiting.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** The deadline has passed: the signal aborts and every pending race rejects. */
  private expire(): void {
    if (this.expired) return;
    this.expired = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.controller?.abort(timeoutReason());
    for (const reject of this.waiting) reject(this.late());
    this.waiting.clear();
  }

  /** Wall time so far, in seconds. */
  elapsed(): number {
    return (performance.now() - this.started) / 1000;
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
  /** The series selectors matched, by selectors, made at their first use (index-read.ts). */
  selections?: Map<string, Selection>;
}

/** The series of a segment some selectors match, and the span of their chunks. */
export interface Selection {
  readonly series: readonly IndexedSeries[];
  /** The first chunk's start and the last chunk's end among them (ns). */
  readonly from: bigint;
  readonly through: bigint;
}
