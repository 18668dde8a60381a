/**
 * Pushed-down evaluation equals the full one: random streams are cut into random sources
 * (as heads and chunks of several ingesters and the store are), each source folded into
 * its own partials, the partials merged, and the result compared with `evaluateRange` /
 * `evaluateInstant` over the same entries held whole. Values compare to 1e-9 relative
 * (sums merged bucket by bucket add in another order); counts are exact.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseExpr } from "./index.js";
import {
  evaluateInstant,
  evaluateRange,
  type Matrix,
  type StreamEntries,
  type Vector,
} from "./metric.js";
import { SamplePlan } from "./partials.js";
import type { SampleExpr } from "./ast.js";

const S = 1_000_000_000n;
const BASE = 1_700_000_000n * S;

const QUERIES = [
  `count_over_time({app="a"}[10s])`,
  `sum(count_over_time({app=~"a|b"}[10s]))`,
  `sum by (level) (count_over_time({app=~"a|b"} | logfmt [7s]))`,
  `sum by (level) (count_over_time({app=~"a|b"} |= "level=error" [10s]))`,
  `rate({app="a"}[15s])`,
  `sum without (pod) (rate({app=~"a|b"}[15s] offset 3s))`,
  `bytes_over_time({app="b"}[10s])`,
  `sum by (app) (bytes_rate({app=~".+"}[20s]))`,
  `sum_over_time({app=~"a|b"} | logfmt | unwrap latency [10s])`,
  `sum by (level) (sum_over_time({app=~"a|b"} | logfmt | unwrap latency [10s]))`,
  `avg_over_time({app=~"a|b"} | logfmt | unwrap latency [12s]) by (level)`,
  `min_over_time({app=~"a|b"} | logfmt | unwrap latency [9s])`,
  `min by (app) (min_over_time({app=~"a|b"} | logfmt | unwrap latency [9s]))`,
  `max_over_time({app=~"a|b"} | logfmt | unwrap latency [9s]) by (app)`,
  `max(max_over_time({app=~"a|b"} | logfmt | unwrap latency [9s]))`,
  `stddev_over_time({app=~"a|b"} | logfmt | unwrap latency [11s])`,
  `stdvar_over_time({app=~"a|b"} | logfmt | unwrap latency [11s]) by (app)`,
  `quantile_over_time(0.9, {app=~"a|b"} | logfmt | unwrap latency [10s]) by (level)`,
  `first_over_time({app="a"} | logfmt | unwrap latency [10s])`,
  `last_over_time({app="a"} | logfmt | unwrap latency [10s])`,
  `rate_counter({app="a"} | logfmt | unwrap latency [20s])`,
  `absent_over_time({app="a", level="none"}[5s])`,
  `absent_over_time({app="a"}[3s])`,
  `count by (app) (count_over_time({app=~"a|b"}[10s]))`,
  `avg by (level) (rate({app=~"a|b"} | logfmt [10s]))`,
  `sum(count_over_time({app="a"}[10s])) / sum(count_over_time({app=~"a|b"}[10s]))`,
  `sum by (level) (count_over_time({app="a"} | logfmt [10s])) > 2`,
  `count_over_time({app="a"}[10s]) + count_over_time({app="a"}[10s])`,
  `label_replace(sum by (pod) (rate({app="b"}[10s])), "p", "$1", "pod", "(.*)")`,
  `sum(count_over_time({app="a"} | logfmt | level="info" [30s])) by (level)`,
  `sum by (trace) (count_over_time({app="b"}[10s]))`,
];

const LEVELS = ["info", "warn", "error"];

/** Random streams: a few pods of apps a and b, lines in logfmt, some with metadata. */
const streamsArb = fc
  .array(
    fc.record({
      app: fc.constantFrom("a", "b"),
      pod: fc.constantFrom("p1", "p2", "p3"),
      entries: fc.array(
        fc.record({
          sec: fc.integer({ min: 0, max: 80 }),
          ms: fc.constantFrom(0, 1, 500, 999),
          level: fc.constantFrom(...LEVELS),
          latency: fc.integer({ min: 0, max: 2000 }),
          trace: fc.option(fc.constantFrom("t1", "t2"), { nil: undefined }),
        }),
        { maxLength: 40 },
      ),
    }),
    { maxLength: 6 },
  )
  .map((list) => {
    const byLabels = new Map<
      string,
      StreamEntries & { entries: StreamEntries["entries"][number][] }
    >();
    for (const s of list) {
      const key = `${s.app}/${s.pod}`;
      let st = byLabels.get(key);
      if (st === undefined)
        byLabels.set(key, (st = { labels: { app: s.app, pod: s.pod }, entries: [] }));
      for (const e of s.entries) {
        st.entries.push({
          timestamp: BASE + BigInt(e.sec) * S + BigInt(e.ms) * 1_000_000n,
          line: `level=${e.level} latency=${e.latency / 10} msg="x${"é".repeat(e.latency % 3)}"`,
          ...(e.trace !== undefined && { structuredMetadata: { trace: e.trace } }),
        });
      }
    }
    for (const s of byLabels.values()) {
      s.entries.sort((x, y) =>
        x.timestamp < y.timestamp ? -1 : x.timestamp > y.timestamp ? 1 : 0,
      );
    }
    return [...byLabels.values()];
  });

/** Folds every entry into one of `sources` partials (by `pick`), then merges them all. */
function pushedDown(
  expr: SampleExpr,
  streams: StreamEntries[],
  p: { startNs: bigint; endNs: bigint; stepNs: bigint },
  sources: number,
  pick: (i: number) => number,
) {
  const plan = new SamplePlan(expr, p);
  const parts = Array.from({ length: sources }, () => plan.partials());
  let i = 0;
  for (const s of streams) {
    const fold = plan.stream(s.labels);
    for (const e of s.entries) {
      const src = pick(i++) % sources;
      if (fold === undefined) continue;
      plan.fold(parts[src]!, fold, { ...e, structuredMetadata: e.structuredMetadata ?? {} });
    }
  }
  const merged = plan.partials();
  // Through plain data, as the partials cross threads and the wire.
  for (const part of parts) merged.merge(structuredClone(part.data()));
  return plan.rangeVectors(merged);
}

function close(a: number, b: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b);
  if (a === b) return true;
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

function expectSameMatrix(got: Matrix, want: Matrix): void {
  expect(got.map((s) => s.metric)).toEqual(want.map((s) => s.metric));
  got.forEach((s, i) => {
    const w = want[i]!;
    expect(s.values.map(([t]) => t)).toEqual(w.values.map(([t]) => t));
    s.values.forEach(([, v], k) => {
      if (!close(Number(v), Number(w.values[k]![1]))) {
        expect({ metric: s.metric, t: s.values[k]![0], v }).toEqual({
          metric: w.metric,
          t: w.values[k]![0],
          v: w.values[k]![1],
        });
      }
    });
  });
}

function expectSameVector(got: Vector, want: Vector): void {
  expect(got.map((s) => [s.metric, s.value[0]])).toEqual(want.map((s) => [s.metric, s.value[0]]));
  got.forEach((s, i) => {
    expect(close(Number(s.value[1]), Number(want[i]!.value[1]))).toBe(true);
  });
}

describe("pushed-down evaluation", () => {
  for (const q of QUERIES) {
    it(`equals the full evaluation: ${q}`, () => {
      const expr = parseExpr(q) as SampleExpr;
      fc.assert(
        fc.property(
          streamsArb,
          fc.integer({ min: 0, max: 40 }),
          fc.integer({ min: 0, max: 50 }),
          fc.constantFrom(1, 2, 3, 5, 10, 15),
          fc.integer({ min: 1, max: 4 }),
          fc.array(fc.nat(), { minLength: 1, maxLength: 16 }),
          (streams, start, len, step, sources, picks) => {
            const p = {
              startNs: BASE + BigInt(start) * S,
              endNs: BASE + BigInt(start + len) * S,
              stepNs: BigInt(step) * S,
            };
            const pick = (i: number): number => picks[i % picks.length]!;
            const want = evaluateRange(expr, streams, p);
            const rangeVectors = pushedDown(expr, streams, p, sources, pick);
            expectSameMatrix(evaluateRange(expr, [], p, { rangeVectors }), want);
            const t = p.endNs;
            const inst = { startNs: t, endNs: t, stepNs: 0n };
            expectSameVector(
              evaluateInstant(expr, [], t, {
                rangeVectors: pushedDown(expr, streams, inst, sources, pick),
              }),
              evaluateInstant(expr, streams, t),
            );
          },
        ),
        { numRuns: 60 },
      );
    });
  }

  it("refuses an unfiltered __error__ in Loki's words, as the full evaluation does", () => {
    const expr = parseExpr(`count_over_time({app="a"} | json [10s])`) as SampleExpr;
    const streams: StreamEntries[] = [
      { labels: { app: "a" }, entries: [{ timestamp: BASE + S, line: "not json" }] },
    ];
    const p = { startNs: BASE + S, endNs: BASE + 2n * S, stepNs: S };
    const full = (): unknown => evaluateRange(expr, streams, p);
    const pushed = (): unknown => pushedDown(expr, streams, p, 1, () => 0);
    expect(full).toThrow(/pipeline error: 'JSONParserErr'/);
    expect(pushed).toThrow(/pipeline error: 'JSONParserErr'/);
  });

  it("holds series × buckets, not lines: a million lines of one series", () => {
    const expr = parseExpr(
      `sum by (level) (count_over_time({app="a"} | logfmt [1m]))`,
    ) as SampleExpr;
    const p = { startNs: BASE, endNs: BASE + 3600n * S, stepNs: 60n * S };
    const plan = new SamplePlan(expr, p, { maxSamples: 1000 });
    const into = plan.partials();
    const fold = plan.stream({ app: "a" })!;
    const n = 1_000_000;
    const stepNs = (3600n * S) / BigInt(n);
    for (let i = 0; i < n; i++) {
      plan.fold(into, fold, {
        timestamp: BASE + BigInt(i + 1) * stepNs,
        line: `level=${LEVELS[i % 3]} x=1`,
        structuredMetadata: {},
      });
    }
    expect(into.size).toBeLessThanOrEqual(3 * 61 * 2);
    const m = evaluateRange(expr, [], p, { rangeVectors: plan.rangeVectors(into) });
    let total = 0;
    for (const s of m) for (const [, v] of s.values) total += Number(v);
    // Windows (t - 1m, t] tile (start - 1m, end]: every line counts once.
    expect(total).toBe(n);
  });

  it("refuses past maxSamples with Prometheus' words", () => {
    const expr = parseExpr(
      `quantile_over_time(0.5, {app="a"} | logfmt | unwrap latency [1m])`,
    ) as SampleExpr;
    const p = { startNs: BASE, endNs: BASE + 60n * S, stepNs: S };
    const plan = new SamplePlan(expr, p, { maxSamples: 10 });
    const into = plan.partials();
    const fold = plan.stream({ app: "a" })!;
    const add = (i: number): void => {
      plan.fold(into, fold, {
        timestamp: BASE + BigInt(i) * S,
        line: "latency=1",
        structuredMetadata: {},
      });
    };
    for (let i = 1; i <= 10; i++) add(i);
    expect(() => {
      add(11);
    }).toThrow(/too many samples into memory/);
  });
});
