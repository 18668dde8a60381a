/**
 * Metric evaluation with hand-computed expectations. Entries sit at whole seconds so the
 * windows `(t - range, t]` are easy to count by hand.
 */
import { describe, expect, it } from "vitest";
import { EvalError } from "./errors.js";
import { parseExpr } from "./index.js";
import { evaluateInstant, evaluateRange, formatValue, type StreamEntries } from "./metric.js";

const S = 1_000_000_000n;
const at = (sec: number, line: string, sm?: Record<string, string>) => ({
  timestamp: BigInt(sec) * S,
  line,
  ...(sm ? { structuredMetadata: sm } : {}),
});

// api: lines at 1..10 s, status 200 for odd seconds and 500 for even ones, latency = i*10 ms.
const api: StreamEntries = {
  labels: { app: "api", pod: "p1" },
  entries: Array.from({ length: 10 }, (_, k) => {
    const i = k + 1;
    return at(i, `status=${i % 2 === 0 ? 500 : 200} latency=${i * 10}ms bytes=${i}`);
  }),
};
const api2: StreamEntries = {
  labels: { app: "api", pod: "p2" },
  entries: [at(2, "status=500 latency=5ms bytes=100"), at(9, "status=200 latency=1ms bytes=1")],
};
const web: StreamEntries = {
  labels: { app: "web", pod: "w1" },
  entries: [at(5, "hello"), at(6, "héllo")],
};
const streams = [api, api2, web];

const range = (q: string, start: number, end: number, step: number) =>
  evaluateRange(parseExpr(q), streams, {
    startNs: BigInt(start) * S,
    endNs: BigInt(end) * S,
    stepNs: BigInt(step) * S,
  });
const instant = (q: string, t: number) => evaluateInstant(parseExpr(q), streams, BigInt(t) * S);

describe("range aggregations", () => {
  it("count_over_time counts per stream in left-open windows", () => {
    expect(range('count_over_time({app="api"}[5s])', 5, 10, 5)).toEqual([
      {
        metric: { app: "api", pod: "p1" },
        values: [
          [5, "5"],
          [10, "5"],
        ],
      },
      {
        metric: { app: "api", pod: "p2" },
        values: [
          [5, "1"],
          [10, "1"],
        ],
      },
    ]);
  });

  it("rate divides by the range in seconds", () => {
    expect(instant('rate({app="api", pod="p1"}[4s])', 10)).toEqual([
      { metric: { app: "api", pod: "p1" }, value: [10, "1"] },
    ]);
    expect(instant('rate({app="api", pod="p1"}[8s])', 4)).toEqual([
      { metric: { app: "api", pod: "p1" }, value: [4, "0.5"] },
    ]);
  });

  it("bytes_over_time counts UTF-8 bytes", () => {
    expect(instant('bytes_over_time({app="web"}[10s])', 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "11"] },
    ]);
    expect(instant('bytes_rate({app="web"}[10s])', 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "1.1"] },
    ]);
  });

  it("unwrapped aggregations over parsed values (the unwrapped label leaves the series)", () => {
    const q = (op: string) =>
      instant(
        `${op}({app="api", pod="p1"} | logfmt | unwrap bytes | __error__="" [10s]) by (app)`,
        10,
      );
    expect(q("sum_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "55"] }]);
    expect(q("avg_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "5.5"] }]);
    expect(q("min_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "1"] }]);
    expect(q("max_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "10"] }]);
    expect(q("first_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "1"] }]);
    expect(q("last_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "10"] }]);
    expect(q("stdvar_over_time")).toEqual([{ metric: { app: "api" }, value: [10, "8.25"] }]);
    expect(
      instant(
        'quantile_over_time(0.5, {app="api", pod="p1"} | logfmt | unwrap bytes [10s]) by (app)',
        10,
      ),
    ).toEqual([{ metric: { app: "api" }, value: [10, "5.5"] }]);
    expect(
      instant(
        'sum_over_time({app="api", pod="p1"} | logfmt | unwrap duration(latency) [3s]) by (app)',
        10,
      ),
    ).toEqual([{ metric: { app: "api" }, value: [10, "0.27"] }]);
    const full = instant(
      'max_over_time({app="api", pod="p1"} | logfmt | keep app, bytes | unwrap bytes [10s])',
      10,
    );
    expect(full).toEqual([{ metric: { app: "api" }, value: [10, "10"] }]);
  });

  it("absent_over_time answers 1 only when nothing matched", () => {
    expect(instant('absent_over_time({app="nope", x=~"y"}[5s])', 10)).toEqual([
      { metric: { app: "nope" }, value: [10, "1"] },
    ]);
    expect(instant('absent_over_time({app="web"}[5s])', 10)).toEqual([]);
  });

  it("offset shifts the window back", () => {
    // At 10 s with offset 4 s the window is (4 s, 6 s]: both web lines.
    expect(instant('count_over_time({app="web"}[2s] offset 4s)', 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "2"] },
    ]);
    expect(instant('count_over_time({app="web"}[1s] offset 4s)', 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "1"] },
    ]);
  });

  it("a pipeline error in a metric query is Loki's pipeline error", () => {
    expect(() => instant('sum_over_time({app="web"} | logfmt | unwrap x [10s])', 10)).toThrow(
      EvalError,
    );
    expect(() => instant('count_over_time({app="web"} | json [10s])', 10)).toThrow(
      /pipeline error: 'JSONParserErr'/,
    );
    expect(
      instant('count_over_time({app="web"} | json | drop __error__, __error_details__ [10s])', 10),
    ).toEqual([{ metric: { app: "web", pod: "w1" }, value: [10, "2"] }]);
    // Structured metadata are labels of the series, as in Loki.
    expect(
      evaluateInstant(
        parseExpr('count_over_time({app="x"}[10s])'),
        [{ labels: { app: "x" }, entries: [at(1, "a", { t: "1" }), at(2, "b", { t: "2" })] }],
        10n * S,
      ),
    ).toEqual([
      { metric: { app: "x", t: "1" }, value: [10, "1"] },
      { metric: { app: "x", t: "2" }, value: [10, "1"] },
    ]);
  });
});

describe("vector aggregations and binary operations", () => {
  it("sum by, count, avg, max, topk, bottomk, sort_desc", () => {
    const c = 'count_over_time({app=~"api|web"}[10s])';
    expect(instant(`sum by (app) (${c})`, 10)).toEqual([
      { metric: { app: "api" }, value: [10, "12"] },
      { metric: { app: "web" }, value: [10, "2"] },
    ]);
    expect(instant(`sum(${c})`, 10)).toEqual([{ metric: {}, value: [10, "14"] }]);
    expect(instant(`count(${c})`, 10)).toEqual([{ metric: {}, value: [10, "3"] }]);
    expect(instant(`avg without (pod) (${c})`, 10)).toEqual([
      { metric: { app: "api" }, value: [10, "6"] },
      { metric: { app: "web" }, value: [10, "2"] },
    ]);
    expect(instant(`max(${c})`, 10)).toEqual([{ metric: {}, value: [10, "10"] }]);
    expect(instant(`topk(1, ${c})`, 10)).toEqual([
      { metric: { app: "api", pod: "p1" }, value: [10, "10"] },
    ]);
    expect(
      instant(`bottomk(2, ${c})`, 10)
        .map((s) => s.value[1])
        .sort(),
    ).toEqual(["2", "2"]);
    expect(instant(`sort_desc(${c})`, 10).map((s) => s.value[1])).toEqual(["10", "2", "2"]);
    expect(instant(`sort(${c})`, 10).map((s) => s.value[1])).toEqual(["2", "2", "10"]);
    expect(instant(`stddev(${c})`, 10)[0]!.value[1]).toBe(
      formatValue(Math.sqrt(((10 - 14 / 3) ** 2 + 2 * (2 - 14 / 3) ** 2) / 3)),
    );
  });

  it("topk and bottomk break ties by label set, whatever order the series come in", () => {
    const streams = ["b", "a", "c"].map((pod) => ({
      labels: { app: "x", pod },
      entries: [at(1, "line")],
    }));
    for (const order of [streams, [...streams].reverse()]) {
      for (const op of ["topk", "bottomk"]) {
        const got = evaluateInstant(
          parseExpr(`${op}(2, count_over_time({app="x"}[10s]))`),
          order,
          10n * S,
        );
        expect(got.map((s) => s.metric.pod).sort()).toEqual(["a", "b"]);
      }
    }
  });

  it("arithmetic with scalars, comparisons with and without bool", () => {
    const c = 'count_over_time({app="web"}[10s])';
    expect(instant(`${c} * 60 + 1`, 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "121"] },
    ]);
    expect(instant(`${c} > 1`, 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "2"] },
    ]);
    expect(instant(`${c} > 5`, 10)).toEqual([]);
    expect(instant(`${c} > bool 5`, 10)).toEqual([
      { metric: { app: "web", pod: "w1" }, value: [10, "0"] },
    ]);
    expect(instant("2 ^ 3 ^ 2", 10)).toEqual([{ metric: {}, value: [10, "512"] }]);
    expect(instant("1 / 0", 10)).toEqual([{ metric: {}, value: [10, "+Inf"] }]);
  });

  it("vector matching: on, ignoring, group_left; and / or / unless", () => {
    const err = 'sum by (app) (count_over_time({app="api"} | logfmt | status="500" [10s]))';
    const all = 'sum by (app) (count_over_time({app=~"api|web"}[10s]))';
    expect(instant(`${err} / on(app) ${all}`, 10)).toEqual([
      { metric: { app: "api" }, value: [10, "0.5"] },
    ]);
    expect(instant(`${err} / ${all}`, 10)).toEqual([
      { metric: { app: "api" }, value: [10, "0.5"] },
    ]);
    const perPod = 'count_over_time({app="api"}[10s])';
    expect(instant(`${perPod} / ignoring(pod) group_left ${all}`, 10)).toEqual([
      { metric: { app: "api", pod: "p1" }, value: [10, formatValue(10 / 12)] },
      { metric: { app: "api", pod: "p2" }, value: [10, formatValue(2 / 12)] },
    ]);
    expect(instant(`${all} and ${err}`, 10).map((s) => s.metric)).toEqual([{ app: "api" }]);
    expect(instant(`${all} unless ${err}`, 10).map((s) => s.metric)).toEqual([{ app: "web" }]);
    expect(instant(`${err} or vector(0)`, 10)).toEqual([
      { metric: { app: "api" }, value: [10, "6"] },
      { metric: {}, value: [10, "0"] },
    ]);
  });

  it("label_replace and vector()", () => {
    expect(
      instant(
        'label_replace(count_over_time({app="web"}[10s]), "short", "$1", "pod", "(w).*")',
        10,
      ),
    ).toEqual([{ metric: { app: "web", pod: "w1", short: "w" }, value: [10, "2"] }]);
    expect(range("vector(3)", 0, 20, 10)).toEqual([
      {
        metric: {},
        values: [
          [0, "3"],
          [10, "3"],
          [20, "3"],
        ],
      },
    ]);
  });
});

describe("parameters and formatting", () => {
  it("refuses more than 11,000 steps and bad steps", () => {
    expect(() => range("vector(1)", 0, 20_000, 1)).toThrow(/11,000 points/);
    expect(() => range("vector(1)", 0, 10, 0)).toThrow(EvalError);
    expect(() => range("vector(1)", 10, 0, 1)).toThrow(EvalError);
  });

  it("formats values as Go's FormatFloat 'f' -1", () => {
    expect(formatValue(1e21)).toBe("1000000000000000000000");
    expect(formatValue(1.5e-7)).toBe("0.00000015");
    expect(formatValue(-2.5e22)).toBe("-25000000000000000000000");
    expect(formatValue(NaN)).toBe("NaN");
    expect(formatValue(-Infinity)).toBe("-Inf");
    expect(formatValue(0.1 + 0.2)).toBe("0.30000000000000004");
  });
});
