/**
 * The plan of a query. Log query: index (segments cached) → series matching the selector →
 * chunk refs in range → bloom test → the gateway prunes → surviving chunks fetched in time
 * order in the query's direction through a bounded pool and a byte-budget cache → decoded
 * and run through the pipeline as they arrive, merged with the ingesters' unflushed data,
 * exact duplicates dropped, stopping once `limit` lines are certain. Metric query: the same
 * plan without a limit over the range plus the longest lookback, then LogQL's evaluation.
 */
import { ChunkReader } from "@sieve/chunk";
import type { MetadataPair } from "@sieve/chunk";
import {
  IndexError,
  decodeSegment,
  listSegments,
  mergeSegments,
  type IndexSegment,
  type IndexedChunk,
  type IndexedSeries,
  type SegmentChunk,
} from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import {
  LogqlError,
  compilePipeline,
  evaluateInstant,
  evaluateRange,
  extractBloomTests,
  logSelectors,
  matchesLabels,
  parseExpr,
  parseSyntax,
  printExpr,
  printSelector,
  type BloomTest,
  type Expr,
  type LogExpr,
  type Matcher,
  type Matrix,
  type SampleExpr,
  type StreamEntries,
  type Vector,
} from "@sieve/logql";
import { LRUCache } from "lru-cache";
import { ObjectCache } from "./cache.js";
import { limitsFor, type QuerierConfig, type QueryLimits } from "./config.js";
import {
  KEEP_ALL_FILTER,
  NO_INGESTERS,
  type ChunkFilter,
  type FilterResponse,
  type FilterSeries,
  type IngesterQuerier,
  type QuerierStore,
} from "./deps.js";
import {
  ERR_DEADLINE_EXCEEDED,
  QueryError,
  maxChunks,
  maxEntriesLimit,
  queryTooLong,
} from "./errors.js";
import type { QuerierMetrics } from "./metrics.js";
import type { Direction } from "./params.js";
import { QueryStats } from "./stats.js";

/** What a querier is made of. */
export interface QuerierDeps {
  readonly config: QuerierConfig;
  readonly store: QuerierStore;
  /** Unflushed data; none when absent. */
  readonly ingesters?: IngesterQuerier;
  /** The bloom gateway; when absent every ref is kept (no pruning). */
  readonly chunkFilter?: ChunkFilter;
  readonly metrics?: QuerierMetrics;
}

/** One line of a log query's answer. Treat the records as read-only. */
export interface ResultEntry {
  readonly timestamp: bigint;
  readonly line: string;
  /** Every label after the pipeline (stream, structured metadata, parsed). */
  readonly labels: Readonly<Record<string, string>>;
  /** The stream's own labels and the entry's metadata, to categorize `labels`. */
  readonly stream: Readonly<Record<string, string>>;
  readonly metadata: Readonly<Record<string, string>>;
  /** Sort key after the timestamp: labels, line, metadata (memoised). */
  key?: string;
}

/** A log query's answer: entries in the query's direction across all streams. */
export interface LogResult {
  readonly entries: ResultEntry[];
  readonly stats: QueryStats;
}

/** A log query. Times are Unix ns, [start, end). */
export interface LogQuery {
  readonly tenant: string;
  readonly query: string;
  readonly start: bigint;
  readonly end: bigint;
  readonly limit: number;
  readonly direction: Direction;
}

/** A metric range query: steps from start to end inclusive. */
export interface MetricRangeQuery {
  readonly tenant: string;
  readonly query: string;
  readonly start: bigint;
  readonly end: bigint;
  readonly step: bigint;
}

/** What `/index/stats` answers (Loki's shape). */
export interface IndexStats {
  streams: number;
  chunks: number;
  bytes: number;
  entries: number;
}

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});
const DEADLINE_CHECK_EVERY = 4096;

/** The deadline and counters of one query. */
class QueryContext {
  readonly stats = new QueryStats();
  readonly started = performance.now();
  private readonly deadline: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly expired: Promise<never>;

  constructor(readonly limits: QueryLimits) {
    this.deadline =
      limits.queryTimeoutMs > 0 ? this.started + limits.queryTimeoutMs : Number.POSITIVE_INFINITY;
    this.expired = new Promise<never>((_, reject) => {
      if (limits.queryTimeoutMs > 0) {
        this.timer = setTimeout(() => {
          reject(new QueryError("timeout", ERR_DEADLINE_EXCEEDED));
        }, limits.queryTimeoutMs);
        this.timer.unref();
      }
    });
    this.expired.catch(() => undefined);
  }

  /** Throws the timeout error once the deadline has passed. */
  check(): void {
    if (performance.now() > this.deadline) throw new QueryError("timeout", ERR_DEADLINE_EXCEEDED);
  }

  /** `p`, or the timeout error when the deadline comes first. */
  race<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.expired]);
  }

  /** Wall time so far, in seconds. */
  elapsed(): number {
    return (performance.now() - this.started) / 1000;
  }

  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

/** A chunk the plan will read, with its series. */
interface PlannedChunk {
  readonly chunk: IndexedChunk;
  readonly labels: Readonly<Record<string, string>>;
}

function metadataRecord(pairs: readonly MetadataPair[]): Readonly<Record<string, string>> {
  if (pairs.length === 0) return EMPTY;
  const out: Record<string, string> = {};
  for (const p of pairs) out[p.name] = p.value;
  return out;
}

const labelKeys = new WeakMap<object, string>();

/** A canonical key of a label set (sorted names), memoised per object. */
function labelsKey(labels: Readonly<Record<string, string>>): string {
  let key = labelKeys.get(labels);
  if (key === undefined) {
    const names = Object.keys(labels).sort();
    key = JSON.stringify(names.map((n) => [n, labels[n]]));
    labelKeys.set(labels, key);
  }
  return key;
}

function entryKey(e: ResultEntry): string {
  if (e.key === undefined) {
    const meta = e.metadata === EMPTY ? "" : labelsKey(e.metadata);
    e.key = `${labelsKey(e.labels)}\u0000${e.line}\u0000${meta}`;
  }
  return e.key;
}

/**
 * The best `limit` entries in a direction under a total order (timestamp, then labels,
 * line, metadata), so equal timestamps always come out in the same order and logcli's
 * paging neither repeats nor loses lines. Entries equal under the order are exact
 * duplicates and kept once. Candidates are buffered up to twice the limit, then sorted
 * and cut: amortised O(log limit) per entry, and once full, `worse(ts)` lets a reader stop.
 */
export class TopEntries {
  private buf: ResultEntry[] = [];
  private threshold: ResultEntry | undefined;
  /** Exact duplicates dropped. */
  duplicates = 0;

  constructor(
    private readonly limit: number,
    private readonly backward: boolean,
  ) {}

  /** Order in the direction: negative when `a` comes first. */
  compare(a: ResultEntry, b: ResultEntry): number {
    if (a.timestamp !== b.timestamp) {
      const earlier = a.timestamp < b.timestamp ? -1 : 1;
      return this.backward ? -earlier : earlier;
    }
    const ka = entryKey(a);
    const kb = entryKey(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  }

  /** True once `limit` entries are held: later candidates must beat the last of them. */
  get full(): boolean {
    return this.threshold !== undefined;
  }

  /** True when no entry at `ts` can make the answer (it is past the limit-th entry). */
  worse(ts: bigint): boolean {
    const t = this.threshold;
    if (t === undefined) return false;
    return this.backward ? ts < t.timestamp : ts > t.timestamp;
  }

  add(e: ResultEntry): void {
    const t = this.threshold;
    if (t !== undefined) {
      const c = this.compare(e, t);
      if (c > 0) return;
      if (c === 0) {
        this.duplicates++;
        return;
      }
    }
    this.buf.push(e);
    if (this.buf.length >= Math.max(2 * this.limit, 64)) this.compact();
  }

  private compact(): void {
    this.buf.sort((a, b) => this.compare(a, b));
    const kept: ResultEntry[] = [];
    for (const e of this.buf) {
      const last = kept[kept.length - 1];
      if (last !== undefined && this.compare(last, e) === 0) {
        this.duplicates++;
        continue;
      }
      kept.push(e);
      if (kept.length === this.limit) break;
    }
    this.buf = kept;
    if (kept.length === this.limit) this.threshold = kept[kept.length - 1];
  }

  /**
   * Sorts and cuts once `limit` candidates are buffered, so that {@link full} and
   * {@link worse} can stop the reader early (called between chunks).
   */
  settle(): void {
    if (this.threshold === undefined && this.buf.length >= this.limit) this.compact();
  }

  /** The answer, in the direction. */
  result(): ResultEntry[] {
    this.compact();
    return this.buf;
  }
}

function bloomGroup(c: IndexedChunk): string {
  return c.bloom.kind === "block"
    ? `b\u0000${c.bloom.key}\u0000${c.bloom.offset}`
    : `m\u0000${c.bloom.reason}`;
}

function chunkId(fp: bigint, c: { from: bigint; through: bigint; checksum: number }): string {
  return `${fp}:${c.from}:${c.through}:${c.checksum}`;
}

function segmentChunk(c: IndexedChunk): SegmentChunk {
  return {
    from: c.ref.from,
    through: c.ref.through,
    checksum: c.ref.checksum,
    bytes: c.bytes,
    entries: c.entries,
    prefixed: c.prefixed,
  };
}

/** Parses a query, mapping LogQL's refusals to 400s with LogQL's (Loki's) text. */
function parseQuery(query: string): Expr {
  try {
    return parseExpr(query);
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    throw error;
  }
}

/** Parses a stream selector (`{a="b"}`) of the series, labels and stats APIs. */
export function parseSelector(text: string): Matcher[] {
  let e: Expr;
  try {
    e = parseSyntax(text);
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    throw error;
  }
  if (e.kind !== "log" || e.pipeline.length > 0) {
    throw new QueryError(
      "bad_request",
      `parse error : only a stream selector is allowed here: ${text}`,
    );
  }
  return e.matchers;
}

/** The longest lookback (range + offset) and smallest offset of a metric query, ns. */
function lookback(e: SampleExpr): { back: bigint; minOffset: bigint } {
  let back = 0n;
  let minOffset = 0n;
  const walk = (x: SampleExpr): void => {
    switch (x.kind) {
      case "rangeAgg": {
        const b = x.range.rangeNs + x.range.offsetNs;
        if (b > back) back = b;
        if (x.range.offsetNs < minOffset) minOffset = x.range.offsetNs;
        return;
      }
      case "vectorAgg":
      case "labelReplace":
        walk(x.inner);
        return;
      case "binary":
        walk(x.left);
        walk(x.right);
        return;
      case "literal":
      case "vector":
        return;
    }
  };
  walk(e);
  return { back, minOffset };
}

/**
 * The querier: the read side of Sieve behind the Loki query API. One instance serves every
 * tenant; its caches (index segments, chunks) are shared and byte-bounded.
 */
export class Querier {
  private readonly config: QuerierConfig;
  private readonly store: QuerierStore;
  private readonly ingesters: IngesterQuerier;
  private readonly chunkFilter: ChunkFilter;
  /** Where the querier counts (absent: not counted). */
  readonly metrics: QuerierMetrics | undefined;
  /** Decoded segments by key, sized by their encoded bytes. */
  readonly segments: ObjectCache<{ segment: IndexSegment; bytes: number }>;
  /** Encoded chunks by key. */
  readonly chunks: ObjectCache<Uint8Array>;
  private readonly parsedLabels = new LRUCache<string, Readonly<Record<string, string>>>({
    max: 100_000,
  });

  constructor(deps: QuerierDeps) {
    this.config = deps.config;
    this.store = deps.store;
    this.ingesters = deps.ingesters ?? NO_INGESTERS;
    this.chunkFilter = deps.chunkFilter ?? KEEP_ALL_FILTER;
    this.metrics = deps.metrics;
    this.segments = new ObjectCache(deps.config.segmentCacheBytes, (v) => v.bytes);
    this.chunks = new ObjectCache(deps.config.chunkCacheBytes, (v) => v.byteLength);
  }

  /** The limits of `tenant`. */
  limits(tenant: string): QueryLimits {
    return limitsFor(this.config, tenant);
  }

  /** Refuses a range longer than the tenant's `maxQueryLengthMs` (Loki's words). */
  checkLength(limits: QueryLimits, start: bigint, end: bigint): void {
    const max = limits.maxQueryLengthMs;
    if (max > 0 && end - start > BigInt(max) * 1_000_000n) throw queryTooLong(end - start, max);
  }

  /** Whether `query` is a log query (answered as streams) rather than a metric query. */
  static isLogQuery(query: string): boolean {
    return parseQuery(query).kind === "log";
  }

  private labelsOf(canonical: string): Readonly<Record<string, string>> {
    let labels = this.parsedLabels.get(canonical);
    if (labels === undefined) {
      const out: Record<string, string> = {};
      for (const l of parseLabels(canonical)) out[l.name] = l.value;
      labels = out;
      this.parsedLabels.set(canonical, labels);
    }
    return labels;
  }

  /** The tenant's series and chunks over [from, through] (inclusive), from cached segments. */
  private async readSeries(
    tenant: string,
    from: bigint,
    through: bigint,
    ctx: QueryContext,
  ): Promise<IndexedSeries[]> {
    return ctx.stats.time("index", async () => {
      let keys: string[];
      try {
        keys = await ctx.race(listSegments(this.store, tenant, from, through));
      } catch (error) {
        if (error instanceof IndexError && error.code === "invalid_argument") {
          throw new QueryError("bad_request", error.message);
        }
        throw error;
      }
      const segments = await ctx.race(
        Promise.all(
          keys.map(async (key) => {
            const { value } = await this.segments.get(key, async () => {
              const bytes = await this.store.get(key);
              try {
                return { segment: decodeSegment(bytes), bytes: bytes.byteLength };
              } catch (error) {
                if (error instanceof IndexError) {
                  const wrapped = new IndexError(error.code, `${key}: ${error.message}`);
                  wrapped.cause = error;
                  throw wrapped;
                }
                throw error;
              }
            });
            return value.segment;
          }),
        ),
      );
      ctx.stats.segmentsRead += segments.length;
      return mergeSegments(tenant, segments, from, through);
    });
  }

  /**
   * Index → series matching any of `selectors` → chunks in [from, through] → pruned by the
   * gateway when the query has a bloom test. Refuses more chunks than `maxChunksPerQuery`.
   */
  private async plan(
    tenant: string,
    selectors: readonly (readonly Matcher[])[],
    from: bigint,
    through: bigint,
    test: BloomTest,
    ctx: QueryContext,
  ): Promise<PlannedChunk[]> {
    const all = await this.readSeries(tenant, from, through, ctx);
    const matched: { series: IndexedSeries; labels: Readonly<Record<string, string>> }[] = [];
    let inRange = 0;
    for (const s of all) {
      const labels = this.labelsOf(s.labels);
      if (!selectors.some((m) => matchesLabels(m, labels))) continue;
      matched.push({ series: s, labels });
      inRange += s.chunks.length;
    }
    const stats = ctx.stats;
    stats.seriesMatched = matched.length;
    stats.chunksInRange = inRange;
    this.metrics?.chunksInRange.inc(inRange);
    const max = ctx.limits.maxChunksPerQuery;
    if (max > 0 && inRange > max) throw maxChunks(max, inRange);
    if (test.kind === "all" || inRange === 0) {
      return matched.flatMap(({ series, labels }) =>
        series.chunks.map((chunk) => ({ chunk, labels })),
      );
    }
    stats.bloomsUsed = true;
    const groups = new Map<string, FilterSeries>();
    for (const { series } of matched) {
      for (const c of series.chunks) {
        const key = `${series.fingerprint}\u0000${bloomGroup(c)}`;
        let g = groups.get(key);
        if (g === undefined) {
          g = {
            fingerprint: series.fingerprint,
            labels: series.labels,
            bloom: c.bloom,
            chunks: [],
          };
          groups.set(key, g);
        }
        g.chunks.push(segmentChunk(c));
      }
    }
    let response: FilterResponse;
    try {
      response = await stats.time("blooms", () =>
        ctx.race(
          this.chunkFilter.filterChunkRefs({
            tenant,
            from,
            through,
            test,
            series: [...groups.values()],
          }),
        ),
      );
    } catch (error) {
      if (error instanceof QueryError) throw error; // the query's own deadline
      // Invariant 1: a gateway that fails means "may match", never "no match".
      stats.bloom = {
        series: groups.size,
        seriesSkipped: 0,
        chunks: inRange,
        chunksPruned: 0,
        blocksRead: 0,
        cacheHits: 0,
        failedOpen: { gateway_error: inRange },
      };
      return matched.flatMap(({ series, labels }) =>
        series.chunks.map((chunk) => ({ chunk, labels })),
      );
    }
    stats.bloom = response.stats;
    const kept = new Set<string>();
    for (const s of response.series) for (const c of s.chunks) kept.add(chunkId(s.fingerprint, c));
    const out: PlannedChunk[] = [];
    for (const { series, labels } of matched) {
      for (const chunk of series.chunks) {
        if (kept.has(chunkId(series.fingerprint, chunk.ref))) out.push({ chunk, labels });
      }
    }
    stats.chunksPrunedByBlooms = inRange - out.length;
    this.metrics?.chunksPruned.inc(inRange - out.length);
    return out;
  }

  /**
   * Fetches chunks in the given order, `maxConcurrentFetches` ahead of the reader, through
   * the chunk cache. Stops starting fetches once `wanted` says a chunk cannot matter
   * (chunks are ordered so that every later one cannot either).
   */
  private async *fetchInOrder(
    chunks: readonly PlannedChunk[],
    ctx: QueryContext,
    wanted: (c: PlannedChunk) => boolean = () => true,
  ): AsyncGenerator<{ planned: PlannedChunk; bytes: Uint8Array }> {
    const stats = ctx.stats;
    const pending: Promise<{ planned: PlannedChunk; bytes: Uint8Array }>[] = [];
    let next = 0;
    let stopped = false;
    const start = (): void => {
      if (stopped || next >= chunks.length) return;
      const planned = chunks[next++]!;
      if (!wanted(planned)) {
        stopped = true;
        return;
      }
      const p = this.chunks
        .get(planned.chunk.key, () => this.store.get(planned.chunk.key))
        .then(({ value, hit }) => {
          stats.chunksFetched++;
          this.metrics?.chunksFetched.inc();
          if (hit) stats.chunkCacheHits++;
          else {
            stats.bytesFetched += value.byteLength;
            this.metrics?.bytesFetched.inc(value.byteLength);
          }
          return { planned, bytes: value };
        });
      p.catch(() => undefined); // awaited below; a reader that stops early leaves it behind
      pending.push(p);
    };
    for (let i = 0; i < this.config.maxConcurrentFetches; i++) start();
    while (pending.length > 0) {
      const p = pending.shift()!;
      const got = await stats.time("fetch", () => ctx.race(p));
      start();
      yield got;
    }
  }

  /** A log query: the best `limit` entries in `direction` over [start, end). */
  async selectLogs(q: LogQuery): Promise<LogResult> {
    const expr = parseQuery(q.query);
    if (expr.kind !== "log")
      throw new QueryError("bad_request", "a metric query has no log lines: use a log query");
    const limits = this.limits(q.tenant);
    const max = limits.maxEntriesLimitPerQuery;
    if (max > 0 && q.limit > max) throw maxEntriesLimit(q.limit, max);
    this.checkLength(limits, q.start, q.end);
    const ctx = new QueryContext(limits);
    try {
      const entries = await this.runLogs(expr, q, ctx);
      ctx.stats.entriesReturned = entries.length;
      return { entries, stats: ctx.stats };
    } finally {
      ctx.close();
    }
  }

  private async runLogs(expr: LogExpr, q: LogQuery, ctx: QueryContext): Promise<ResultEntry[]> {
    const stats = ctx.stats;
    const backward = q.direction === "backward";
    const top = new TopEntries(q.limit, backward);
    const pipeline = compilePipeline(expr.pipeline);
    const testLine = pipeline.lineOnly ? pipeline.testLine : undefined;
    if (q.end <= q.start) return [];
    const through = q.end - 1n;
    const [planned, fromIngesters] = await Promise.all([
      this.plan(q.tenant, [expr.matchers], q.start, through, extractBloomTests(expr), ctx),
      stats.time("ingester", () =>
        ctx.race(
          this.ingesters.query({
            tenant: q.tenant,
            selector: printSelector(expr.matchers),
            query: printExpr(expr),
            start: q.start,
            end: q.end,
            direction: q.direction,
            limit: q.limit,
          }),
        ),
      ),
    ]);
    const t0 = performance.now();
    let fetchBefore = stats.stages.fetch;
    let n = 0;
    for (const s of fromIngesters) {
      const labels = this.labelsOf(s.labels);
      stats.ingesterStreams++;
      for (const e of s.entries) {
        if (e.timestamp < q.start || e.timestamp >= q.end) continue;
        stats.ingesterLines++;
        stats.ingesterBytes += e.line.length;
        if (top.worse(e.timestamp)) break;
        const metadata =
          Object.keys(e.structuredMetadata).length === 0 ? EMPTY : e.structuredMetadata;
        const out = pipeline.process({
          timestamp: e.timestamp,
          line: e.line,
          labels,
          structuredMetadata: metadata,
        });
        if (out === null) continue;
        stats.linesMatched++;
        top.add({
          timestamp: e.timestamp,
          line: out.line,
          labels: out.labels,
          stream: labels,
          metadata,
        });
      }
    }
    // Chunks in the direction: forward by start time, backward by end time, so once the
    // limit-th line is before the next chunk's start (after its end), no later chunk can
    // beat it either.
    const ordered = [...planned].sort((a, b) => {
      const x = backward ? b.chunk.ref.through : a.chunk.ref.from;
      const y = backward ? a.chunk.ref.through : b.chunk.ref.from;
      return x < y ? -1 : x > y ? 1 : 0;
    });
    top.settle();
    const cannotBeat = (c: PlannedChunk): boolean =>
      top.full && top.worse(backward ? c.chunk.ref.through : c.chunk.ref.from);
    for await (const { planned: p, bytes } of this.fetchInOrder(
      ordered,
      ctx,
      (c) => !cannotBeat(c),
    )) {
      top.settle();
      if (cannotBeat(p)) break;
      const reader = new ChunkReader(bytes);
      for (const b of reader.blocks) {
        if (b.maxTs >= q.start && b.minTs < q.end) stats.bytesDecompressed += b.rawLength;
      }
      for (const e of reader.entries({ from: q.start, through: q.end, direction: q.direction })) {
        if (++n % DEADLINE_CHECK_EVERY === 0) ctx.check();
        stats.linesScanned++;
        if (top.worse(e.timestamp)) break;
        // A line filter alone needs no labels: refuse the line before allocating its
        // metadata record (a needle scan refuses nearly every line).
        if (testLine !== undefined && !testLine(e.line)) continue;
        const metadata = metadataRecord(e.structuredMetadata);
        const out = pipeline.process({
          timestamp: e.timestamp,
          line: e.line,
          labels: p.labels,
          structuredMetadata: metadata,
        });
        if (out === null) continue;
        stats.linesMatched++;
        top.add({
          timestamp: e.timestamp,
          line: out.line,
          labels: out.labels,
          stream: p.labels,
          metadata,
        });
      }
    }
    const result = top.result();
    stats.duplicatesDropped += top.duplicates;
    this.metrics?.linesScanned.inc(stats.linesScanned);
    // Evaluation is the loop's time minus the time spent waiting for chunks inside it.
    fetchBefore = stats.stages.fetch - fetchBefore;
    stats.stages.eval += (performance.now() - t0) / 1000 - fetchBefore;
    return result;
  }

  /** Every stream's entries over [from, end), forward, deduplicated, for metric evaluation. */
  private async collectStreams(
    tenant: string,
    sels: readonly LogExpr[],
    from: bigint,
    end: bigint,
    test: BloomTest,
    ctx: QueryContext,
  ): Promise<StreamEntries[]> {
    const stats = ctx.stats;
    const groups = sels.map((s) => s.matchers);
    const [planned, fromIngesters] = await Promise.all([
      this.plan(tenant, groups, from, end - 1n, test, ctx),
      stats.time("ingester", () =>
        ctx.race(
          Promise.all(
            groups.map((g) =>
              this.ingesters.query({
                tenant,
                selector: printSelector(g),
                start: from,
                end,
                direction: "forward",
                limit: 0,
              }),
            ),
          ),
        ),
      ),
    ]);
    type Row = {
      timestamp: bigint;
      line: string;
      structuredMetadata: Readonly<Record<string, string>>;
    };
    interface Kept {
      labels: Readonly<Record<string, string>>;
      rows: Row[];
      /** The line filters every selector of the stream starts with; undefined keeps all. */
      keep: ((line: string) => boolean) | undefined;
    }
    const streams = new Map<string, Kept>();
    const max = ctx.limits.maxMetricQueryEntries;
    let total = 0;
    // A line that fails the leading line filters of every selector matching its stream
    // cannot count in any range aggregation: drop it before holding it in memory. The
    // evaluation runs the whole pipeline again, so the filters apply as written. Measured
    // with bench/scan.ts (`count_over_time(... |= "level=error" [1m])`, 200k lines, 10%
    // matching): 672 → 336 ms median.
    const leading = sels.map((s) => {
      const filters = [];
      for (const stage of s.pipeline) {
        if (stage.kind !== "lineFilter") break;
        filters.push(stage);
      }
      return filters.length === 0 ? undefined : compilePipeline(filters).testLine;
    });
    const streamOf = (labels: Readonly<Record<string, string>>): Kept => {
      const key = labelsKey(labels);
      let s = streams.get(key);
      if (s === undefined) {
        const tests: ((line: string) => boolean)[] = [];
        let all = false;
        for (let i = 0; i < sels.length; i++) {
          if (!matchesLabels(sels[i]!.matchers, labels)) continue;
          const t = leading[i];
          if (t === undefined) all = true;
          else tests.push(t);
        }
        const keep =
          all || tests.length === 0
            ? undefined
            : tests.length === 1
              ? tests[0]
              : (line: string) => tests.some((t) => t(line));
        s = { labels, rows: [], keep };
        streams.set(key, s);
      }
      return s;
    };
    const count = (): void => {
      if (++total % DEADLINE_CHECK_EVERY === 0) ctx.check();
      if (max > 0 && total > max) {
        throw new QueryError(
          "max_metric_entries",
          `the query needs more than ${max} entries in memory (max_metric_query_entries); narrow the selector or the time range`,
        );
      }
    };
    const seenIngester = new Set<bigint>();
    for (const answer of fromIngesters) {
      for (const s of answer) {
        if (seenIngester.has(s.fingerprint)) continue; // the same stream matched two selectors
        seenIngester.add(s.fingerprint);
        stats.ingesterStreams++;
        const { rows, keep } = streamOf(this.labelsOf(s.labels));
        for (const e of s.entries) {
          if (e.timestamp < from || e.timestamp >= end) continue;
          stats.ingesterLines++;
          stats.ingesterBytes += e.line.length;
          if (keep !== undefined && !keep(e.line)) continue;
          count();
          rows.push(e);
        }
      }
    }
    const t0 = performance.now();
    const fetchBefore = stats.stages.fetch;
    for await (const { planned: p, bytes } of this.fetchInOrder(planned, ctx)) {
      const reader = new ChunkReader(bytes);
      for (const b of reader.blocks) {
        if (b.maxTs >= from && b.minTs < end) stats.bytesDecompressed += b.rawLength;
      }
      const { rows, keep } = streamOf(p.labels);
      for (const e of reader.entries({ from, through: end })) {
        stats.linesScanned++;
        if (keep !== undefined && !keep(e.line)) {
          if (stats.linesScanned % DEADLINE_CHECK_EVERY === 0) ctx.check();
          continue;
        }
        count();
        rows.push({
          timestamp: e.timestamp,
          line: e.line,
          structuredMetadata: metadataRecord(e.structuredMetadata),
        });
      }
    }
    this.metrics?.linesScanned.inc(stats.linesScanned);
    const out: StreamEntries[] = [];
    for (const { labels, rows } of streams.values()) {
      if (rows.length === 0) continue;
      rows.sort((a, b) => (a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0));
      const kept: Row[] = [];
      let sameTs: Set<string> | undefined;
      for (const r of rows) {
        const last = kept[kept.length - 1];
        if (last === undefined || last.timestamp !== r.timestamp) {
          sameTs = undefined;
          kept.push(r);
          continue;
        }
        sameTs ??= new Set([rowKey(last)]);
        const k = rowKey(r);
        if (sameTs.has(k)) {
          stats.duplicatesDropped++;
          continue;
        }
        sameTs.add(k);
        kept.push(r);
      }
      out.push({ labels, entries: kept });
    }
    stats.stages.eval += (performance.now() - t0) / 1000 - (stats.stages.fetch - fetchBefore);
    return out;
  }

  private async runMetric(
    tenant: string,
    query: string,
    start: bigint,
    end: bigint,
    evaluate: (expr: Expr, streams: StreamEntries[]) => Matrix | Vector,
  ): Promise<{ result: Matrix | Vector; stats: QueryStats }> {
    const expr = parseQuery(query);
    if (expr.kind === "log")
      throw new QueryError("bad_request", "a log query has no samples: use a metric query");
    const limits = this.limits(tenant);
    this.checkLength(limits, start, end);
    const ctx = new QueryContext(limits);
    try {
      const sels = logSelectors(expr);
      let streams: StreamEntries[] = [];
      if (sels.length > 0) {
        const { back, minOffset } = lookback(expr);
        streams = await this.collectStreams(
          tenant,
          sels,
          start - back,
          end - minOffset + 1n,
          extractBloomTests(expr),
          ctx,
        );
      }
      const t0 = performance.now();
      let result: Matrix | Vector;
      try {
        result = evaluate(expr, streams);
      } catch (error) {
        if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
        throw error;
      }
      ctx.stats.stages.eval += (performance.now() - t0) / 1000;
      ctx.stats.entriesReturned = result.length;
      return { result, stats: ctx.stats };
    } finally {
      ctx.close();
    }
  }

  /** A metric query at every step of [start, end]: Loki's matrix. */
  selectMatrix(q: MetricRangeQuery): Promise<{ result: Matrix; stats: QueryStats }> {
    return this.runMetric(q.tenant, q.query, q.start, q.end, (expr, streams) =>
      evaluateRange(expr, streams, { startNs: q.start, endNs: q.end, stepNs: q.step }),
    ) as Promise<{ result: Matrix; stats: QueryStats }>;
  }

  /** A metric query at one time: Loki's vector. */
  selectVector(
    tenant: string,
    query: string,
    time: bigint,
  ): Promise<{ result: Vector; stats: QueryStats }> {
    return this.runMetric(tenant, query, time, time, (expr, streams) =>
      evaluateInstant(expr, streams, time),
    ) as Promise<{ result: Vector; stats: QueryStats }>;
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
    const ctx = new QueryContext(limits);
    try {
      const fromStore = await this.readSeries(tenant, start, end, ctx);
      const fromIngesters = await ctx.race(
        Promise.all(
          (groups.length === 0 ? [undefined] : groups).map((selector) =>
            this.ingesters.series({
              tenant,
              start,
              end,
              ...(selector !== undefined && { selector }),
            }),
          ),
        ),
      );
      const out = new Map<string, Readonly<Record<string, string>>>();
      const consider = (canonical: string): void => {
        if (out.has(canonical)) return;
        const labels = this.labelsOf(canonical);
        if (selectors.length === 0 || selectors.some((m) => matchesLabels(m, labels)))
          out.set(canonical, labels);
      };
      for (const s of fromStore) consider(s.labels);
      for (const answer of fromIngesters) for (const s of answer) consider(s.labels);
      return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, l]) => l);
    } finally {
      ctx.close();
    }
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
    const ctx = new QueryContext(limits);
    try {
      const out: IndexStats = { streams: 0, chunks: 0, bytes: 0, entries: 0 };
      const streams = new Set<string>();
      for (const s of await this.readSeries(tenant, start, end, ctx)) {
        if (!matchesLabels(matchers, this.labelsOf(s.labels))) continue;
        streams.add(s.labels);
        for (const c of s.chunks) {
          out.chunks++;
          out.bytes += c.bytes;
          out.entries += c.entries;
        }
      }
      // As Loki's, a stream still only in an ingester counts (its head chunks do not: the
      // ingesters answer series, not sizes).
      const recent = await ctx.race(this.ingesters.series({ tenant, selector: query, start, end }));
      for (const s of recent) streams.add(s.labels);
      out.streams = streams.size;
      return out;
    } finally {
      ctx.close();
    }
  }
}

function rowKey(r: { line: string; structuredMetadata: Readonly<Record<string, string>> }): string {
  return `${r.line}\u0000${Object.keys(r.structuredMetadata).length === 0 ? "" : labelsKey(r.structuredMetadata)}`;
}
