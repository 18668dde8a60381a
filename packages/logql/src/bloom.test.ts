/**
 * Bloom-test extraction: a table of testable, untestable and partly testable queries (line
 * filters among them), the regex simplifier, and the property the product rests on: an entry that
 * passes a query's pipeline always passes the query's bloom test against a bloom holding
 * that entry's tokens (no false negatives).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BloomTest,
  chunkFilters,
  evaluateBloomTest,
  extractBloomTests,
  withoutLineTests,
} from "./bloom.js";
import { parseExpr } from "./index.js";
import { compilePipeline } from "./pipeline.js";
import { regexLiterals } from "./simplify.js";

const kv = (name: string, value: string): BloomTest => ({ kind: "kv", name, value });
const line = (literal: string): BloomTest => ({ kind: "line", literal });
const ALL: BloomTest = { kind: "all" };
const S = '{app="api"}';

const cases: [string, BloomTest][] = [
  [S, ALL],
  [`${S} | trace_id="abc"`, kv("trace_id", "abc")],
  [
    `${S} | trace_id="abc" | user="u1"`,
    { kind: "and", children: [kv("trace_id", "abc"), kv("user", "u1")] },
  ],
  [
    `${S} | trace_id="abc" and user="u1"`,
    { kind: "and", children: [kv("trace_id", "abc"), kv("user", "u1")] },
  ],
  [
    `${S} | trace_id="abc", user="u1"`,
    { kind: "and", children: [kv("trace_id", "abc"), kv("user", "u1")] },
  ],
  [
    `${S} | trace_id="abc" or user="u1"`,
    { kind: "or", children: [kv("trace_id", "abc"), kv("user", "u1")] },
  ],
  [`${S} |= "x" | trace_id="abc"`, { kind: "and", children: [line("x"), kv("trace_id", "abc")] }],
  // Line filters: literals a line must contain, tested with the n-grams a bloom records.
  [`${S} |= "needle"`, line("needle")],
  [`${S} |= "needle" != "hay" !~ "x" !> "<_>y"`, line("needle")],
  [`${S} |= "needle" or "pins"`, { kind: "or", children: [line("needle"), line("pins")] }],
  [`${S} |= "needle" or ""`, ALL],
  [`${S} |= ip("10.0.0.1")`, ALL],
  [`${S} |~ "error|fatal"`, { kind: "or", children: [line("error"), line("fatal")] }],
  [`${S} |~ "^GET /(a|b)"`, { kind: "or", children: [line("GET /a"), line("GET /b")] }],
  [`${S} |~ "(?i)error"`, ALL],
  [`${S} |~ "err.*"`, ALL],
  [`${S} |~ "a?"`, ALL],
  [`${S} |> "<_> GET /api <_> ok"`, { kind: "and", children: [line(" GET /api "), line(" ok")] }],
  [`${S} |= "a" |= "b"`, { kind: "and", children: [line("a"), line("b")] }],
  [`${S} | line_format "x" |= "needle"`, ALL],
  [`${S} | decolorize |= "needle"`, ALL],
  [`${S} |= "a" | json |= "needle"`, line("a")],
  [`${S} | logfmt |= "needle" | trace_id="abc"`, ALL],
  [
    `${S} |= "needle" | trace_id="abc" or user="u"`,
    {
      kind: "and",
      children: [
        line("needle"),
        { kind: "or", children: [kv("trace_id", "abc"), kv("user", "u")] },
      ],
    },
  ],
  [`count_over_time(${S} |= "needle" [5m])`, line("needle")],
  [`${S} | line_format "{{.a}}" | trace_id="abc"`, kv("trace_id", "abc")],
  [`${S} | decolorize | trace_id="abc"`, kv("trace_id", "abc")],
  [
    `${S} | trace_id=~"abc|def"`,
    { kind: "or", children: [kv("trace_id", "abc"), kv("trace_id", "def")] },
  ],
  [
    `${S} | trace_id=~"ab[cd]"`,
    { kind: "or", children: [kv("trace_id", "abc"), kv("trace_id", "abd")] },
  ],
  [`${S} | trace_id=~"(?:abc)"`, kv("trace_id", "abc")],
  [`${S} | trace_id=~".+"`, { kind: "key", name: "trace_id" }],
  // Untestable.
  [`${S} | trace_id!="abc"`, ALL],
  [`${S} | trace_id!~"abc"`, ALL],
  [`${S} | trace_id=~".*"`, ALL],
  [`${S} | trace_id=~"abc.*"`, ALL],
  [`${S} | trace_id=~"(?i)abc"`, ALL],
  [`${S} | trace_id=~"abc|"`, ALL],
  [`${S} | trace_id=~"x?"`, ALL],
  [`${S} | trace_id=""`, ALL],
  [`${S} | status>500`, ALL],
  [`${S} | d>1s`, ALL],
  [`${S} | s>1KB`, ALL],
  [`${S} | addr=ip("10.0.0.0/8")`, ALL],
  [`${S} | __error__=""`, ALL],
  [`${S} | json | trace_id="abc"`, ALL],
  [`${S} | logfmt | trace_id="abc"`, ALL],
  [`${S} | regexp "(?P<a>x)" | trace_id="abc"`, ALL],
  [`${S} | pattern "<a> x" | trace_id="abc"`, ALL],
  [`${S} | unpack | trace_id="abc"`, ALL],
  [`${S} | label_format trace_id=x | trace_id="abc"`, ALL],
  [`${S} | keep trace_id | trace_id="abc"`, ALL],
  [`${S} | drop user | trace_id="abc"`, ALL],
  [`${S} | trace_id="abc" or status>5`, ALL],
  [`${S} | trace_id=~"a.c" or user="u"`, ALL],
  [`${S} | trace_id="${"a".repeat(3)}" or user!="u"`, ALL],
  // Partly testable.
  [`${S} | trace_id="abc" and status>5`, kv("trace_id", "abc")],
  [`${S} | trace_id="abc" | json | user="u1"`, kv("trace_id", "abc")],
  [`${S} | trace_id="abc" | user!="u1"`, kv("trace_id", "abc")],
  [
    `${S} | (trace_id="abc" or user="u") and x>1`,
    { kind: "or", children: [kv("trace_id", "abc"), kv("user", "u")] },
  ],
  [
    `${S} | trace_id=~"a|b" | user=~".+"`,
    {
      kind: "and",
      children: [
        { kind: "or", children: [kv("trace_id", "a"), kv("trace_id", "b")] },
        { kind: "key", name: "user" },
      ],
    },
  ],
  [`count_over_time(${S} | trace_id="abc" [5m])`, kv("trace_id", "abc")],
  [`sum by (x) (rate(${S} | trace_id="abc" | json [5m]))`, kv("trace_id", "abc")],
  [
    `count_over_time(${S} | trace_id="a" [5m]) + count_over_time(${S} | trace_id="b" [5m])`,
    { kind: "or", children: [kv("trace_id", "a"), kv("trace_id", "b")] },
  ],
  [`count_over_time(${S} | trace_id="a" [5m]) + count_over_time(${S} [5m])`, ALL],
  ["vector(1)", ALL],
];

describe("extractBloomTests", () => {
  it.each(cases)("%s", (q, want) => {
    expect(extractBloomTests(parseExpr(q))).toEqual(want);
  });

  it("reads line leaves as `all` without n-grams, and keeps a test without them as it is", () => {
    const t = extractBloomTests(parseExpr(`${S} |= "needle" | trace_id="abc" or user="u"`));
    expect(withoutLineTests(t)).toEqual({
      kind: "or",
      children: [kv("trace_id", "abc"), kv("user", "u")],
    });
    expect(withoutLineTests(extractBloomTests(parseExpr(`${S} |~ "a|b"`)))).toEqual(ALL);
    const metadata = extractBloomTests(parseExpr(`${S} | trace_id="abc"`));
    expect(withoutLineTests(metadata)).toBe(metadata);
  });

  it("expands a regex of up to 200 literals and gives up above", () => {
    const t = extractBloomTests(parseExpr(`${S} | id=~"[0-9][0-9]"`));
    expect(t.kind === "or" && t.children.length).toBe(100);
    expect(extractBloomTests(parseExpr(`${S} | id=~"[0-9][0-9][0-9]"`))).toEqual(ALL);
  });

  it("evaluates against a bloom's has(), treating stream labels as untestable", () => {
    const t = extractBloomTests(parseExpr(`${S} | trace_id="abc" and (user="u1" or user="u2")`));
    const bloom = new Set(["trace_id", "trace_id=abc", "user", "user=u2"]);
    expect(evaluateBloomTest(t, (x) => bloom.has(x))).toBe(true);
    expect(evaluateBloomTest(t, (x) => x !== "trace_id=abc" && bloom.has(x))).toBe(false);
    expect(evaluateBloomTest(t, () => false)).toBe(false);
    expect(evaluateBloomTest(t, () => false, { trace_id: "zzz", user: "u9" })).toBe(true);
    expect(evaluateBloomTest(ALL, () => false)).toBe(true);
    // A chunk-prefixed bloom: the gateway's has() adds its prefix.
    const chunk = new Set([...bloom].map((x) => `c1:${x}`));
    expect(evaluateBloomTest(t, (x) => chunk.has(`c1:${x}`))).toBe(true);
  });
});

describe("regexLiterals", () => {
  it.each([
    ["abc", ["abc"]],
    ["a|b|c", ["a", "b", "c"]],
    ["^(GET|POST) /x$", ["GET /x", "POST /x"]],
    ["a[bc]d?", ["ab", "abd", "ac", "acd"]],
    ["a\\.b", ["a.b"]],
    ["(?P<x>a|b)c", ["ac", "bc"]],
    ["[a-c]", ["a", "b", "c"]],
    ["a.b", undefined],
    ["a+", undefined],
    ["a{2}", undefined],
    ["[^a]", undefined],
    ["\\d", undefined],
    ["(?i)a", undefined],
  ] as [string, string[] | undefined][])("%s", (re, want) => {
    const got = regexLiterals(re);
    expect(got === undefined ? undefined : [...got].sort()).toEqual(
      want === undefined ? undefined : [...want].sort(),
    );
  });
});

// --- the no-false-negative property -------------------------------------------------------

const NAMES = ["trace_id", "user", "level", "app"];
const VALUES = ["abc", "def", "u1", "error", "", "a.c", "5"];
const REGEXES = [
  ".+",
  ".*",
  "abc|def",
  "ab[cd]",
  "u1?",
  "a.c",
  "(?i)ABC",
  "error|",
  "[0-9]",
  "(abc)",
];

const leaf = fc.oneof(
  fc
    .tuple(fc.constantFrom(...NAMES), fc.constantFrom("=", "!="), fc.constantFrom(...VALUES))
    .map(([n, op, v]) => `${n}${op}${JSON.stringify(v)}`),
  fc
    .tuple(fc.constantFrom(...NAMES), fc.constantFrom("=~", "!~"), fc.constantFrom(...REGEXES))
    .map(([n, op, v]) => `${n}${op}${JSON.stringify(v)}`),
  fc
    .tuple(
      fc.constantFrom(...NAMES),
      fc.constantFrom(">", "<=", "=="),
      fc.integer({ min: 0, max: 9 }),
    )
    .map(([n, op, v]) => `${n}${op}${v}`),
);
const filter: fc.Arbitrary<string> = fc.letrec<{ f: string }>((tie) => ({
  f: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc
      .tuple(tie("f"), fc.constantFrom(" and ", " or ", ", ", " "), tie("f"))
      .map(([a, op, b]) => `(${a}${op}${b})`),
  ),
})).f;
const stage = fc.oneof(
  filter.map((f) => `| ${f}`),
  filter.map((f) => `| ${f}`),
  fc.constantFrom(
    "| json",
    "| logfmt",
    '| regexp "user=(?P<user>\\\\w+)"',
    '| pattern "<_> level=<level> <_>"',
    "| unpack",
  ),
  fc.constantFrom(
    "| label_format user=level",
    "| drop trace_id",
    "| keep user, app",
    '| line_format "{{.user}}"',
    "| decolorize",
  ),
  fc.constantFrom('|= "abc"', '!= "u1"', '|~ "a.c"'),
);
const metadata = fc.dictionary(fc.constantFrom(...NAMES.slice(0, 3)), fc.constantFrom(...VALUES), {
  maxKeys: 3,
});

describe("no false negatives", () => {
  it("an entry the pipeline keeps always passes the bloom test of its tokens", () => {
    fc.assert(
      fc.property(
        fc.array(stage, { maxLength: 5 }),
        metadata,
        metadata,
        fc.boolean(),
        fc.constantFrom("json", "logfmt", "plain"),
        (stages, sm, inLine, streamHasUser, shape) => {
          const q = parseExpr(`{app="api"} ${stages.join(" ")}`);
          if (q.kind !== "log") return;
          const test = extractBloomTests(q);
          const line =
            shape === "json"
              ? JSON.stringify(inLine)
              : shape === "logfmt"
                ? Object.entries(inLine)
                    .map(([k, v]) => `${k}=${v}`)
                    .join(" ")
                : `x level=error abc user=u1 ${Object.values(inLine).join(" ")}`;
          const labels: Record<string, string> = streamHasUser
            ? { app: "api", user: "u1" }
            : { app: "api" };
          const kept = compilePipeline(q.pipeline).process({
            timestamp: 1n,
            line,
            labels,
            structuredMetadata: sm,
          });
          if (kept === null) return;
          const tokens = new Set<string>();
          for (const [k, v] of Object.entries(sm)) {
            tokens.add(k);
            tokens.add(`${k}=${v}`);
          }
          expect(evaluateBloomTest(test, (t) => tokens.has(t), labels)).toBe(true);
          // Inside a chunk: the entry's block and the entry itself, by symbol ids.
          const symbols = [...new Set(Object.entries(sm).flat())];
          const refs = Uint32Array.from(Object.entries(sm).flat(), (x) => symbols.indexOf(x));
          const filters = chunkFilters(
            {
              blockMayHold: (_, x) => symbols.includes(x),
              symbolIds: (x) => (symbols.includes(x) ? [symbols.indexOf(x)] : []),
            },
            test,
            labels,
          );
          expect(filters === undefined || filters.block(0)).toBe(true);
          expect(filters === undefined || filters.entry(refs, refs.length / 2)).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("refuses a block or an entry without the pair's value before it looks its name up", () => {
    const q = parseExpr('{app="api"} | trace_id="t-9"');
    if (q.kind !== "log") throw new Error("not a log query");
    const test = extractBloomTests(q);
    const asked: string[] = [];
    const symbols = ["trace_id", "t-1"];
    const filters = chunkFilters(
      {
        blockMayHold: (_, x) => (asked.push(x), symbols.includes(x)),
        symbolIds: (x) => (asked.push(x), symbols.includes(x) ? [symbols.indexOf(x)] : []),
      },
      test,
      { app: "api" },
    )!;
    expect(filters.block(0)).toBe(false);
    expect(filters.entry(Uint32Array.of(0, 1), 1)).toBe(false);
    // A chunk kept by a false positive: its names' ids (a walk of its symbol table) unasked.
    expect(asked).toEqual(["t-9", "t-9"]);
  });
});
