/**
 * Metric query evaluation over entries already fetched: step-aligned range windows
 * (left-open, right-closed: `(t - offset - range, t - offset]`, as Loki's range vector
 * iterator), vector aggregations, binary operations with vector matching, label_replace
 * and vector(). Times are unix nanoseconds as `bigint`; results use Loki's JSON shapes with
 * unix seconds and values formatted as Go's `strconv.FormatFloat(v, 'f', -1, 64)`.
 */
import { rangeAggregations } from "./ast.js";
import type { Expr, Grouping, LogRange, RangeAggExpr, SampleExpr, VectorMatching } from "./ast.js";
import { ERROR_LABEL } from "./builder.js";
import { EvalError, LimitError } from "./errors.js";
import { matchesLabels } from "./matchers.js";
import {
  compileLabelFilter,
  compilePipeline,
  parseFloatStrict,
  type PipelineOptions,
} from "./pipeline.js";
import { printExpr } from "./printer.js";
import { compileRegex } from "./regex.js";
import { parseBytes, parseDuration } from "./units.js";

/** One stream of time-ordered entries, as the querier hands them over. */
export interface StreamEntries {
  labels: Readonly<Record<string, string>>;
  entries: readonly {
    timestamp: bigint;
    line: string;
    structuredMetadata?: Readonly<Record<string, string>>;
  }[];
}

/** A range query's steps, in unix nanoseconds. Steps run from start to end inclusive. */
export interface RangeParams {
  startNs: bigint;
  endNs: bigint;
  stepNs: bigint;
}

/** Loki's `matrix` result. */
export type Matrix = { metric: Record<string, string>; values: [number, string][] }[];
/** Loki's `vector` result. */
export type Vector = { metric: Record<string, string>; value: [number, string] }[];

/** Loki's limit on points per series in a range query. */
export const MAX_POINTS = 11_000;

/** One sample of a step vector. */
export interface Sample {
  labels: Record<string, string>;
  value: number;
}
/** The samples of one step, keyed by `labelsKey(sample.labels)` (always: the key is reused). */
export type StepVector = Map<string, Sample>;

/**
 * A range aggregation's step vectors computed elsewhere (pushed down: `partials.ts`), one
 * per step, fresh on each call (the evaluation consumes them). For `absent_over_time`, the
 * vectors of the samples present; the evaluation turns them into absence.
 */
export type RangeVectors = (e: RangeAggExpr) => StepVector[];
/**
 * An intermediate result. `count` is the samples it holds (charged to the budget);
 * `borrowed` marks a result shared with a later use, which its consumer must not release.
 */
type Value = ({ scalar: true; values: number[] } | { scalar: false; steps: StepVector[] }) & {
  count: number;
  borrowed?: true;
};

/** Bounds of one evaluation. Each refusal is a {@link LimitError}, a user error. */
export interface EvalOptions {
  /**
   * Most samples held in memory at once: points read by range aggregations plus the samples
   * of intermediate and final results (Prometheus' `query.max-samples`, with its message).
   * Default {@link DEFAULT_MAX_SAMPLES}.
   */
  maxSamples?: number;
  /** Most series in the result (Loki's `max_query_series`). Default {@link DEFAULT_MAX_SERIES}. */
  maxSeries?: number;
  /** Passed to the pipelines of the range aggregations, see `PipelineOptions.maxLineBytes`. */
  maxLineBytes?: number;
  /**
   * The range aggregations' step vectors, already computed from pushed-down partial
   * aggregates (`SamplePlan.rangeVectors`): the streams given are then not read.
   */
  rangeVectors?: RangeVectors;
}

/**
 * Default for {@link EvalOptions.maxSamples}. A held sample costs about 100-150 bytes of heap
 * here (map entry, sample object, point), so 5,000,000 is 0.5-0.75 GB: Prometheus' 50 M
 * default at its 16 bytes a sample would not fit a query worker's heap. A full result at
 * Loki's limits (500 series x 11,000 points) is 5.5 M, but real range queries hold far
 * fewer: 500 series at 1,000 steps is 0.5 M.
 */
export const DEFAULT_MAX_SAMPLES = 5_000_000;
/** Default for {@link EvalOptions.maxSeries}: Loki's `max_query_series`. */
export const DEFAULT_MAX_SERIES = 500;

/** Prometheus' words (`promql.ErrTooManySamples`). */
const TOO_MANY_SAMPLES =
  "query processing would load too many samples into memory in query execution";

/** The samples held now, checked against the bound as they grow. */
class Budget {
  private held = 0;

  constructor(private readonly max: number) {}

  add(n: number): void {
    this.held += n;
    if (this.held > this.max) throw new LimitError(`${TOO_MANY_SAMPLES} (maxSamples ${this.max})`);
  }

  release(v: Value | number): void {
    if (typeof v === "number") this.held -= v;
    else if (v.borrowed !== true) this.held -= v.count;
  }
}

/** One evaluation's state. */
interface Ev {
  streams: StreamEntries[];
  steps: bigint[];
  budget: Budget;
  pipeline: PipelineOptions;
  /**
   * Range aggregations written more than once (`a / (a + b)`), by canonical text: evaluated
   * once and shared, so N copies of one term cost one pass over the lines, not N.
   */
  shared: Map<string, { uses: number; value?: Value }>;
  rangeVectors: RangeVectors | undefined;
}

function newEv(
  e: SampleExpr,
  streams: Iterable<StreamEntries>,
  steps: bigint[],
  o: EvalOptions,
): Ev {
  const shared = new Map<string, { uses: number; value?: Value }>();
  for (const x of rangeAggregations(e)) {
    const key = printExpr(x);
    const s = shared.get(key);
    if (s === undefined) shared.set(key, { uses: 1 });
    else s.uses++;
  }
  for (const [key, s] of shared) if (s.uses === 1) shared.delete(key);
  const pipeline: PipelineOptions = {};
  if (o.maxLineBytes !== undefined) pipeline.maxLineBytes = o.maxLineBytes;
  return {
    streams: [...streams],
    steps,
    budget: new Budget(o.maxSamples ?? DEFAULT_MAX_SAMPLES),
    pipeline,
    shared,
    rangeVectors: o.rangeVectors,
  };
}

function tooManySeries(max: number): LimitError {
  return new LimitError(`maximum of series (${max}) reached for a single query`);
}

/** Evaluates a metric query at every step; answers Loki's matrix. */
export function evaluateRange(
  expr: Expr,
  streams: Iterable<StreamEntries>,
  p: RangeParams,
  options: EvalOptions = {},
): Matrix {
  const steps = stepTimes(p);
  const e = asSample(expr);
  const ev = newEv(e, streams, steps, options);
  const v = evalNode(e, ev);
  const maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
  const series = new Map<string, { metric: Record<string, string>; values: [number, string][] }>();
  const push = (key: string, metric: Record<string, string>, t: bigint, x: number): void => {
    let s = series.get(key);
    if (s === undefined) {
      if (series.size >= maxSeries) throw tooManySeries(maxSeries);
      series.set(key, (s = { metric, values: [] }));
    }
    s.values.push([nsToSeconds(t), formatValue(x)]);
  };
  steps.forEach((t, k) => {
    if (v.scalar) push("", {}, t, v.values[k]!);
    else {
      // Points move from the step vectors to the matrix: the vectors go as they are read.
      const sv = v.steps[k]!;
      for (const [key, s] of sv) push(key, s.labels, t, s.value);
      sv.clear();
    }
  });
  return [...series.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s);
}

/** Evaluates a metric query at one time; answers Loki's vector (sorted as `sort`/`sort_desc` ask). */
export function evaluateInstant(
  expr: Expr,
  streams: Iterable<StreamEntries>,
  timeNs: bigint,
  options: EvalOptions = {},
): Vector {
  const e = asSample(expr);
  const v = evalNode(e, newEv(e, streams, [timeNs], options));
  const ts = nsToSeconds(timeNs);
  if (v.scalar) return [{ metric: {}, value: [ts, formatValue(v.values[0]!)] }];
  const maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
  if (v.steps[0]!.size > maxSeries) throw tooManySeries(maxSeries);
  const samples = [...v.steps[0]!.entries()];
  if (e.kind === "vectorAgg" && (e.op === "sort" || e.op === "sort_desc")) {
    const dir = e.op === "sort" ? 1 : -1;
    samples.sort(([, a], [, b]) => dir * (a.value - b.value));
  } else samples.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return samples.map(([, s]) => ({ metric: s.labels, value: [ts, formatValue(s.value)] }));
}

function asSample(e: Expr): SampleExpr {
  if (e.kind === "log")
    throw new EvalError("evaluation", "a log query has no samples: use a metric query");
  return e;
}

/** The steps of a range query (its bounds checked, Loki's words). */
export function stepTimes(p: RangeParams): bigint[] {
  if (p.endNs < p.startNs)
    throw new EvalError("invalid_parameters", "end timestamp must not be before start time");
  if (p.stepNs <= 0n) {
    if (p.startNs === p.endNs) return [p.startNs];
    throw new EvalError(
      "invalid_parameters",
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    );
  }
  const count = (p.endNs - p.startNs) / p.stepNs + 1n;
  if (count > BigInt(MAX_POINTS)) {
    throw new EvalError(
      "invalid_parameters",
      "exceeded maximum resolution of 11,000 points per timeseries. Try increasing the value of the step parameter",
    );
  }
  const out: bigint[] = [];
  for (let t = p.startNs; t <= p.endNs; t += p.stepNs) out.push(t);
  return out;
}

/** Unix nanoseconds to the seconds Loki writes in results. */
export function nsToSeconds(t: bigint): number {
  return Number(t / 1_000_000n) / 1000 + Number(t % 1_000_000n) / 1e9;
}

/** Go's `strconv.FormatFloat(v, 'f', -1, 64)`, with Prometheus' `+Inf`, `-Inf`, `NaN`. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  const s = String(v);
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (m === null) return s;
  const [, sign, int, frac = "", expText] = m;
  const digits = int! + frac;
  const exp = Number(expText);
  if (exp >= 0) return sign! + digits.padEnd(exp + 1, "0");
  return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
}

/** A canonical key for a label set (sorted names). */
export function labelsKey(l: Readonly<Record<string, string>>): string {
  const keys = Object.keys(l).sort();
  let out = "{";
  for (const k of keys) out += `${k}=${JSON.stringify(l[k])},`;
  return out + "}";
}

/** The samples of a vector result. */
function counted(steps: StepVector[]): Value {
  let count = 0;
  for (const sv of steps) count += sv.size;
  return { scalar: false, steps, count };
}

/** Evaluates a node; the result's samples are charged to the budget, its inputs' released. */
function evalNode(e: SampleExpr, ev: Ev): Value {
  const steps = ev.steps;
  switch (e.kind) {
    case "literal":
      ev.budget.add(steps.length);
      return { scalar: true, values: steps.map(() => e.value), count: steps.length };
    case "vector":
      ev.budget.add(steps.length);
      return {
        scalar: false,
        steps: steps.map(() => new Map<string, Sample>([["{}", { labels: {}, value: e.value }]])),
        count: steps.length,
      };
    case "rangeAgg": {
      // Pushed-down vectors are computed once already; each use takes its own copy.
      const key = ev.shared.size === 0 || ev.rangeVectors !== undefined ? undefined : printExpr(e);
      const shared = key === undefined ? undefined : ev.shared.get(key);
      if (shared === undefined) return counted(evalRangeAgg(e, ev));
      shared.value ??= counted(evalRangeAgg(e, ev));
      // The last use owns the value (and releases it); earlier ones borrow it.
      if (--shared.uses === 0) return shared.value;
      return { ...shared.value, borrowed: true };
    }
    case "vectorAgg": {
      const inner = evalNode(e.inner, ev);
      if (inner.scalar) throw new EvalError("evaluation", `${e.op} needs a vector, got a scalar`);
      const out = counted(inner.steps.map((sv) => aggregate(e.op, e.param, e.grouping, sv)));
      ev.budget.add(out.count);
      ev.budget.release(inner);
      return out;
    }
    case "labelReplace": {
      const inner = evalNode(e.inner, ev);
      if (inner.scalar) return inner;
      const re = compileRegex(e.regex, true);
      const out = counted(
        inner.steps.map((sv) => {
          const out: StepVector = new Map();
          for (const s of sv.values()) {
            const m = re.exec(s.labels[e.src] ?? "");
            let labels = s.labels;
            if (m !== null) {
              const value = m[0].replace(
                re,
                e.replacement.replace(/\$\{(\w+)\}/g, (_x, g: string) =>
                  /^\d+$/.test(g) ? `$${g}` : `$<${g}>`,
                ),
              );
              labels = { ...s.labels };
              if (value === "") Reflect.deleteProperty(labels, e.dst);
              else labels[e.dst] = value;
            }
            out.set(labelsKey(labels), { labels, value: s.value });
          }
          return out;
        }),
      );
      ev.budget.add(out.count);
      ev.budget.release(inner);
      return out;
    }
    case "binary": {
      const l = evalNode(e.left, ev);
      const r = evalNode(e.right, ev);
      const out = evalBinary(e, l, r, ev.budget);
      ev.budget.release(l);
      ev.budget.release(r);
      return out;
    }
  }
}

// --- range aggregations ------------------------------------------------------------------

interface Series {
  labels: Record<string, string>;
  /** `labelsKey(labels)`, computed once. */
  key: string;
  ts: bigint[];
  values: number[];
}

/** A series' labels under a `by`/`without` grouping (undefined: unchanged). */
export function group(
  labels: Record<string, string>,
  g: Grouping | undefined,
): Record<string, string> {
  if (g === undefined) return labels;
  const out: Record<string, string> = {};
  if (g.without) {
    for (const [k, v] of Object.entries(labels)) if (!g.labels.includes(k)) out[k] = v;
  } else {
    for (const k of g.labels) if (labels[k] !== undefined) out[k] = labels[k];
  }
  return out;
}

/** An unwrapped value as a number (undefined: it does not convert). */
export function convert(conv: LogRange["unwrap"], v: string): number | undefined {
  switch (conv?.conversion) {
    case undefined:
      return parseFloatStrict(v);
    case "bytes":
      return parseBytes(v);
    case "duration":
    case "duration_seconds": {
      const ns = parseDuration(v);
      return ns === undefined ? undefined : ns / 1e9;
    }
  }
}

/** Loki's refusal of a sample whose labels carry `__error__`. */
export function pipelineError(labels: Readonly<Record<string, string>>): EvalError {
  const err = labels[ERROR_LABEL];
  return new EvalError(
    "pipeline",
    `pipeline error: '${err}' for series: '${labelsKey(labels)}'.\nUse a label filter to intentionally skip this error. (e.g | __error__!="${err}").\nTo skip all potential errors you can match empty errors.(e.g __error__="")\nThe label filter can also be specified after unwrap. (e.g | unwrap latency | __error__="" )\n`,
  );
}

/** The points of each series in (from, to]; each point is charged to the budget. */
function collectSeries(
  e: Extract<SampleExpr, { kind: "rangeAgg" }>,
  ev: Ev,
  from: bigint,
  to: bigint,
): Series[] {
  const r = e.range;
  const streams = ev.streams;
  const budget = ev.budget;
  const pipeline = compilePipeline(r.selector.pipeline, ev.pipeline);
  const post = (r.unwrap?.postFilters ?? []).map(compileLabelFilter);
  const bytes = e.op === "bytes_over_time" || e.op === "bytes_rate";
  const out = new Map<string, Series>();
  const noMeta: Record<string, string> = {};
  for (const stream of streams) {
    if (!matchesLabels(r.selector.matchers, stream.labels)) continue;
    for (const entry of stream.entries) {
      if (entry.timestamp <= from || entry.timestamp > to) continue;
      const line = pipeline.run({
        timestamp: entry.timestamp,
        line: entry.line,
        labels: stream.labels,
        structuredMetadata: entry.structuredMetadata ?? noMeta,
      });
      if (line === null) continue;
      const b = pipeline.builder;
      let value = 1;
      if (r.unwrap !== undefined) {
        const raw = b.get(r.unwrap.label);
        const x = raw === undefined ? undefined : convert(r.unwrap, raw);
        if (x === undefined)
          b.setError(
            "SampleExtractionErr",
            `cannot convert ${JSON.stringify(raw ?? "")} for unwrap`,
          );
        else value = x;
        if (!post.every((f) => f(b))) continue;
      } else if (bytes) value = Buffer.byteLength(line);
      let labels: Record<string, string> = { ...b.labels() };
      if (r.unwrap !== undefined) Reflect.deleteProperty(labels, r.unwrap.label);
      if (labels[ERROR_LABEL] !== undefined) throw pipelineError(labels);
      labels = group(labels, e.grouping);
      const key = labelsKey(labels);
      let s = out.get(key);
      if (s === undefined) out.set(key, (s = { labels, key, ts: [], values: [] }));
      budget.add(1);
      s.ts.push(entry.timestamp);
      s.values.push(value);
    }
  }
  for (const s of out.values()) {
    // Entries of several streams may interleave in one series. Points at one time are put
    // in order of value, so first_over_time and last_over_time pick the same one however
    // the points arrive (the pushed-down evaluation gets them from many chunks at once).
    let sorted = true;
    for (let i = 1; i < s.ts.length; i++) {
      const t = s.ts[i]!;
      const before = s.ts[i - 1]!;
      if (t < before || (t === before && byValue(s.values[i]!, s.values[i - 1]!) < 0)) {
        sorted = false;
      }
    }
    if (!sorted) {
      const idx = s.ts
        .map((_, i) => i)
        .sort((a, b) =>
          s.ts[a]! < s.ts[b]!
            ? -1
            : s.ts[a]! > s.ts[b]!
              ? 1
              : byValue(s.values[a]!, s.values[b]!) || a - b,
        );
      s.ts = idx.map((i) => s.ts[i]!);
      s.values = idx.map((i) => s.values[i]!);
    }
  }
  return [...out.values()];
}

/** The step vectors of a range aggregation, charged to the budget as they fill. */
function evalRangeAgg(e: Extract<SampleExpr, { kind: "rangeAgg" }>, ev: Ev): StepVector[] {
  let out: StepVector[];
  if (ev.rangeVectors !== undefined) {
    out = ev.rangeVectors(e);
    let filled = 0;
    for (const sv of out) filled += sv.size;
    ev.budget.add(filled);
  } else out = scanRangeAgg(e, ev);
  if (e.op !== "absent_over_time") return out;
  const steps = ev.steps;
  const labels: Record<string, string> = {};
  for (const m of e.range.selector.matchers) if (m.op === "=") labels[m.name] = m.value;
  const key = labelsKey(labels);
  let filled = 0;
  for (const sv of out) filled += sv.size;
  ev.budget.release(filled);
  ev.budget.add(steps.length);
  return out.map((sv) =>
    sv.size === 0
      ? new Map<string, Sample>([[key, { labels, value: 1 }]])
      : new Map<string, Sample>(),
  );
}

/** A range aggregation's step vectors, from the streams' entries held in memory. */
function scanRangeAgg(e: Extract<SampleExpr, { kind: "rangeAgg" }>, ev: Ev): StepVector[] {
  const steps = ev.steps;
  const { rangeNs, offsetNs } = e.range;
  const first = steps[0]!;
  const last = steps[steps.length - 1]!;
  const series = collectSeries(e, ev, first - offsetNs - rangeNs, last - offsetNs);
  const rangeSec = Number(rangeNs) / 1e9;
  const out: StepVector[] = steps.map(() => new Map<string, Sample>());
  for (const s of series) {
    let lo = 0;
    let hi = 0;
    let filled = 0;
    steps.forEach((t, k) => {
      const end = t - offsetNs;
      const start = end - rangeNs;
      while (lo < s.ts.length && s.ts[lo]! <= start) lo++;
      if (hi < lo) hi = lo;
      while (hi < s.ts.length && s.ts[hi]! <= end) hi++;
      if (hi === lo) return;
      const v = rangeFn(
        e.op,
        e.param,
        s.values.slice(lo, hi),
        s.ts.slice(lo, hi),
        start,
        end,
        rangeSec,
      );
      if (v !== undefined) {
        out[k]!.set(s.key, { labels: s.labels, value: v });
        filled++;
      }
    });
    ev.budget.add(filled);
  }
  for (const s of series) ev.budget.release(s.ts.length);
  return out;
}

/**
 * The order of two points' values at one time (NaN last): the tie-break of every points
 * function's input, in the full and the pushed-down evaluation alike.
 */
export function byValue(a: number, b: number): number {
  if (Number.isNaN(a)) return Number.isNaN(b) ? 0 : 1;
  if (Number.isNaN(b)) return -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A range aggregation's value over one window's points (time-ordered); undefined: none. */
export function rangeFn(
  op: string,
  param: number | undefined,
  v: number[],
  ts: bigint[],
  start: bigint,
  end: bigint,
  rangeSec: number,
): number | undefined {
  const n = v.length;
  const sum = (): number => v.reduce((a, b) => a + b, 0);
  const variance = (): number => {
    const mean = sum() / n;
    return v.reduce((a, x) => a + (x - mean) ** 2, 0) / n;
  };
  switch (op) {
    case "count_over_time":
      return n;
    case "rate":
    case "bytes_rate":
      return sum() / rangeSec;
    case "bytes_over_time":
    case "sum_over_time":
      return sum();
    case "avg_over_time":
      return sum() / n;
    case "min_over_time":
      return Math.min(...v);
    case "max_over_time":
      return Math.max(...v);
    case "stdvar_over_time":
      return variance();
    case "stddev_over_time":
      return Math.sqrt(variance());
    case "quantile_over_time":
      return quantile(param ?? 0, v);
    case "first_over_time":
      return v[0];
    case "last_over_time":
      return v[n - 1];
    case "rate_counter":
      return extrapolatedRate(v, ts, start, end, rangeSec);
    case "absent_over_time":
      return 1;
    default:
      return undefined;
  }
}

/** Prometheus' quantile over values (linear interpolation between closest ranks). */
export function quantile(q: number, values: readonly number[]): number {
  if (values.length === 0 || Number.isNaN(q)) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const s = [...values].sort((a, b) => a - b);
  const rank = q * (s.length - 1);
  const lower = Math.max(0, Math.floor(rank));
  const upper = Math.min(s.length - 1, lower + 1);
  const w = rank - Math.floor(rank);
  return s[lower]! * (1 - w) + s[upper]! * w;
}

/** Prometheus' `extrapolatedRate` for counters, which Loki's `rate_counter` reuses. */
function extrapolatedRate(
  v: number[],
  ts: bigint[],
  start: bigint,
  end: bigint,
  rangeSec: number,
): number | undefined {
  const n = v.length;
  if (n < 2) return undefined;
  let result = v[n - 1]! - v[0]!;
  for (let i = 1; i < n; i++) if (v[i]! < v[i - 1]!) result += v[i - 1]!;
  const sec = (x: bigint): number => Number(x) / 1e9;
  let toStart = sec(ts[0]! - start);
  const toEnd = sec(end - ts[n - 1]!);
  const sampled = sec(ts[n - 1]! - ts[0]!);
  const avg = sampled / (n - 1);
  if (result > 0 && v[0]! >= 0) {
    const toZero = sampled * (v[0]! / result);
    if (toZero < toStart) toStart = toZero;
  }
  const threshold = avg * 1.1;
  let interval = sampled;
  interval += toStart < threshold ? toStart : avg / 2;
  interval += toEnd < threshold ? toEnd : avg / 2;
  return (result * (interval / sampled)) / rangeSec;
}

// --- vector aggregations -----------------------------------------------------------------

function aggregate(
  op: string,
  param: number | undefined,
  g: Grouping | undefined,
  sv: StepVector,
): StepVector {
  const out: StepVector = new Map();
  if (op === "sort" || op === "sort_desc") return sv;
  const groups = new Map<string, { labels: Record<string, string>; members: Sample[] }>();
  for (const s of sv.values()) {
    const labels = g === undefined ? {} : group(s.labels, g);
    const key = labelsKey(labels);
    let grp = groups.get(key);
    if (grp === undefined) groups.set(key, (grp = { labels, members: [] }));
    grp.members.push(s);
  }
  for (const [key, grp] of groups) {
    const vals = grp.members.map((m) => m.value);
    const n = vals.length;
    const sum = vals.reduce((a, b) => a + b, 0);
    const variance = (): number => vals.reduce((a, x) => a + (x - sum / n) ** 2, 0) / n;
    switch (op) {
      case "topk":
      case "bottomk": {
        // Ties go to the smaller label set, so the answer does not depend on the order
        // the series were met in (a query split by interval meets them in other orders).
        const k = param ?? 0;
        const keyed = grp.members.map((s) => ({ s, key: labelsKey(s.labels) }));
        const desc = op === "topk";
        keyed.sort(
          (a, b) =>
            (desc ? byValue(-a.s.value, -b.s.value) : byValue(a.s.value, b.s.value)) ||
            (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
        );
        for (const { s, key } of keyed.slice(0, k)) out.set(key, s);
        continue;
      }
      case "sum":
        out.set(key, { labels: grp.labels, value: sum });
        continue;
      case "avg":
        out.set(key, { labels: grp.labels, value: sum / n });
        continue;
      case "count":
        out.set(key, { labels: grp.labels, value: n });
        continue;
      case "min":
        out.set(key, { labels: grp.labels, value: Math.min(...vals) });
        continue;
      case "max":
        out.set(key, { labels: grp.labels, value: Math.max(...vals) });
        continue;
      case "stdvar":
        out.set(key, { labels: grp.labels, value: variance() });
        continue;
      case "stddev":
        out.set(key, { labels: grp.labels, value: Math.sqrt(variance()) });
        continue;
    }
  }
  return out;
}

// --- binary operations -------------------------------------------------------------------

function arith(op: string, a: number, b: number): number {
  switch (op) {
    case "+":
      return a + b;
    case "-":
      return a - b;
    case "*":
      return a * b;
    case "/":
      return a / b;
    case "%":
      return a % b;
    case "^":
      return a ** b;
    case "==":
      return a === b ? 1 : 0;
    case "!=":
      return a !== b ? 1 : 0;
    case ">":
      return a > b ? 1 : 0;
    case ">=":
      return a >= b ? 1 : 0;
    case "<":
      return a < b ? 1 : 0;
    case "<=":
      return a <= b ? 1 : 0;
    default:
      throw new EvalError("evaluation", `unsupported operator ${op}`);
  }
}

const CMP = new Set(["==", "!=", ">", ">=", "<", "<="]);

/** The matching signature of a sample; `key` is its `labelsKey`, the signature without `on`/`ignoring`. */
function signature(
  key: string,
  labels: Record<string, string>,
  m: VectorMatching | undefined,
): string {
  if (m === undefined) return key;
  const picked: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) {
    if (m.on ? m.labels.includes(k) : !m.labels.includes(k)) picked[k] = v;
  }
  return labelsKey(picked);
}

/** A binary operation; its result's samples are charged to `budget` step by step. */
function evalBinary(
  e: Extract<SampleExpr, { kind: "binary" }>,
  l: Value,
  r: Value,
  budget: Budget,
): Value {
  const op = e.op;
  if (l.scalar && r.scalar) {
    budget.add(l.values.length);
    return {
      scalar: true,
      values: l.values.map((a, k) => arith(op, a, r.values[k]!)),
      count: l.values.length,
    };
  }
  if (l.scalar || r.scalar) {
    const vec = (l.scalar ? r : l) as Extract<Value, { scalar: false }>;
    const sc = (l.scalar ? l : r) as Extract<Value, { scalar: true }>;
    return counted(
      vec.steps.map((sv, k) => {
        const out: StepVector = new Map();
        for (const [key, s] of sv) {
          const a = l.scalar ? sc.values[k]! : s.value;
          const b = l.scalar ? s.value : sc.values[k]!;
          const x = arith(op, a, b);
          if (CMP.has(op) && !e.returnBool) {
            if (x === 1) out.set(key, s);
          } else out.set(key, { labels: s.labels, value: x });
        }
        budget.add(out.size);
        return out;
      }),
    );
  }
  const m = e.matching;
  return counted(
    l.steps.map((lv, k) => {
      const rv = r.steps[k]!;
      const out: StepVector = new Map();
      if (op === "and" || op === "unless" || op === "or") {
        const rsigs = new Set([...rv].map(([key, s]) => signature(key, s.labels, m)));
        for (const [key, s] of lv)
          if (rsigs.has(signature(key, s.labels, m)) === (op !== "unless")) out.set(key, s);
        if (op === "or") {
          const lsigs = new Set([...lv].map(([key, s]) => signature(key, s.labels, m)));
          for (const [key, s] of lv) out.set(key, s);
          for (const [key, s] of rv) if (!lsigs.has(signature(key, s.labels, m))) out.set(key, s);
        }
        budget.add(out.size);
        return out;
      }
      const swap = m?.card === "one-to-many";
      const many = swap ? rv : lv;
      const one = swap ? lv : rv;
      const bySig = new Map<string, Sample>();
      for (const [key, s] of one) {
        const sig = signature(key, s.labels, m);
        if (bySig.has(sig)) {
          throw new EvalError(
            "evaluation",
            "found duplicate series for the match group on the right hand-side of the operation: many-to-many matching not allowed",
          );
        }
        bySig.set(sig, s);
      }
      const seen = new Set<string>();
      for (const [key, s] of many) {
        const sig = signature(key, s.labels, m);
        const other = bySig.get(sig);
        if (other === undefined) continue;
        if ((m === undefined || m.card === "one-to-one") && seen.has(sig)) {
          throw new EvalError(
            "evaluation",
            "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)",
          );
        }
        seen.add(sig);
        const [a, b] = swap ? [other.value, s.value] : [s.value, other.value];
        const x = arith(op, a, b);
        let labels: Record<string, string>;
        if (m === undefined || m.card === "one-to-one") {
          labels = m === undefined ? s.labels : {};
          if (m !== undefined) {
            for (const [kk, vv] of Object.entries(s.labels)) {
              if (m.on ? m.labels.includes(kk) : !m.labels.includes(kk)) labels[kk] = vv;
            }
          }
        } else {
          labels = { ...s.labels };
          for (const name of m.include) {
            if (other.labels[name] !== undefined) labels[name] = other.labels[name];
            else Reflect.deleteProperty(labels, name);
          }
        }
        const outKey = labels === s.labels ? key : labelsKey(labels);
        if (CMP.has(op) && !e.returnBool) {
          if (x === 1) out.set(outKey, { labels, value: swap ? b : a });
        } else out.set(outKey, { labels, value: x });
      }
      budget.add(out.size);
      return out;
    }),
  );
}
