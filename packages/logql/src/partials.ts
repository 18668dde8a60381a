/**
 * Pushed-down metric evaluation: where the lines are (an ingester's heads, a chunk being
 * decoded), each entry runs through its range aggregation's pipeline once and is folded
 * into a partial aggregate of its series, per time bucket; only the partials travel, and
 * the querier merges them and finishes each step's window. Memory is bounded by series ×
 * buckets, not by lines (Loki's ingesters stream samples instead, `pkg/ingester/instance.go`
 * QuerySample; partials go one step further, as its sharded `sum`/`count` do).
 *
 * Buckets: the windows `(t - offset - range, t - offset]` of every step cut time at their
 * two ends; the pieces between consecutive cuts are the buckets (at most 2 per step), and
 * each window is a run of consecutive buckets. A bucket holds, per series, what its
 * function needs and can merge: a count; a sum; a minimum or maximum; a count, mean and
 * sum of squared deviations (Chan et al.'s parallel variance). Functions that need every
 * point (`quantile_over_time`, `first_over_time`, `last_over_time`, `rate_counter`) keep
 * the points themselves, unwrapped already: samples, not lines.
 *
 * A range aggregation read only by a `sum` (of a linear function), `min` or `max` vector
 * aggregation is grouped by that aggregation's labels as it is folded: the inner series
 * (one per label set, structured metadata included) are never held.
 *
 * Everything held (a bucket of a series, a point) counts against `maxSamples`, as the full
 * evaluation's points do; one plan is built from the query's text on both sides, so bucket
 * numbers agree.
 */
import type { Grouping, RangeAggExpr, SampleExpr } from "./ast.js";
import { ERROR_LABEL } from "./builder.js";
import { LimitError } from "./errors.js";
import { matchesLabels } from "./matchers.js";
import {
  DEFAULT_MAX_SAMPLES,
  byValue,
  convert,
  group,
  labelsKey,
  pipelineError,
  rangeFn,
  stepTimes,
  type RangeParams,
  type RangeVectors,
  type Sample,
  type StepVector,
} from "./metric.js";
import { compileLabelFilter, compilePipeline, type Pipeline } from "./pipeline.js";
import type { LabelsBuilder } from "./builder.js";
import { printExpr } from "./printer.js";

/** What a bucket keeps: by the range aggregation's function. */
type Mode = "count" | "sum" | "min" | "max" | "var" | "points";

const MODES: Record<RangeAggExpr["op"], Mode> = {
  count_over_time: "count",
  absent_over_time: "count",
  rate: "sum",
  bytes_rate: "sum",
  bytes_over_time: "sum",
  sum_over_time: "sum",
  avg_over_time: "sum",
  min_over_time: "min",
  max_over_time: "max",
  stdvar_over_time: "var",
  stddev_over_time: "var",
  quantile_over_time: "points",
  first_over_time: "points",
  last_over_time: "points",
  rate_counter: "points",
};

/** Range functions whose results a `sum` may add before they are computed (linear in the points). */
const LINEAR = new Set<RangeAggExpr["op"]>([
  "count_over_time",
  "rate",
  "bytes_rate",
  "bytes_over_time",
  "sum_over_time",
]);

/**
 * One series' partials of one range aggregation, as plain data (it crosses threads and the
 * wire). Bucket arrays start at bucket `lo`; `n[i]` is 0 for an empty bucket.
 */
export interface SeriesPartial {
  /** The range aggregation: its index in the plan (`SamplePlan.aggs`). */
  readonly agg: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly lo: number;
  /** Points per bucket. */
  readonly n: readonly number[];
  /** Sum, minimum, maximum or mean per bucket, by the function; empty for a count. */
  readonly a: readonly number[];
  /** Sum of squared deviations per bucket (variance functions only). */
  readonly b: readonly number[];
  /** `points` functions: the points' times, ns after the plan's `base`, and values. */
  readonly ts: readonly number[];
  readonly v: readonly number[];
}

/** A range aggregation of a plan: its windows, its pipeline, how its series are grouped. */
export interface AggPlan {
  readonly expr: RangeAggExpr;
  readonly mode: Mode;
  /** Breakpoints, ns after the plan's `base` (exact: spans are far below 2^53 ns). */
  readonly cuts: Float64Array;
  /** Per step, the first bucket of its window and one past its last. */
  readonly winLo: Int32Array;
  readonly winHi: Int32Array;
  /** The vector aggregation's grouping applied while folding; undefined: none. */
  readonly outer: Grouping | undefined;
  /**
   * When the series' labels are a `by` list in the end (the function's and the vector
   * aggregation's groupings composed, the unwrapped label left out): those names, sorted,
   * read straight from the entry's labels instead of copying them all. Undefined otherwise.
   */
  readonly byNames: readonly string[] | undefined;
}

/** The names a `by` grouping keeps after `inner` then `outer`; undefined for a `without`. */
function byNames(
  inner: Grouping | undefined,
  outer: Grouping | undefined,
  unwrapped: string | undefined,
): string[] | undefined {
  if (inner?.without === true || outer?.without === true) return undefined;
  if (inner === undefined && outer === undefined) return undefined;
  let names = inner?.labels ?? outer!.labels;
  if (inner !== undefined && outer !== undefined) {
    names = inner.labels.filter((n) => outer.labels.includes(n));
  }
  return [...new Set(names)].filter((n) => n !== unwrapped).sort();
}

interface AggRun {
  readonly plan: AggPlan;
  readonly index: number;
  readonly pipeline: Pipeline;
  readonly post: ((b: LabelsBuilder) => boolean)[];
  readonly bytes: boolean;
  /** Series by the values of `plan.byNames` (bounded by the series a query may have). */
  readonly byValues: Map<string, { key: string; labels: Record<string, string> }>;
}

/** The range aggregations that read one stream, with their per-stream caches. */
export interface StreamFold {
  readonly labels: Readonly<Record<string, string>>;
  readonly runs: readonly AggRun[];
  /**
   * A line no aggregation of the stream can count fails this (their leading line filters);
   * undefined: any line may count. Lets a caller skip building an entry's metadata.
   */
  readonly mayCount: ((line: string) => boolean) | undefined;
  /**
   * Per run, the series (key and grouped labels) of an entry whose labels are the stream's
   * own (no metadata, line filters only): computed once per stream.
   */
  readonly plain: ({ key: string; labels: Record<string, string> } | undefined)[];
}

/** One entry as the fold reads it. */
export interface FoldEntry {
  readonly timestamp: bigint;
  readonly line: string;
  readonly structuredMetadata: Readonly<Record<string, string>>;
}

/** Options of a {@link SamplePlan}. */
export interface SamplePlanOptions {
  /** Most buckets and points held by one set of partials. Default `DEFAULT_MAX_SAMPLES`. */
  maxSamples?: number;
  /** See `PipelineOptions.maxLineBytes`. */
  maxLineBytes?: number;
}

/** Prometheus' words, as the full evaluation's budget says them. */
const TOO_MANY_SAMPLES =
  "query processing would load too many samples into memory in query execution";

class Acc {
  lo = 0;
  len = 0;
  n: Float64Array = new Float64Array(0);
  a: Float64Array = new Float64Array(0);
  b: Float64Array = new Float64Array(0);
  ts: number[] = [];
  v: number[] = [];

  constructor(
    readonly agg: number,
    readonly labels: Readonly<Record<string, string>>,
  ) {}
}

/**
 * A set of partial aggregates: what one source (heads, a chunk, the querier's merge) has
 * folded. Its holding is bounded by `maxSamples`.
 */
export class Partials {
  private readonly series = new Map<string, Acc>();
  private held = 0;

  constructor(
    private readonly plan: SamplePlan,
    private readonly maxSamples: number,
  ) {}

  /** Buckets and points held. */
  get size(): number {
    return this.held;
  }

  private charge(n: number): void {
    this.held += n;
    if (this.held > this.maxSamples) {
      throw new LimitError(`${TOO_MANY_SAMPLES} (maxSamples ${this.maxSamples})`);
    }
  }

  /** The accumulator of a series of aggregation `agg`. */
  acc(agg: number, key: string, labels: Readonly<Record<string, string>>): Acc {
    const k = agg === 0 ? key : `${agg}\u0000${key}`;
    let s = this.series.get(k);
    if (s === undefined) {
      s = new Acc(agg, labels);
      this.series.set(k, s);
    }
    return s;
  }

  /** Makes room for bucket `j` in `s`'s arrays (which grow by doubling). */
  slot(s: Acc, j: number, total: number, variance: boolean): number {
    if (s.len === 0) {
      const cap = Math.min(16, total - j);
      s.lo = j;
      s.n = new Float64Array(cap);
      s.a = new Float64Array(cap);
      if (variance) s.b = new Float64Array(cap);
      s.len = cap;
      this.charge(cap);
      return 0;
    }
    let i = j - s.lo;
    if (i >= 0 && i < s.len) return i;
    const hi = Math.max(j + 1, s.lo + s.len);
    const lo = i < 0 ? Math.max(0, Math.min(j, s.lo - s.len)) : s.lo;
    const cap = Math.min(total - lo, Math.max(hi - lo, 2 * s.len));
    const grow = (old: Float64Array): Float64Array => {
      const out = new Float64Array(cap);
      out.set(old, s.lo - lo);
      return out;
    };
    this.charge(cap - s.len);
    s.n = grow(s.n);
    s.a = grow(s.a);
    if (variance) s.b = grow(s.b);
    s.lo = lo;
    s.len = cap;
    i = j - lo;
    return i;
  }

  /** Adds one point (bucket `j`, time `rel` after the plan's base, value `x`). */
  add(s: Acc, mode: Mode, j: number, rel: number, x: number, total: number): void {
    if (mode === "points") {
      this.charge(1);
      s.ts.push(rel);
      s.v.push(x);
      return;
    }
    const i = this.slot(s, j, total, mode === "var");
    const n = ++s.n[i]!;
    switch (mode) {
      case "count":
        return;
      case "sum":
        s.a[i]! += x;
        return;
      case "min":
        s.a[i] = n === 1 ? x : Math.min(s.a[i]!, x);
        return;
      case "max":
        s.a[i] = n === 1 ? x : Math.max(s.a[i]!, x);
        return;
      case "var": {
        // Welford's update.
        const d = x - s.a[i]!;
        s.a[i]! += d / n;
        s.b[i]! += d * (x - s.a[i]!);
        return;
      }
    }
  }

  /** The partials as plain data (the used part of each array). */
  data(): SeriesPartial[] {
    const out: SeriesPartial[] = [];
    for (const s of this.series.values()) {
      const mode = this.plan.aggs[s.agg]!.mode;
      let first = 0;
      let last = s.len;
      while (first < last && s.n[first] === 0) first++;
      while (last > first && s.n[last - 1] === 0) last--;
      if (mode !== "points" && first === last) continue;
      if (mode === "points" && s.ts.length === 0) continue;
      out.push({
        agg: s.agg,
        labels: s.labels,
        lo: s.lo + first,
        n: Array.from(s.n.subarray(first, last)),
        a: mode === "count" ? [] : Array.from(s.a.subarray(first, last)),
        b: mode === "var" ? Array.from(s.b.subarray(first, last)) : [],
        ts: s.ts,
        v: s.v,
      });
    }
    return out;
  }

  /** Merges partials folded elsewhere (of the same plan) into these. */
  merge(parts: readonly SeriesPartial[]): void {
    for (const p of parts) {
      const agg = this.plan.aggs[p.agg];
      if (agg === undefined) throw new RangeError(`partials of aggregation ${p.agg}: no such one`);
      const s = this.acc(p.agg, labelsKey(p.labels), p.labels);
      const total = agg.cuts.length - 1;
      if (agg.mode === "points") {
        this.charge(p.ts.length);
        for (let k = 0; k < p.ts.length; k++) {
          s.ts.push(p.ts[k]!);
          s.v.push(p.v[k]!);
        }
        continue;
      }
      for (let k = 0; k < p.n.length; k++) {
        const n2 = p.n[k]!;
        if (n2 === 0) continue;
        const j = p.lo + k;
        if (j < 0 || j >= total) throw new RangeError(`bucket ${j} out of range`);
        const i = this.slot(s, j, total, agg.mode === "var");
        const n1 = s.n[i]!;
        const n = n1 + n2;
        s.n[i] = n;
        const a2 = p.a[k]!;
        switch (agg.mode) {
          case "count":
            break;
          case "sum":
            s.a[i]! += a2;
            break;
          case "min":
            s.a[i] = n1 === 0 ? a2 : Math.min(s.a[i]!, a2);
            break;
          case "max":
            s.a[i] = n1 === 0 ? a2 : Math.max(s.a[i]!, a2);
            break;
          case "var": {
            // Chan, Golub and LeVeque's merge of two (count, mean, M2).
            const d = a2 - s.a[i]!;
            s.b[i]! += p.b[k]! + (d * d * n1 * n2) / n;
            s.a[i]! += (d * n2) / n;
            break;
          }
        }
      }
    }
  }

  /** Every series of aggregation `agg`. */
  *of(agg: number): Generator<Acc> {
    for (const s of this.series.values()) if (s.agg === agg) yield s;
  }
}

/**
 * A metric query's range aggregations over one range's steps, ready to fold entries into
 * {@link Partials} and to finish them into step vectors. Built from the same text and
 * parameters by the querier and by each ingester.
 */
export class SamplePlan {
  /** The distinct range aggregations (by text and pushed grouping), in query order. */
  readonly aggs: AggPlan[] = [];
  /** Times are kept as ns after this. */
  readonly base: bigint;
  /** Entries in (from, through] may count. */
  readonly from: bigint;
  readonly through: bigint;
  readonly steps: bigint[];
  private readonly byNode = new Map<RangeAggExpr, number>();
  private readonly maxSamples: number;
  private readonly maxLineBytes: number | undefined;

  constructor(expr: SampleExpr, p: RangeParams, options: SamplePlanOptions = {}) {
    this.steps = stepTimes(p);
    this.maxSamples = options.maxSamples ?? DEFAULT_MAX_SAMPLES;
    this.maxLineBytes = options.maxLineBytes;
    const found: { e: RangeAggExpr; outer: Grouping | undefined }[] = [];
    const walk = (x: SampleExpr, outer: Grouping | undefined | null): void => {
      switch (x.kind) {
        case "rangeAgg":
          found.push({ e: x, outer: outer ?? undefined });
          return;
        case "vectorAgg": {
          const inner = x.inner;
          const pushable =
            inner.kind === "rangeAgg" &&
            ((x.op === "sum" && LINEAR.has(inner.op)) ||
              (x.op === "min" && inner.op === "min_over_time") ||
              (x.op === "max" && inner.op === "max_over_time"));
          walk(inner, pushable ? (x.grouping ?? { without: false, labels: [] }) : null);
          return;
        }
        case "labelReplace":
          walk(x.inner, null);
          return;
        case "binary":
          walk(x.left, null);
          walk(x.right, null);
          return;
        case "literal":
        case "vector":
          return;
      }
    };
    walk(expr, null);
    let min = 0n;
    let max = 0n;
    const byKey = new Map<string, number>();
    const first = this.steps[0]!;
    const last = this.steps[this.steps.length - 1]!;
    for (const { e, outer } of found) {
      const lo = first - e.range.offsetNs - e.range.rangeNs;
      const hi = last - e.range.offsetNs;
      if (this.aggs.length === 0 || lo < min) min = lo;
      if (this.aggs.length === 0 || hi > max) max = hi;
      const key = `${printExpr(e)}\u0000${JSON.stringify(outer ?? null)}`;
      let index = byKey.get(key);
      if (index === undefined) {
        index = this.aggs.length;
        byKey.set(key, index);
        this.aggs.push({
          expr: e,
          mode: MODES[e.op],
          outer,
          byNames: byNames(e.grouping, outer, e.range.unwrap?.label),
        } as AggPlan);
      }
      this.byNode.set(e, index);
    }
    this.base = min;
    this.from = min;
    this.through = max;
    for (let i = 0; i < this.aggs.length; i++) {
      const a = this.aggs[i]!;
      const { rangeNs, offsetNs } = a.expr.range;
      const set = new Set<bigint>();
      for (const t of this.steps) {
        set.add(t - offsetNs - rangeNs);
        set.add(t - offsetNs);
      }
      const cuts = [...set].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
      const rel = Float64Array.from(cuts, (c) => Number(c - this.base));
      const index = new Map<bigint, number>();
      cuts.forEach((c, j) => index.set(c, j));
      const winLo = Int32Array.from(this.steps, (t) => index.get(t - offsetNs - rangeNs)!);
      const winHi = Int32Array.from(this.steps, (t) => index.get(t - offsetNs)!);
      this.aggs[i] = { ...a, cuts: rel, winLo, winHi };
    }
  }

  /** Fresh, empty partials bounded by the plan's `maxSamples`. */
  partials(): Partials {
    return new Partials(this, this.maxSamples);
  }

  /** The aggregations reading a stream with these labels; undefined when none does. */
  stream(labels: Readonly<Record<string, string>>): StreamFold | undefined {
    const runs: AggRun[] = [];
    const tests: ((line: string) => boolean)[] = [];
    let all = false;
    for (let index = 0; index < this.aggs.length; index++) {
      const plan = this.aggs[index]!;
      const sel = plan.expr.range.selector;
      if (!matchesLabels(sel.matchers, labels)) continue;
      const pipeline = compilePipeline(
        sel.pipeline,
        this.maxLineBytes === undefined ? {} : { maxLineBytes: this.maxLineBytes },
      );
      const leading = [];
      for (const st of sel.pipeline) {
        if (st.kind !== "lineFilter") break;
        leading.push(st);
      }
      if (leading.length === 0) all = true;
      else tests.push(compilePipeline(leading).testLine!);
      runs.push({
        plan,
        index,
        pipeline,
        post: (plan.expr.range.unwrap?.postFilters ?? []).map(compileLabelFilter),
        bytes: plan.expr.op === "bytes_over_time" || plan.expr.op === "bytes_rate",
        byValues: new Map(),
      });
    }
    if (runs.length === 0) return undefined;
    const mayCount = all
      ? undefined
      : (line: string): boolean => {
          for (const t of tests) if (t(line)) return true;
          return false;
        };
    return { labels, runs, mayCount, plain: runs.map(() => undefined) };
  }

  /**
   * Folds one entry of a stream into `into`: each aggregation reading the stream runs its
   * pipeline (and unwrap) over it and adds the point to its series' bucket. A sample whose
   * labels carry `__error__` throws Loki's pipeline error, as the full evaluation does.
   */
  fold(into: Partials, s: StreamFold, e: FoldEntry): void {
    const ts = e.timestamp;
    if (ts <= this.from || ts > this.through) return;
    const rel = Number(ts - this.base);
    for (let r = 0; r < s.runs.length; r++) {
      const run = s.runs[r]!;
      const plan = run.plan;
      const cuts = plan.cuts;
      // The bucket (cuts[j], cuts[j + 1]] holding rel; none outside the windows' span.
      if (rel <= cuts[0]! || rel > cuts[cuts.length - 1]!) continue;
      let lo = 0;
      let hi = cuts.length - 1;
      while (hi - lo > 1) {
        const mid = (lo + hi) >>> 1;
        if (cuts[mid]! < rel) lo = mid;
        else hi = mid;
      }
      const j = lo;
      const line = run.pipeline.run({
        timestamp: ts,
        line: e.line,
        labels: s.labels,
        structuredMetadata: e.structuredMetadata,
      });
      if (line === null) continue;
      const b = run.pipeline.builder;
      const unwrap = plan.expr.range.unwrap;
      let x = 1;
      if (unwrap !== undefined) {
        const raw = b.get(unwrap.label);
        const v = raw === undefined ? undefined : convert(unwrap, raw);
        if (v === undefined)
          b.setError(
            "SampleExtractionErr",
            `cannot convert ${JSON.stringify(raw ?? "")} for unwrap`,
          );
        else x = v;
        let pass = true;
        for (const f of run.post) if (!f(b)) pass = false;
        if (!pass) continue;
      } else if (run.bytes) x = Buffer.byteLength(line);
      const plain =
        unwrap === undefined &&
        run.pipeline.lineOnly &&
        Object.keys(e.structuredMetadata).length === 0;
      let series = plain ? s.plain[r] : undefined;
      if (series === undefined && plan.byNames !== undefined) {
        // The fast path (log volume: `sum by (level) (count_over_time(...))`): the kept
        // names only, keyed as labelsKey keys them.
        if (b.get(ERROR_LABEL) !== undefined) {
          const all: Record<string, string> = { ...b.labels() };
          if (unwrap !== undefined) Reflect.deleteProperty(all, unwrap.label);
          throw pipelineError(all);
        }
        // The values of the kept names, as a cache key: formatting the series' key
        // (JSON.stringify each value) once per series, not per entry.
        let id = "";
        for (const name of plan.byNames) id += `${b.get(name) ?? "\u0002"}\u0001`;
        series = run.byValues.get(id);
        if (series === undefined) {
          const labels: Record<string, string> = {};
          let key = "{";
          for (const name of plan.byNames) {
            const v = b.get(name);
            if (v === undefined) continue;
            labels[name] = v;
            key += `${name}=${JSON.stringify(v)},`;
          }
          series = { key: key + "}", labels };
          run.byValues.set(id, series);
        }
        if (plain) s.plain[r] = series;
      }
      if (series === undefined) {
        let labels: Record<string, string> = { ...b.labels() };
        if (unwrap !== undefined) Reflect.deleteProperty(labels, unwrap.label);
        if (labels[ERROR_LABEL] !== undefined) throw pipelineError(labels);
        labels = group(group(labels, plan.expr.grouping), plan.outer);
        series = { key: labelsKey(labels), labels };
        if (plain) s.plain[r] = series;
      }
      const { key, labels } = series;
      const acc = into.acc(run.index, key, labels);
      into.add(acc, plan.mode, j, rel, x, cuts.length - 1);
    }
  }

  /**
   * The step vectors of `partials` (merged from every source), for the evaluation's
   * `rangeVectors` option.
   */
  rangeVectors(partials: Partials): RangeVectors {
    return (e) => {
      const index = this.byNode.get(e);
      if (index === undefined) throw new RangeError("a range aggregation the plan does not hold");
      return this.finish(partials, index);
    };
  }

  private finish(partials: Partials, index: number): StepVector[] {
    const plan = this.aggs[index]!;
    const e = plan.expr;
    const steps = this.steps;
    const rangeSec = Number(e.range.rangeNs) / 1e9;
    const out: StepVector[] = steps.map(() => new Map<string, Sample>());
    for (const s of partials.of(index)) {
      const key = labelsKey(s.labels);
      const labels = s.labels as Record<string, string>;
      if (plan.mode === "points") {
        finishPoints(plan, s, key, labels, steps, this.base, rangeSec, out);
        continue;
      }
      for (let k = 0; k < steps.length; k++) {
        const from = Math.max(plan.winLo[k]! - s.lo, 0);
        const to = Math.min(plan.winHi[k]! - s.lo, s.len);
        let n = 0;
        let a = 0;
        let m2 = 0;
        for (let i = from; i < to; i++) {
          const n2 = s.n[i]!;
          if (n2 === 0) continue;
          const a2 = s.a[i]!;
          switch (plan.mode) {
            case "count":
              break;
            case "sum":
              a += a2;
              break;
            case "min":
              a = n === 0 ? a2 : Math.min(a, a2);
              break;
            case "max":
              a = n === 0 ? a2 : Math.max(a, a2);
              break;
            case "var": {
              const d = a2 - a;
              m2 += s.b[i]! + (d * d * n * n2) / (n + n2);
              a += (d * n2) / (n + n2);
              break;
            }
          }
          n += n2;
        }
        if (n === 0) continue;
        let value: number;
        switch (e.op) {
          case "count_over_time":
          case "absent_over_time":
            value = n;
            break;
          case "rate":
          case "bytes_rate":
            value = a / rangeSec;
            break;
          case "avg_over_time":
            value = a / n;
            break;
          case "stdvar_over_time":
            value = m2 / n;
            break;
          case "stddev_over_time":
            value = Math.sqrt(m2 / n);
            break;
          case "sum_over_time":
          case "bytes_over_time":
          case "min_over_time":
          case "max_over_time":
          case "quantile_over_time":
          case "first_over_time":
          case "last_over_time":
          case "rate_counter":
            value = a;
            break;
        }
        out[k]!.set(key, { labels, value });
      }
    }
    return out;
  }
}

/** A `points` function's windows: the points sorted by time, then as the full evaluation. */
function finishPoints(
  plan: AggPlan,
  s: Acc,
  key: string,
  labels: Record<string, string>,
  steps: readonly bigint[],
  base: bigint,
  rangeSec: number,
  out: StepVector[],
): void {
  const e = plan.expr;
  // Points at one time in order of value, as the full evaluation puts them (metric.ts).
  const idx = s.ts
    .map((_, i) => i)
    .sort((x, y) => s.ts[x]! - s.ts[y]! || byValue(s.v[x]!, s.v[y]!) || x - y);
  const ts = idx.map((i) => s.ts[i]!);
  const vs = idx.map((i) => s.v[i]!);
  let lo = 0;
  let hi = 0;
  for (let k = 0; k < steps.length; k++) {
    const end = plan.cuts[plan.winHi[k]!]!;
    const start = plan.cuts[plan.winLo[k]!]!;
    while (lo < ts.length && ts[lo]! <= start) lo++;
    if (hi < lo) hi = lo;
    while (hi < ts.length && ts[hi]! <= end) hi++;
    if (hi === lo) continue;
    const v = rangeFn(
      e.op,
      e.param,
      vs.slice(lo, hi),
      ts.slice(lo, hi).map((t) => base + BigInt(t)),
      base + BigInt(start),
      base + BigInt(end),
      rangeSec,
    );
    if (v !== undefined) out[k]!.set(key, { labels, value: v });
  }
}
