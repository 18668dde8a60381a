/**
 * Bounds on what one query may cost (issue 10, items 2 and 3): templates that would build
 * strings without limit, metric queries that would hold samples without limit, and lines
 * whose parsing was quadratic. Each case failed before the bounds (heap exhaustion,
 * `RangeError: Invalid string length`, a 500, or seconds of CPU for one line).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LabelsBuilder } from "./builder.js";
import { LimitError, LogqlError, ParseError } from "./errors.js";
import { parseExpr } from "./index.js";
import { evaluateInstant, evaluateRange, type StreamEntries } from "./metric.js";
import { compilePipeline, type PipelineOptions } from "./pipeline.js";

const STREAM = { app: "qf" };

function run(query: string, line: string, options?: PipelineOptions) {
  const e = parseExpr(`{app="qf"} ${query}`);
  if (e.kind !== "log") throw new Error("not a log query");
  return compilePipeline(e.pipeline, options).process({
    timestamp: 1_700_000_000_000_000_000n,
    line,
    labels: STREAM,
    structuredMetadata: {},
  });
}

const LIMIT = /template output would exceed the limit of 1048576 bytes per line \(maxLineBytes\)/;
const doubling = (n: number): string =>
  Array.from({ length: n }, () => '| line_format "{{__line__}}{{__line__}}"').join(" ");

/** Templates that would allocate without bound: each is refused with the limit's name. */
const overLimit: [name: string, query: string, line: string][] = [
  [
    "repeat 1 MiB, three times",
    '| line_format "{{ repeat 1048576 \\"a\\" }}{{ repeat 1048576 \\"a\\" }}"',
    "x",
  ],
  ["repeat past the limit", '| line_format "{{ repeat 1048577 \\"a\\" }}"', "x"],
  ["30 doubling stages", doubling(30), "abcdefgh"],
  ["printf width", '| line_format "{{ printf \\"%2000000000s\\" \\"a\\" }}"', "x"],
  [
    "printf many args",
    `| line_format "{{ printf \\"${"%s".repeat(3)}\\" __line__ __line__ __line__ }}"`,
    "y".repeat(400_000),
  ],
  ["alignLeft width", '| line_format "{{ alignLeft 2000000000 .app }}"', "x"],
  ["alignRight width", '| label_format x="{{ alignRight 2000000000 .app }}"', "x"],
  ["indent per newline", '| line_format "{{ indent 1024 __line__ }}"', "\n".repeat(2048)],
  ["nindent per newline", '| line_format "{{ nindent 1024 __line__ }}"', "\n".repeat(2048)],
  [
    "replace with a longer string",
    '| line_format "{{ replace \\"a\\" \\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\\" __line__ }}"',
    "a".repeat(100_000),
  ],
  [
    "Replace with a count",
    '| line_format "{{ Replace __line__ \\"a\\" \\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\\" 1000000 }}"',
    "a".repeat(100_000),
  ],
  [
    "regexReplaceAll expanding $0",
    '| line_format "{{ regexReplaceAll \\"a\\" __line__ \\"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\\" }}"',
    "a".repeat(100_000),
  ],
  [
    "regexReplaceAll with the suffix",
    `| line_format "{{ regexReplaceAll \\"a\\" __line__ \\"$'\\" }}"`,
    "a".repeat(10_000),
  ],
  [
    "regexReplaceAllLiteral",
    '| line_format "{{ regexReplaceAllLiteral \\"a\\" __line__ \\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\\" }}"',
    "a".repeat(100_000),
  ],
  [
    "b64enc of b64enc",
    '| line_format "{{ __line__ | b64enc | b64enc | b64enc }}"',
    "z".repeat(600_000),
  ],
  ["label_format", '| label_format big="{{ repeat 1048577 \\"a\\" }}"', "x"],
];

describe("template output is capped at maxLineBytes", () => {
  it.each(overLimit)("%s", (_name, query, line) => {
    let caught: unknown;
    try {
      run(query, line);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(LimitError);
    expect(caught).toBeInstanceOf(LogqlError);
    expect((caught as LimitError).code).toBe("limit");
    expect((caught as LimitError).message).toMatch(LIMIT);
  });

  it("takes a line up to the limit and refuses one past it (maxLineBytes option)", () => {
    const opts = { maxLineBytes: 100 };
    expect(run('| line_format "{{ repeat 100 \\"a\\" }}"', "x", opts)?.line).toHaveLength(100);
    expect(() => run('| line_format "{{ repeat 101 \\"a\\" }}"', "x", opts)).toThrow(
      /limit of 100 bytes per line \(maxLineBytes\)/,
    );
    expect(run(doubling(4), "abcdef", opts)?.line).toHaveLength(96);
    expect(() => run(doubling(5), "abcdef", opts)).toThrow(LimitError);
  });

  it("keeps the default far above real lines: 1 MiB passes", () => {
    expect(run('| line_format "{{ repeat 1048576 \\"a\\" }}"', "x")?.line).toHaveLength(1 << 20);
    expect(run(doubling(17), "abcdefgh")?.line).toHaveLength(1 << 20);
  });
});

/** Template failures that escaped as a RangeError (a 500) and are now the line's `__error__`. */
const lineErrors: [name: string, query: string, line: string][] = [
  ["printf precision past 100", '| line_format "{{ printf \\"%.500f\\" 1.5 }}"', "x"],
  ["time out of range", '| line_format "{{ unixToTime \\"99999999999999999999999\\" }}"', "x"],
  [
    "bad regex from a label",
    '| json | line_format "{{ regexReplaceAll .r __line__ \\"x\\" }}"',
    '{"r":"(("}',
  ],
  ["bad regex in count", '| json | line_format "{{ count .r __line__ }}"', '{"r":"(("}'],
];

describe("template run-time errors are the line's __error__", () => {
  it.each(lineErrors)("%s", (_name, query, line) => {
    const out = run(query, line);
    expect(out?.labels.__error__).toBe("TemplateFormatErr");
    expect(out?.line).toBe(line);
  });

  it("prints an invalid %c as U+FFFD, as Go does", () => {
    expect(run('| line_format "{{ printf \\"%c\\" -5 }}"', "x")?.line).toBe("\ufffd");
  });

  it("expands regexReplaceAll groups as before", () => {
    const q =
      '| line_format "{{ regexReplaceAll \\"([a-z]+)=(?P<v>[0-9]+)\\" __line__ \\"${v}:$1:$$\\" }}"';
    expect(run(q, "a=1 b=2")?.line).toBe("1:a:$ 2:b:$");
  });
});

describe("template nesting is bounded at parse time", () => {
  it.each([
    ["parentheses", `| line_format "{{ ${"(".repeat(20_000)}1${")".repeat(20_000)} }}"`],
    ["if blocks", `| line_format "${"{{if 1}}".repeat(65)}x${"{{end}}".repeat(65)}"`],
  ])("%s", (_name, query) => {
    expect(() => run(query, "x")).toThrow(/template: nested deeper than 64 levels/);
    expect(() => run(query, "x")).toThrow(ParseError);
  });
});

// --- metric evaluation -------------------------------------------------------------------

const S = 1_000_000_000n;
/** 4 streams sharing 4,000 lines of 5 KB (the case), 4 lines a second. */
const lines = Array.from({ length: 4000 }, (_, i) => ({
  timestamp: (BigInt(i) * S) / 4n + 1n,
  line: "x".repeat(5000),
}));
const streams: StreamEntries[] = [0, 1, 2, 3].map((k) => ({
  labels: { app: "qf", pod: `p${k}` },
  entries: lines,
}));
const TERM = 'count_over_time({app="qf"}[1m])';

/** `n` copies of `term` summed as a balanced tree, so that it stays under the depth bound. */
function balancedSum(term: string, n: number): string {
  if (n === 1) return term;
  const half = Math.floor(n / 2);
  return `(${balancedSum(term, half)} + ${balancedSum(term, n - half)})`;
}

describe("metric evaluation is bounded", () => {
  it("refuses 1,000 terms summed in a chain at parse time (depth)", () => {
    const q = Array.from({ length: 1000 }, () => TERM).join(" + ");
    expect(() => parseExpr(q)).toThrow(/query nested deeper than 128 levels/);
  });

  it("evaluates 1,000 copies of one range aggregation once, not 1,000 times", () => {
    const q = parseExpr(balancedSum(TERM, 1000));
    const t0 = performance.now();
    const m = evaluateRange(q, streams, { startNs: 0n, endNs: 1000n * S, stepNs: 10n * S });
    // Before: 98 s and a pass over the lines per term (1,000 x 16,000 entries).
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(m).toHaveLength(4);
    expect(m[0]!.values.find(([t]) => t === 100)).toEqual([100, String(1000 * 240)]);
  });

  it("refuses a query that would hold more samples than maxSamples, with Prometheus' words", () => {
    const q = parseExpr(`${TERM} + ${TERM.replace("1m", "2m")}`);
    const p = { startNs: 0n, endNs: 1000n * S, stepNs: 1n * S };
    expect(evaluateRange(q, streams, p, { maxSamples: 100_000 })).toHaveLength(4);
    let caught: unknown;
    try {
      evaluateRange(q, streams, p, { maxSamples: 10_000 });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(LimitError);
    expect((caught as Error).message).toBe(
      "query processing would load too many samples into memory in query execution (maxSamples 10000)",
    );
  });

  it("refuses a result of more series than maxSeries, with Loki's words", () => {
    const many: StreamEntries[] = Array.from({ length: 501 }, (_, k) => ({
      labels: { app: "qf", pod: `p${k}` },
      entries: [{ timestamp: 5n * S, line: "x" }],
    }));
    const q = parseExpr(TERM);
    const msg = "maximum of series (500) reached for a single query";
    expect(() => evaluateInstant(q, many, 10n * S)).toThrow(msg);
    expect(() => evaluateRange(q, many, { startNs: 0n, endNs: 10n * S, stepNs: 5n * S })).toThrow(
      msg,
    );
    expect(evaluateInstant(q, many, 10n * S, { maxSeries: 501 })).toHaveLength(501);
    expect(evaluateInstant(q, many.slice(0, 500), 10n * S)).toHaveLength(500);
  });

  it("caps line_format output inside a metric query too", () => {
    const q = parseExpr(`count_over_time({app="qf"} ${doubling(30)} [1m])`);
    expect(() => evaluateInstant(q, streams, 10n * S)).toThrow(LimitError);
  });
});

// --- parsers on hostile lines ------------------------------------------------------------

describe("parser stages stay linear in the line", () => {
  const keys = Array.from({ length: 30_000 }, (_, i) => `k${i}`);
  it.each([
    ["json", "| json", JSON.stringify(Object.fromEntries(keys.map((k) => [k, 1])))],
    ["logfmt", "| logfmt", keys.map((k) => `${k}=1`).join(" ")],
  ])("%s with 30,000 keys", (_name, query, line) => {
    const t0 = performance.now();
    const out = run(query, line);
    // Before: 9.4 s (json) and 7.6 s (logfmt) for this one line.
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(out?.labels.k29999).toBe("1");
    expect(Object.keys(out!.labels)).toHaveLength(30_001);
  });
});

describe("LabelsBuilder", () => {
  it("answers as a map would, below and above its index threshold", () => {
    const name = fc.constantFrom(...Array.from({ length: 60 }, (_, i) => `l${i}`), "app", "sm");
    const op = fc.oneof(
      fc.record({ k: fc.constant("set" as const), name, value: fc.string({ maxLength: 3 }) }),
      fc.record({ k: fc.constant("delete" as const), name }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const b = new LabelsBuilder();
        b.reset({ app: "a" }, { sm: "m" });
        const model = new Map<string, string>([
          ["app", "a"],
          ["sm", "m"],
        ]);
        for (const o of ops) {
          if (o.k === "set") {
            b.set(o.name, o.value);
            model.set(o.name, o.value);
          } else {
            b.delete(o.name);
            model.delete(o.name);
          }
        }
        for (const n of ["app", "sm", ...Array.from({ length: 60 }, (_, i) => `l${i}`)]) {
          expect(b.get(n)).toBe(model.get(n));
        }
        expect(b.labels()).toEqual(Object.fromEntries(model));
      }),
      { seed: 10, numRuns: 300 },
    );
  });
});
