/**
 * Log-query execution: the plan's chunks read in the query's direction, run through the
 * pipeline and merged with the ingesters' unflushed entries (which their ingester ran
 * through the same pipeline: each line goes through it once) into the best `limit` entries
 * ({@link TopEntries}), exact duplicates dropped, stopping once `limit` lines are certain.
 */
import {
  compilePipeline,
  extractBloomTests,
  printExpr,
  type Expr,
  type LogExpr,
} from "@sieve/logql";
import { ChunkAudit } from "./audit.js";
import {
  DEADLINE_CHECK_EVERY,
  entryBytes,
  type QuerierParts,
  type QueryContext,
} from "./context.js";
import { fetchInOrder, readChunk, type ChunkRead } from "./fetch.js";
import { EMPTY, labelsKey, metadataRecord } from "./labels.js";
import type { QueryExplain } from "./explain.js";
import type { Direction } from "./params.js";
import { plan, type PlannedChunk } from "./plan.js";
import type { QueryStats } from "./stats.js";

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
  /** Why each chunk in range was kept or pruned, when the query asked. */
  readonly explain?: QueryExplain;
}

/** A log query. Times are Unix ns, [start, end). */
export interface LogQuery {
  readonly tenant: string;
  readonly query: string;
  /** `query` parsed already (by the caller that had to read it); parsed here when absent. */
  readonly expr?: Expr;
  readonly start: bigint;
  readonly end: bigint;
  readonly limit: number;
  readonly direction: Direction;
  /** Whether the answer explains each chunk in range ({@link LogResult.explain}). */
  readonly explain?: boolean;
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
  /** What the buffered candidates hold ({@link entryBytes}): the query's memory budget reads it. */
  bytes = 0;

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
    this.bytes += entryBytes(e.line);
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
      // Past the limit only the last entry's twins are read: `add` counts those too.
      if (kept.length === this.limit) break;
      kept.push(e);
    }
    this.buf = kept;
    this.bytes = 0;
    for (const k of kept) this.bytes += entryBytes(k.line);
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

/**
 * The labels of an ingester's entry that carries none of its own: its stream's labels
 * overlaid with its metadata, as the pipeline's label builder makes them.
 */
function overlay(
  stream: Readonly<Record<string, string>>,
  metadata: Readonly<Record<string, string>>,
): Readonly<Record<string, string>> {
  return metadata === EMPTY ? stream : { ...stream, ...metadata };
}

/** Runs a log query over the plan and the ingesters: the best `q.limit` entries, in order. */
export async function runLogs(
  parts: QuerierParts,
  expr: LogExpr,
  q: LogQuery,
  ctx: QueryContext,
): Promise<ResultEntry[]> {
  const stats = ctx.stats;
  const backward = q.direction === "backward";
  const top = new TopEntries(q.limit, backward);
  const pipeline = compilePipeline(expr.pipeline);
  const testLine = pipeline.lineOnly ? pipeline.testLine : undefined;
  const tests = extractBloomTests(expr);
  if (q.end <= q.start) return [];
  const through = q.end - 1n;
  // Read first: the ingesters drop the same lines from their answer.
  const deletes = await stats.time("index", () =>
    ctx.race(parts.deletes.forQuery(q.tenant, q.start, through)),
  );
  const [planned, fromIngesters] = await Promise.all([
    plan(parts, q.tenant, [expr.matchers], q.start, through, tests, ctx),
    stats.time("ingester", () =>
      ctx.race(
        parts.ingesters.query(
          {
            tenant: q.tenant,
            // The query, printed once: the ingesters parse it and run its whole pipeline.
            selector: printExpr(expr),
            start: q.start,
            end: q.end,
            direction: q.direction,
            limit: q.limit,
            // What the query may hold, so an ingester stops before holding more for it.
            ...(ctx.limits.maxQueryMemoryBytes > 0 && {
              maxBytes: ctx.limits.maxQueryMemoryBytes,
            }),
            ...(deletes !== undefined && { deletes: deletes.specs }),
          },
          ctx.callOptions(),
        ),
      ),
    ),
  ]);
  const t0 = performance.now();
  let fetchBefore = stats.stages.fetch;
  let n = 0;
  // The ingesters' answer is held whole until the query ends.
  let received = 0;
  for (const s of fromIngesters) for (const e of s.entries) received += entryBytes(e.line);
  ctx.hold(received);
  // The ingesters ran the pipeline: their entries are processed and kept already.
  const retention = parts.retention.of(q.tenant);
  const nowMs = Date.now();
  for (const s of fromIngesters) {
    const stream = s.labelMap;
    stats.ingesterStreams++;
    // Retention, by the stream's labels as the ingester answered them.
    const cutoff = retention.expires ? retention.cutoffNs(stream, nowMs) : undefined;
    const start = cutoff !== undefined && cutoff > q.start ? cutoff : q.start;
    for (const e of s.entries) {
      if (e.timestamp < start || e.timestamp >= q.end) continue;
      stats.ingesterLines++;
      stats.ingesterBytes += e.line.length;
      if (top.worse(e.timestamp)) break;
      const metadata =
        Object.keys(e.structuredMetadata).length === 0 ? EMPTY : e.structuredMetadata;
      stats.linesMatched++;
      top.add({
        timestamp: e.timestamp,
        line: e.line,
        labels: e.labels ?? overlay(stream, metadata),
        stream,
        metadata,
      });
      ctx.hold(0, top.bytes);
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
  const read: ChunkRead = {
    test: tests,
    range: (c) => ({
      from: c.notBefore !== undefined && c.notBefore > q.start ? c.notBefore : q.start,
      through: q.end,
    }),
    direction: q.direction,
  };
  for await (const fetched of fetchInOrder(parts, ordered, ctx, read, (c) => !cannotBeat(c))) {
    const p = fetched.planned;
    top.settle();
    if (cannotBeat(p)) break;
    const audit = p.audit === undefined ? undefined : new ChunkAudit(p.audit, p.labels);
    const deleted = deletes?.filter.forStream(p.labels);
    let whole = true;
    for (const e of readChunk(fetched, read, stats)) {
      if (++n % DEADLINE_CHECK_EVERY === 0) ctx.check();
      stats.linesScanned++;
      if (top.worse(e.timestamp)) {
        whole = false;
        break;
      }
      audit?.see(e);
      // A line filter alone needs no labels: refuse the line before allocating its
      // metadata record (a needle scan refuses nearly every line).
      if (testLine !== undefined && !testLine(e.line)) continue;
      if (deleted?.(e) === true) {
        stats.linesDeleted++;
        continue;
      }
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
      ctx.hold(0, top.bytes);
    }
    if (audit !== undefined && whole && !audit.found) stats.falsePositiveChunks++;
  }
  const result = top.result();
  stats.duplicatesDropped += top.duplicates;
  parts.metrics?.linesScanned.inc(stats.linesScanned);
  parts.metrics?.falsePositiveChunks.inc({ tenant: q.tenant }, stats.falsePositiveChunks);
  // Evaluation is the loop's time minus the time spent waiting for chunks inside it.
  fetchBefore = stats.stages.fetch - fetchBefore;
  stats.stages.eval += (performance.now() - t0) / 1000 - fetchBefore;
  return result;
}
