/**
 * Splitting a range query by time (Loki's `split_queries_by_interval`,
 * `pkg/querier/queryrange/split_by_interval.go`): the steps are cut at multiples of the
 * interval, each part is a range query of its own (its windows read their own lookback),
 * and the parts' matrices are concatenated. Every LogQL metric query is evaluated step by
 * step, so the result is the unsplit one, whatever the functions.
 */
import { LimitError } from "./errors.js";
import { DEFAULT_MAX_SERIES, labelsKey, type Matrix, type RangeParams } from "./metric.js";

/**
 * The parts of a range query: consecutive runs of its steps, each within one interval
 * `[k * intervalNs, (k + 1) * intervalNs)`. One part when the query is instant, the
 * interval is 0 or the steps fit in one interval.
 */
export function splitRange(p: RangeParams, intervalNs: bigint): RangeParams[] {
  if (intervalNs <= 0n || p.stepNs <= 0n || p.endNs <= p.startNs) return [p];
  const out: RangeParams[] = [];
  let cur = p.startNs;
  while (cur <= p.endNs) {
    // Floor division, for times before 1970 too.
    const k = cur >= 0n ? cur / intervalNs : -((-cur + intervalNs - 1n) / intervalNs);
    const boundary = (k + 1n) * intervalNs;
    let last = cur + ((boundary - 1n - cur) / p.stepNs) * p.stepNs;
    if (last > p.endNs) last = p.endNs - ((p.endNs - cur) % p.stepNs);
    out.push({ startNs: cur, endNs: last, stepNs: p.stepNs });
    cur = last + p.stepNs;
  }
  return out;
}

/**
 * The matrix of a split query: each series' points from every part, in the parts' order
 * (time order), series sorted by labels as {@link evaluateRange} sorts them; more than
 * `maxSeries` series is Loki's refusal.
 */
export function mergeMatrices(parts: readonly Matrix[], maxSeries = DEFAULT_MAX_SERIES): Matrix {
  if (parts.length === 1) return parts[0]!;
  const series = new Map<string, Matrix[number]>();
  for (const m of parts) {
    for (const s of m) {
      const key = labelsKey(s.metric);
      const have = series.get(key);
      if (have === undefined) {
        if (series.size >= maxSeries) {
          throw new LimitError(`maximum of series (${maxSeries}) reached for a single query`);
        }
        series.set(key, { metric: s.metric, values: [...s.values] });
      } else for (const v of s.values) have.values.push(v);
    }
  }
  return [...series.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s);
}
