/**
 * The plan of a query. Log query: index (segments cached) → series matching the selector →
 * chunk refs in range → bloom test → the gateway prunes → surviving chunks fetched in time
 * order in the query's direction through a bounded pool and a byte-budget cache → decoded
 * and run through the pipeline as they arrive, merged with the ingesters' unflushed data,
 * exact duplicates dropped, stopping once `limit` lines are certain. Metric query: split by
 * interval, each part pushed down (ingesters answer partial aggregates, chunks are folded
 * as they decode), merged, then LogQL's evaluation finishes the windows.
 *
 * This file is the facade that ties the steps together (parse, limits, deadline); each step
 * lives in its own file: `plan.ts`, `fetch.ts`, `logs.ts`, `metrics-query.ts`, `series.ts`.
 */
import type { ChunkReader } from "@sieve/chunk";
import { NO_RETENTION, Retention, type RetentionConfig } from "@sieve/logql";
import {
  evaluateInstant,
  evaluateRange,
  mergeMatrices,
  splitRange,
  type Expr,
  type Matrix,
  type RangeParams,
  type RangeVectors,
  type Vector,
} from "@sieve/logql";
import { ObjectCache } from "./cache.js";
import { SegmentListings } from "./listings.js";
import { limitsFor, smallestLimits, type QuerierConfig, type QueryLimits } from "./config.js";
import {
  QueryContext,
  type LoadedSegment,
  type QuerierParts,
  type QueryBudget,
} from "./context.js";
import { StoreDeleteRequests, type DeleteRequestsSource } from "./deletes.js";
import { FIRST_END_BYTES, TailSizes, type ChunkEnd } from "./fetch.js";
import { KEEP_ALL_FILTER, NO_INGESTERS, ingesterRefusalsAs400, type QuerierStore } from "./deps.js";
import type { ChunkFilter, IngesterQuerier, PatternSeries } from "@sieve/proto";
import { QueryError, maxEntriesLimit, queryTooLong } from "./errors.js";
import { LogqlError } from "@sieve/logql";
import type { QueryExplain } from "./explain.js";
import { ParsedLabels, ReadReport } from "./labels.js";
import { runLogs, type LogQuery, type LogResult } from "./logs.js";
import type { QuerierMetrics } from "./metrics.js";
import { evaluateMetric, type MetricRangeQuery } from "./metrics-query.js";
import { parseQuery, parseSelector } from "./parse.js";
import { readIndexStats, selectSeries, type IndexStats } from "./series.js";
import type { QueryStats } from "./stats.js";
import { runVolume, type VolumeData, type VolumeQuery } from "./volume.js";
import { warmQuerier, type RehearsalRunner, type WarmOptions, type WarmReport } from "./warm.js";

export { TopEntries } from "./logs.js";
export type { LogQuery, LogResult, ResultEntry } from "./logs.js";
export type { MetricRangeQuery } from "./metrics-query.js";
export { parseSelector } from "./parse.js";
export type { IndexStats } from "./series.js";

/** A metric query's answer: its samples, counters and, when asked, explain. */
export interface MetricResult<R extends Matrix | Vector> {
  readonly result: R;
  readonly stats: QueryStats;
  readonly explain?: QueryExplain;
}

/** What a querier is made of. */
export interface QuerierDeps {
  readonly config: QuerierConfig;
  readonly store: QuerierStore;
  /** Unflushed data; none when absent. */
  readonly ingesters?: IngesterQuerier;
  /** The bloom gateway; when absent every ref is kept (no pruning). */
  readonly chunkFilter?: ChunkFilter;
  readonly metrics?: QuerierMetrics;
  /** Where unreadable series and failed-open chunks are logged and counted. */
  readonly report?: ReadReport;
  /** The compactor's retention (`compactor.retentionEnabled` and its limits); none when absent. */
  readonly retention?: RetentionConfig;
  /**
   * The delete requests queries filter; default: read from `store` (cached
   * `deleteRequestsCacheMs`) for tenants whose `deletionMode` is not `disabled`.
   */
  readonly deletes?: DeleteRequestsSource;
  /**
   * The process's count of store writes (`@sieve/storage`'s `countingWrites`) when every
   * writer of the store counts in it (`sieve all`): index listings are cached while it is
   * unchanged. Absent: every query lists.
   */
  readonly storeWrites?: SharedArrayBuffer;
}

/**
 * The querier: the read side of Sieve behind the Loki query API. One instance serves every
 * tenant; its caches (index segments, chunks) are shared and byte-bounded.
 */
export class Querier {
  /** Its configuration (the HTTP layer reads the tail options and limits). */
  readonly config: QuerierConfig;
  /** What the query concerns (plan, fetch, logs, metrics, series) read through. */
  private readonly parts: QuerierParts;
  /** Where the querier counts (absent: not counted). */
  readonly metrics: QuerierMetrics | undefined;
  /** Where unreadable series and failed-open chunks are logged and counted. */
  readonly report: ReadReport;
  /** Decoded segments by key, sized by their encoded bytes. */
  readonly segments: ObjectCache<LoadedSegment>;
  /** Fetched chunks by key, as checked readers, sized by what they hold. */
  readonly chunks: ObjectCache<ChunkReader>;
  /** Chunk ends (footer and symbol filter) of chunks a query read no further (fetch.ts). */
  readonly chunkEnds: ObjectCache<ChunkEnd>;
  /** What each query may spend before it gives up with `OverBudget` ({@link withBudget}). */
  private readonly budget: QueryBudget | undefined = undefined;

  constructor(deps: QuerierDeps) {
    this.config = deps.config;
    this.metrics = deps.metrics;
    this.report = deps.report ?? new ReadReport();
    this.segments = new ObjectCache(deps.config.segmentCacheBytes, (v) => v.bytes);
    // The budget is shared: chunk ends (footer and symbol filter of chunks read no
    // further, a few KB each) take an eighth, thousands of them; readers the rest.
    const endBytes = Math.max(1, Math.floor(deps.config.chunkCacheBytes / 8));
    this.chunks = new ObjectCache(
      Math.max(1, deps.config.chunkCacheBytes - endBytes),
      (v) => v.retainedBytes,
    );
    this.chunkEnds = new ObjectCache(endBytes, (v) => v.retainedBytes);
    this.parts = {
      config: deps.config,
      store: deps.store,
      ingesters:
        deps.ingesters === undefined ? NO_INGESTERS : ingesterRefusalsAs400(deps.ingesters),
      chunkFilter: deps.chunkFilter ?? KEEP_ALL_FILTER,
      metrics: this.metrics,
      segments: this.segments,
      listings: new SegmentListings(deps.storeWrites),
      chunks: this.chunks,
      tails: new TailSizes(),
      chunkEnds: this.chunkEnds,
      endSizes: new TailSizes(FIRST_END_BYTES),
      labels: new ParsedLabels(this.report),
      retention: new Retention(deps.retention ?? NO_RETENTION),
      deletes:
        deps.deletes ??
        new StoreDeleteRequests(deps.store, {
          cacheMs: deps.config.deleteRequestsCacheMs,
          enabled: (tenant) => limitsFor(deps.config, tenant).deletionMode !== "disabled",
        }),
    };
  }

  /**
   * Loads the last days of index and their bloom blocks before queries come, then
   * rehearses queries on `run` when given (warm.ts).
   */
  warm(
    tenants: readonly string[],
    options: WarmOptions,
    run?: RehearsalRunner,
  ): Promise<WarmReport> {
    return warmQuerier(this.parts, tenants, options, run);
  }

  /**
   * This querier over the same caches and gateway, without ingesters: what a warm-up's
   * rehearsal queries run on (they must not call ingesters that are not serving yet).
   */
  withoutIngesters(): Querier {
    const view = Object.create(this) as Querier;
    Object.defineProperty(view, "parts", { value: { ...this.parts, ingesters: NO_INGESTERS } });
    return view;
  }

  /**
   * This querier over the same parts, its queries giving up with `OverBudget` past
   * `budget` (what a query on the main thread may spend: inline.ts).
   */
  withBudget(budget: QueryBudget): Querier {
    const view = Object.create(this) as Querier;
    Object.defineProperty(view, "budget", { value: budget });
    return view;
  }

  /**
   * The limits of `tenant`; of several (`a|b`, a multi-tenant read), each the smallest
   * positive one of theirs, as Loki's `SmallestPositiveNonZero…PerTenant`.
   */
  limits(tenant: string): QueryLimits {
    if (!tenant.includes("|")) return limitsFor(this.config, tenant);
    return smallestLimits(tenant.split("|").map((t) => limitsFor(this.config, t)));
  }

  /** Refuses a range longer than the tenant's `maxQueryLengthMs` (Loki's words). */
  checkLength(limits: QueryLimits, start: bigint, end: bigint): void {
    const max = limits.maxQueryLengthMs;
    if (max > 0 && end - start > BigInt(max) * 1_000_000n) throw queryTooLong(end - start, max);
  }

  /**
   * Parses and validates `query` (LogQL's refusals as 400s). A caller that must read the
   * query (log or metric?) passes the result on as `expr`, so it is parsed once.
   */
  static parse(query: string): Expr {
    return parseQuery(query);
  }

  /** A log query: the best `limit` entries in `direction` over [start, end). */
  async selectLogs(q: LogQuery): Promise<LogResult> {
    const expr = q.expr ?? parseQuery(q.query);
    if (expr.kind !== "log")
      throw new QueryError("bad_request", "a metric query has no log lines: use a log query");
    const limits = this.limits(q.tenant);
    const max = limits.maxEntriesLimitPerQuery;
    if (max > 0 && q.limit > max) throw maxEntriesLimit(q.limit, max);
    this.checkLength(limits, q.start, q.end);
    const ctx = new QueryContext(limits, q.explain, this.budget);
    const entries = await runLogs(this.parts, expr, q, ctx);
    ctx.stats.entriesReturned = entries.length;
    return { entries, stats: ctx.stats, ...explained(ctx) };
  }

  private async runMetric(
    tenant: string,
    query: string | Expr,
    p: RangeParams,
    explain: boolean,
    evaluate: (expr: Expr, p: RangeParams, rangeVectors: RangeVectors) => Matrix | Vector,
  ): Promise<MetricResult<Matrix | Vector>> {
    const expr = typeof query === "string" ? parseQuery(query) : query;
    if (expr.kind === "log")
      throw new QueryError("bad_request", "a log query has no samples: use a metric query");
    const limits = this.limits(tenant);
    this.checkLength(limits, p.startNs, p.endNs);
    const ctx = new QueryContext(limits, explain, this.budget);
    // Loki's split_queries_by_interval: the steps cut at multiples of the interval, the
    // parts run `splitConcurrency` at a time on this worker (their fetches and ingester
    // calls overlap), their matrices concatenated: the unsplit result (logql's split.ts).
    // An explained query is not split: its explain lists each chunk of the range once.
    const interval = explain ? 0n : BigInt(this.config.splitQueriesByIntervalMs) * 1_000_000n;
    const splits = splitRange(p, interval);
    const results: (Matrix | Vector)[] = new Array<Matrix | Vector>(splits.length);
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < splits.length) {
        const i = next++;
        const part = splits[i]!;
        results[i] = await evaluateMetric(
          this.parts,
          tenant,
          expr,
          part,
          (rangeVectors) => evaluate(expr, part, rangeVectors),
          ctx,
        );
      }
    };
    const lanes = Math.max(1, Math.min(this.config.splitConcurrency, splits.length));
    await Promise.all(Array.from({ length: lanes }, lane));
    let result: Matrix | Vector;
    try {
      result = splits.length === 1 ? results[0]! : mergeMatrices(results as Matrix[]);
    } catch (error) {
      if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
      throw error;
    }
    ctx.stats.entriesReturned = result.length;
    return { result, stats: ctx.stats, ...explained(ctx) };
  }

  /** A metric query at every step of [start, end]: Loki's matrix. */
  selectMatrix(q: MetricRangeQuery): Promise<MetricResult<Matrix>> {
    return this.runMetric(
      q.tenant,
      q.expr ?? q.query,
      { startNs: q.start, endNs: q.end, stepNs: q.step },
      q.explain === true,
      (expr, p, rangeVectors) => evaluateRange(expr, [], p, { rangeVectors }),
    ) as Promise<MetricResult<Matrix>>;
  }

  /** A metric query at one time: Loki's vector; `explain` as {@link MetricRangeQuery}'s. */
  selectVector(
    tenant: string,
    query: string | Expr,
    time: bigint,
    explain = false,
  ): Promise<MetricResult<Vector>> {
    return this.runMetric(
      tenant,
      query,
      { startNs: time, endNs: time, stepNs: 0n },
      explain,
      (expr, _p, rangeVectors) => evaluateInstant(expr, [], time, { rangeVectors }),
    ) as Promise<MetricResult<Vector>>;
  }

  /** Label sets of the tenant's series over [start, end] matching any group (all when none). */
  async series(
    tenant: string,
    groups: readonly string[],
    start: bigint,
    end: bigint,
  ): Promise<Readonly<Record<string, string>>[]> {
    const selectors = groups.map(parseSelector);
    const limits = this.limits(tenant);
    this.checkLength(limits, start, end);
    const ctx = new QueryContext(limits, false, this.budget);
    return await selectSeries(this.parts, tenant, groups, selectors, start, end, ctx);
  }

  /** Label names over [start, end], of the series `query` selects (all when undefined). */
  async labelNames(tenant: string, start: bigint, end: bigint, query?: string): Promise<string[]> {
    const names = new Set<string>();
    for (const l of await this.series(tenant, query === undefined ? [] : [query], start, end)) {
      for (const n of Object.keys(l)) names.add(n);
    }
    return [...names].sort();
  }

  /** Values of label `name` over [start, end], of the series `query` selects. */
  async labelValues(
    tenant: string,
    name: string,
    start: bigint,
    end: bigint,
    query?: string,
  ): Promise<string[]> {
    const values = new Set<string>();
    for (const l of await this.series(tenant, query === undefined ? [] : [query], start, end)) {
      const v = l[name];
      if (v !== undefined) values.add(v);
    }
    return [...values].sort();
  }

  /** Streams, chunks, bytes and entries the index holds for `query` over [start, end]. */
  async indexStats(tenant: string, query: string, start: bigint, end: bigint): Promise<IndexStats> {
    const matchers = parseSelector(query);
    const limits = this.limits(tenant);
    this.checkLength(limits, start, end);
    const ctx = new QueryContext(limits, false, this.budget);
    return await readIndexStats(this.parts, tenant, query, matchers, start, end, ctx);
  }

  /**
   * `index/volume[_range]`: bytes per series or label over the query's range, from the
   * index and the ingesters (see volume.ts). 404 when the tenant's `volumeEnabled` is off.
   */
  async volume(tenant: string, q: VolumeQuery): Promise<{ data: VolumeData; stats: QueryStats }> {
    const limits = this.limits(tenant);
    if (!limits.volumeEnabled) throw new QueryError("not_found", "not found");
    this.checkLength(limits, q.start, q.end);
    const ctx = new QueryContext(limits, false, this.budget);
    const data = await runVolume(this.parts, tenant, q, limits, ctx);
    return { data, stats: ctx.stats };
  }

  /**
   * The patterns the ingesters learned from the streams `query` (a stream selector)
   * selects, with their line counts per `step` over [start, end): Loki's pattern
   * ingesters' answer. Patterns live in the ingesters' memory only (3 h by default).
   */
  async patterns(
    tenant: string,
    query: string,
    start: bigint,
    end: bigint,
    step: bigint,
  ): Promise<PatternsAnswer> {
    parseSelector(query);
    const limits = this.limits(tenant);
    this.checkLength(limits, start, end);
    const ctx = new QueryContext(limits, false, this.budget);
    const stepMs = Number(step / 1_000_000n);
    const data = await ctx.race(
      this.parts.ingesters.patterns(
        { tenant, selector: query, start, end, stepMs: Math.max(1, stepMs) },
        ctx.callOptions(),
      ),
    );
    return { status: "success", data };
  }
}

/** Loki's answer of `GET /loki/api/v1/patterns`. */
export interface PatternsAnswer {
  readonly status: "success";
  readonly data: readonly PatternSeries[];
}

/** The explain of a query that asked for one, as a result's field. */
function explained(ctx: QueryContext): { explain?: QueryExplain } {
  return ctx.explain === undefined ? {} : { explain: ctx.explain.toJSON() };
}
