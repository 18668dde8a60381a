/**
 * Metric-query execution: the plan without a limit over the range plus the longest
 * lookback, every stream's entries collected forward and deduplicated, then LogQL's
 * evaluation.
 */
import {
  LogqlError,
  compilePipeline,
  extractBloomTests,
  logSelectors,
  matchesLabels,
  printExpr,
  rangeAggregations,
  printSelector,
  type BloomTest,
  type Expr,
  type LogExpr,
  type Matrix,
  type SampleExpr,
  type StreamEntries,
  type Vector,
} from "@sieve/logql";
import { ChunkAudit } from "./audit.js";
import {
  DEADLINE_CHECK_EVERY,
  entryBytes,
  type QuerierParts,
  type QueryContext,
} from "./context.js";
import { QueryError } from "./errors.js";
import { fetchInOrder, readChunk } from "./fetch.js";
import { labelsKey, metadataRecord } from "./labels.js";
import { collectAcrossTenants, TENANT_SEPARATOR, tenantsOf } from "./multi-tenant-metric.js";
import { plan } from "./plan.js";

/** A metric range query: steps from start to end inclusive. */
export interface MetricRangeQuery {
  readonly tenant: string;
  readonly query: string;
  /** `query` parsed already (by the caller that had to read it); parsed here when absent. */
  readonly expr?: Expr;
  readonly start: bigint;
  readonly end: bigint;
  readonly step: bigint;
  /** Whether the answer explains each chunk in range. */
  readonly explain?: boolean;
}

/** The longest lookback (range + offset) and smallest offset of a metric query, ns. */
function lookback(e: SampleExpr): { back: bigint; minOffset: bigint } {
  let back = 0n;
  let minOffset = 0n;
  for (const { range } of rangeAggregations(e)) {
    const b = range.rangeNs + range.offsetNs;
    if (b > back) back = b;
    if (range.offsetNs < minOffset) minOffset = range.offsetNs;
  }
  return { back, minOffset };
}

function rowKey(r: { line: string; structuredMetadata: Readonly<Record<string, string>> }): string {
  return `${r.line}\u0000${Object.keys(r.structuredMetadata).length === 0 ? "" : labelsKey(r.structuredMetadata)}`;
}

/** Every stream's entries over [from, end), forward, deduplicated, for metric evaluation. */
async function collectStreams(
  parts: QuerierParts,
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
    plan(parts, tenant, groups, from, end - 1n, test, ctx),
    stats.time("ingester", () =>
      ctx.race(
        Promise.all(
          groups.map((g) =>
            parts.ingesters.query(
              {
                tenant,
                // The selector alone: the ingesters answer raw lines, which the evaluation
                // runs through the pipeline once, as it does the store's (so that exact
                // duplicates between the two are still found, and one answer serves
                // every selector of the stream).
                selector: printSelector(g),
                start: from,
                end,
                direction: "forward",
                limit: 0,
              },
              ctx.callOptions(),
            ),
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
  const count = (line: string): void => {
    ctx.hold(entryBytes(line));
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
      const { rows, keep } = streamOf(s.labelMap);
      for (const e of s.entries) {
        if (e.timestamp < from || e.timestamp >= end) continue;
        stats.ingesterLines++;
        stats.ingesterBytes += e.line.length;
        if (keep !== undefined && !keep(e.line)) continue;
        count(e.line);
        rows.push(e);
      }
    }
  }
  const t0 = performance.now();
  const fetchBefore = stats.stages.fetch;
  for await (const { planned: p, bytes } of fetchInOrder(parts, planned, ctx)) {
    const { rows, keep } = streamOf(p.labels);
    const audit = p.audit === undefined ? undefined : new ChunkAudit(p.audit, p.labels);
    for (const e of readChunk(bytes, p.labels, test, { from, through: end }, stats)) {
      stats.linesScanned++;
      audit?.see(e);
      if (keep !== undefined && !keep(e.line)) {
        if (stats.linesScanned % DEADLINE_CHECK_EVERY === 0) ctx.check();
        continue;
      }
      count(e.line);
      rows.push({
        timestamp: e.timestamp,
        line: e.line,
        structuredMetadata: metadataRecord(e.structuredMetadata),
      });
    }
    if (audit !== undefined && !audit.found) stats.falsePositiveChunks++;
  }
  parts.metrics?.linesScanned.inc(stats.linesScanned);
  parts.metrics?.falsePositiveChunks.inc({ tenant }, stats.falsePositiveChunks);
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

/**
 * Runs a metric query (`expr`, parsed) over [start, end]: collects the streams its log
 * selectors read, then `evaluate`s it, mapping LogQL's refusals to 400s.
 */
export async function evaluateMetric(
  parts: QuerierParts,
  tenant: string,
  expr: SampleExpr,
  start: bigint,
  end: bigint,
  evaluate: (expr: Expr, streams: StreamEntries[]) => Matrix | Vector,
  ctx: QueryContext,
): Promise<Matrix | Vector> {
  // Identical selectors (`count_over_time({a="b"}[1m]) + ...` a thousand times) are read
  // once: each would otherwise fetch, ask the ingesters for and hold the same lines.
  const unique = new Map<string, LogExpr>();
  for (const s of logSelectors(expr)) unique.set(printExpr(s), s);
  const sels = [...unique.values()];
  let streams: StreamEntries[] = [];
  if (sels.length > 0) {
    const { back, minOffset } = lookback(expr);
    const read = (t: string, s: readonly LogExpr[]) =>
      collectStreams(parts, t, s, start - back, end - minOffset + 1n, extractBloomTests(expr), ctx);
    streams = tenant.includes(TENANT_SEPARATOR)
      ? await collectAcrossTenants(tenantsOf(tenant), sels, read)
      : await read(tenant, sels);
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
  return result;
}
