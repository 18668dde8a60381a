/**
 * Metric-query execution, pushed down to where the lines are: the ingesters evaluate the
 * query's range aggregations over their unflushed data and answer partial aggregates
 * (`querySample`); the store's chunks are folded into the same partials as they are
 * decoded, one chunk at a time; the querier merges the parts and finishes each step's
 * window (`@sieve/logql` SamplePlan). Memory is bounded by series × buckets (LogQL's
 * `maxSamples`), not by the lines read.
 *
 * Nothing counts twice: a cut chunk an ingester still holds is dropped from its answer
 * when the plan reads the same chunk (fingerprint, bounds, checksum) from the store, and
 * store chunks of one series that overlap in time are read with exact duplicates dropped
 * in their overlap.
 */
import {
  DEFAULT_MAX_SAMPLES,
  LogqlError,
  SamplePlan,
  extractBloomTests,
  logSelectors,
  printExpr,
  type Expr,
  type LogExpr,
  type Matrix,
  type RangeParams,
  type RangeVectors,
  type SampleExpr,
  type Vector,
} from "@sieve/logql";
import type { IngesterSamplePart } from "@sieve/proto";
import { ChunkAudit } from "./audit.js";
import { DEADLINE_CHECK_EVERY, type QuerierParts, type QueryContext } from "./context.js";
import { QueryError } from "./errors.js";
import { fetchInOrder, readChunk, type ChunkRead } from "./fetch.js";
import { labelsKey, metadataRecord } from "./labels.js";
import {
  splitTenantMatchers,
  TENANT_LABEL,
  TENANT_SEPARATOR,
  tenantsOf,
} from "./multi-tenant-metric.js";
import { plan, type PlannedChunk } from "./plan.js";

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

/** A chunk's identity, as the index and an ingester's cut chunk both name it. */
function chunkId(c: { fingerprint: bigint; from: bigint; through: bigint; checksum: number }) {
  return `${c.fingerprint}:${c.from}:${c.through}:${c.checksum}`;
}

/**
 * For each planned chunk that overlaps another of its series in time, the time ranges
 * (inclusive) of those overlaps: only entries there can be exact duplicates.
 */
function overlaps(chunks: readonly PlannedChunk[]): Map<PlannedChunk, [bigint, bigint][]> {
  const bySeries = new Map<bigint, PlannedChunk[]>();
  for (const c of chunks) {
    const fp = c.chunk.ref.fingerprint;
    const list = bySeries.get(fp);
    if (list === undefined) bySeries.set(fp, [c]);
    else list.push(c);
  }
  const out = new Map<PlannedChunk, [bigint, bigint][]>();
  for (const list of bySeries.values()) {
    if (list.length < 2) continue;
    const sorted = [...list].sort((a, b) =>
      a.chunk.ref.from < b.chunk.ref.from ? -1 : a.chunk.ref.from > b.chunk.ref.from ? 1 : 0,
    );
    for (let i = 0; i < sorted.length; i++) {
      const a = sorted[i]!.chunk.ref;
      for (let j = i + 1; j < sorted.length; j++) {
        const b = sorted[j]!.chunk.ref;
        if (b.from > a.through) break;
        const range: [bigint, bigint] = [b.from, a.through < b.through ? a.through : b.through];
        for (const c of [sorted[i]!, sorted[j]!]) {
          const have = out.get(c);
          if (have === undefined) out.set(c, [range]);
          else have.push(range);
        }
      }
    }
  }
  return out;
}

/**
 * Runs a metric query (`expr`, parsed) at the steps of `p`: partial aggregates from the
 * ingesters and the store's chunks, merged, then `evaluate`d; LogQL's refusals are 400s.
 */
export async function evaluateMetric(
  parts: QuerierParts,
  tenant: string,
  expr: SampleExpr,
  p: RangeParams,
  evaluate: (rangeVectors: RangeVectors) => Matrix | Vector,
  ctx: QueryContext,
): Promise<Matrix | Vector> {
  try {
    const samplePlan = new SamplePlan(expr, p);
    const merged = samplePlan.partials();
    if (samplePlan.aggs.length > 0) {
      if (!tenant.includes(TENANT_SEPARATOR)) {
        await collect(parts, tenant, expr, samplePlan, merged, ctx);
      } else {
        // A read across tenants: each tenant's streams folded into the one merge, labelled
        // with their tenant on both sides (`sum by (__tenant_id__)` keeps them apart).
        for (const t of tenantsOf(tenant)) {
          await collect(parts, t, expr, samplePlan, merged, ctx, { [TENANT_LABEL]: t });
        }
      }
    }
    const t0 = performance.now();
    const result = evaluate(samplePlan.rangeVectors(merged));
    ctx.stats.stages.eval += (performance.now() - t0) / 1000;
    return result;
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    throw error;
  }
}

/**
 * Folds the store's chunks and merges the ingesters' partials into `merged`. With
 * `streamLabels` (a read across tenants: `__tenant_id__`), every stream carries them
 * before it is matched and folded, and the index is read with the selectors that admit
 * them, without their matchers on those labels.
 */
async function collect(
  parts: QuerierParts,
  tenant: string,
  expr: SampleExpr,
  samplePlan: SamplePlan,
  merged: ReturnType<SamplePlan["partials"]>,
  ctx: QueryContext,
  streamLabels?: Readonly<Record<string, string>>,
): Promise<void> {
  const stats = ctx.stats;
  // Identical selectors (`count_over_time({a="b"}[1m]) + ...` a thousand times) are
  // planned once.
  const unique = new Map<string, LogExpr>();
  for (const s of logSelectors(expr)) unique.set(printExpr(s), s);
  let groups = [...unique.values()].map((s) => s.matchers);
  if (streamLabels !== undefined) {
    groups = groups
      .map((m) => splitTenantMatchers(m))
      .filter((g) => g.admits(tenant))
      .map((g) => g.matchers);
    if (groups.length === 0) return;
  }
  const test = extractBloomTests(expr);
  // Entries in (plan.from, plan.through] count: [from, end) as the store reads.
  const from = samplePlan.from + 1n;
  const end = samplePlan.through + 1n;
  const deletes = await stats.time("index", () =>
    ctx.race(parts.deletes.forQuery(tenant, from, end - 1n)),
  );
  const [planned, fromIngesters] = await Promise.all([
    plan(parts, tenant, groups, from, end - 1n, test, ctx),
    stats.time("ingester", () =>
      ctx.race(
        parts.ingesters.querySample(
          {
            tenant,
            query: printExpr(expr),
            start: samplePlan.steps[0]!,
            end: samplePlan.steps[samplePlan.steps.length - 1]!,
            step: samplePlan.steps.length > 1 ? samplePlan.steps[1]! - samplePlan.steps[0]! : 0n,
            // The ingester's parts together hold at most what the querier's merge may.
            maxSamples: DEFAULT_MAX_SAMPLES,
            ...(streamLabels !== undefined && { streamLabels }),
            ...(deletes !== undefined && { deletes: deletes.specs }),
          },
          ctx.callOptions(),
        ),
      ),
    ),
  ]);
  const t0 = performance.now();
  const fetchBefore = stats.stages.fetch;
  const overlapping = overlaps(planned);
  const folds = new Map<string, ReturnType<SamplePlan["stream"]> | null>();
  const seenBySeries = new Map<bigint, Set<string>>();
  const read: ChunkRead = {
    test,
    range: (c) => ({
      from: c.notBefore !== undefined && c.notBefore > from ? c.notBefore : from,
      through: end,
    }),
  };
  for await (const fetched of fetchInOrder(parts, planned, ctx, read)) {
    const pc = fetched.planned;
    const key = labelsKey(pc.labels);
    let fold = folds.get(key);
    if (fold === undefined) {
      const labels = streamLabels === undefined ? pc.labels : { ...pc.labels, ...streamLabels };
      folds.set(key, (fold = samplePlan.stream(labels) ?? null));
    }
    const audit = pc.audit === undefined ? undefined : new ChunkAudit(pc.audit, pc.labels);
    // The stream's own labels: a request selects by them, not by `__tenant_id__`.
    const deleted = deletes?.filter.forStream(pc.labels);
    const dupes = overlapping.get(pc);
    // Exact duplicates among overlapping chunks: bounded by the entries of the overlaps.
    const fp = pc.chunk.ref.fingerprint;
    let seen: Set<string> | undefined;
    if (dupes !== undefined) {
      seen = seenBySeries.get(fp) ?? new Set<string>();
      seenBySeries.set(fp, seen);
    }
    for (const e of readChunk(fetched, read, stats)) {
      if (++stats.linesScanned % DEADLINE_CHECK_EVERY === 0) ctx.check();
      audit?.see(e);
      if (fold === null) continue;
      if (fold.mayCount !== undefined && !fold.mayCount(e.line)) continue;
      if (deleted?.(e) === true) {
        stats.linesDeleted++;
        continue;
      }
      const structuredMetadata = metadataRecord(e.structuredMetadata);
      if (seen !== undefined && dupes!.some(([a, b]) => e.timestamp >= a && e.timestamp <= b)) {
        const k = `${e.timestamp}\u0000${e.line}\u0000${labelsKey(structuredMetadata)}`;
        if (seen.has(k)) {
          stats.duplicatesDropped++;
          continue;
        }
        seen.add(k);
      }
      samplePlan.fold(merged, fold, { timestamp: e.timestamp, line: e.line, structuredMetadata });
    }
    if (audit !== undefined && !audit.found) stats.falsePositiveChunks++;
  }
  seenBySeries.clear();
  parts.metrics?.linesScanned.inc(stats.linesScanned);
  parts.metrics?.falsePositiveChunks.inc({ tenant }, stats.falsePositiveChunks);
  mergeIngesters(planned, fromIngesters, merged, ctx);
  stats.stages.eval += (performance.now() - t0) / 1000 - (stats.stages.fetch - fetchBefore);
}

/**
 * Merges the ingesters' partials, but for the cut chunks the store's plan reads too
 * (flushed, not yet dropped from the ingester's memory): those were folded from the store.
 */
function mergeIngesters(
  planned: readonly PlannedChunk[],
  answer: readonly IngesterSamplePart[],
  merged: ReturnType<SamplePlan["partials"]>,
  ctx: QueryContext,
): void {
  const inStore = new Set(
    planned.map((c) => chunkId({ ...c.chunk.ref, fingerprint: c.chunk.ref.fingerprint })),
  );
  for (const part of answer) {
    if (part.chunk !== undefined && inStore.has(chunkId(part.chunk))) {
      ctx.stats.duplicatesDropped++;
      continue;
    }
    ctx.stats.ingesterStreams++;
    merged.merge(part.series);
  }
}
