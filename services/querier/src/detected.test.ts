import { describe, expect, it } from "vitest";
import {
  DEFAULT_FIELD_LIMIT,
  DEFAULT_LINE_LIMIT,
  detectFieldValues,
  detectFields,
  detectLabels,
  parseDetectedFieldsQuery,
  rejectLabel,
} from "./detected.js";
import { detectType, displayValue, type DetectedFieldType } from "./detected-types.js";
import { ParamError } from "./params.js";
import type { ResultEntry } from "./querier.js";
import { formatQuery } from "./routes-detected.js";

const NOW = 1_700_000_000_000_000_000n;
const HOUR = 3_600_000_000_000n;

describe("detectType (Loki's determineType: ParseInt, ParseFloat, ParseBool, ParseDuration, ParseBytes)", () => {
  it.each<[string, DetectedFieldType]>([
    ["42", "int"],
    ["-7", "int"],
    ["+7", "int"],
    ["9223372036854775807", "int"],
    ["9223372036854775808", "float"], // past int64: ParseFloat takes it
    ["1.5", "float"],
    ["1e3", "float"],
    [".5", "float"],
    ["NaN", "float"],
    ["-Inf", "float"],
    ["0x1p-2", "float"],
    ["true", "boolean"],
    ["F", "boolean"],
    ["TRUE", "boolean"],
    ["tRue", "string"],
    ["1h30m", "duration"],
    ["250ms", "duration"],
    ["-1.5s", "duration"],
    ["1µs", "duration"],
    ["7d", "string"], // Go's ParseDuration has no days, nor a size unit `d`
    ["10KB", "bytes"],
    ["1.5 MiB", "bytes"],
    ["512b", "bytes"],
    ["5M", "bytes"], // not a duration (units are lower case), a size
    ["1,024 kB", "bytes"],
    ["GET", "string"],
    ["", "string"], // go-humanize's Sscanf("%f") of "" fails: not a size
  ])("%j → %s", (value, type) => {
    expect(detectType(value)).toBe(type);
  });
});

describe("displayValue (sizes as Loki lists them among a field's values)", () => {
  it.each([
    ["1536KiB", "1.6MB"],
    ["10KB", "10kB"],
    ["5b", "5B"],
    ["123", "123"],
    ["GET", "GET"],
    ["1h", "1h"],
  ])("%j → %j", (value, shown) => {
    expect(displayValue(value)).toBe(shown);
  });
});

describe("rejectLabel (Loki's shouldRejectLabel)", () => {
  it.each<[string[], boolean]>([
    [[], true],
    [["api"], false],
    [["1", "2", "3"], true],
    [["0", "1"], false],
    [["1"], false],
    [["0", "2"], true],
    [["1.5", "2"], true],
    [["8d3f3e1c-0c1e-4a5e-9b7a-1b2c3d4e5f60", "9d3f3e1c-0c1e-4a5e-9b7a-1b2c3d4e5f61"], true],
    [["8d3f3e1c-0c1e-4a5e-9b7a-1b2c3d4e5f60", "api"], false],
    [["{8d3f3e1c-0c1e-4a5e-9b7a-1b2c3d4e5f60}", "8d3f3e1c0c1e4a5e9b7a1b2c3d4e5f60"], true],
  ])("%j → %s", (values, rejected) => {
    expect(rejectLabel(values)).toBe(rejected);
  });
});

describe("detectLabels", () => {
  it("counts distinct values, keeps the static labels, drops ID-only labels, sorts", () => {
    const out = detectLabels([
      { app: "api", pod: "1", build: "17", env: "prod", flag: "1" },
      { app: "web", pod: "2", build: "18", env: "prod", flag: "0" },
      { app: "api", pod: "3", build: "19", env: "dev" },
    ]);
    expect(out).toEqual([
      { label: "app", cardinality: 2 },
      { label: "env", cardinality: 2 },
      { label: "flag", cardinality: 2 },
      { label: "pod", cardinality: 3 }, // static: kept though numeric
    ]);
  });
});

describe("parseDetectedFieldsQuery (Loki's ParseDetectedFieldsQuery)", () => {
  const parse = (qs: string) => parseDetectedFieldsQuery(new URLSearchParams(qs), NOW);

  it("defaults: the last hour, 100 lines, 1000 fields", () => {
    const q = parse("query=%7Bapp%3D%22api%22%7D");
    expect(q).toMatchObject({
      query: '{app="api"}',
      start: NOW - HOUR,
      end: NOW,
      lineLimit: DEFAULT_LINE_LIMIT,
      fieldLimit: DEFAULT_FIELD_LIMIT,
    });
  });

  it.each<[string, Partial<ReturnType<typeof parse>>]>([
    ["line_limit=7&limit=3", { lineLimit: 7, fieldLimit: 3 }],
    ["field_limit=4", { fieldLimit: 4 }],
    ["limit=5&field_limit=4", { fieldLimit: 5 }], // `limit` wins, as Loki reads it
    ["step=60000", { step: 60_000_000_000_000n }], // float seconds, as Loki reads it
    ["step=1m", { step: 60_000_000_000n }],
    ["start=1700000000&end=1700000060", { start: NOW, end: NOW + 60_000_000_000n }],
  ])("%s", (qs, want) => {
    expect(parse(qs)).toMatchObject(want);
  });

  it.each([
    ["line_limit=0", "limit must be a positive value"],
    ["limit=-1", "limit must be a positive value"],
    ["field_limit=x", 'strconv.Atoi: parsing "x": invalid syntax'],
    ["line_limit=1.5", 'strconv.Atoi: parsing "1.5": invalid syntax'],
    ["start=1700000060&end=1700000000", "end timestamp must not be before or equal to start time"],
    [
      "step=0",
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    ],
    [
      "start=0&end=1700000000&step=1",
      "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter",
    ],
    ["start=x", `could not parse 'start' parameter: strconv.ParseInt: parsing "x": invalid syntax`],
  ])("%s → %s", (qs, message) => {
    expect(() => parse(qs)).toThrow(new ParamError(message));
  });
});

function entry(
  line: string,
  stream: Record<string, string>,
  metadata: Record<string, string> = {},
  parsed: Record<string, string> = {},
): ResultEntry {
  return {
    timestamp: 1n,
    line,
    stream,
    metadata,
    labels: { ...stream, ...metadata, ...parsed },
  };
}

describe("detectFields", () => {
  const sample = [
    entry(
      '{"status":200,"latency":"15ms","user":{"id":"u1"},"app":"x"}',
      { app: "api" },
      { trace_id: "t1" },
    ),
    entry('{"status":404,"latency":"3ms","user":{"id":"u2"}}', { app: "api" }, { trace_id: "t2" }),
    entry("level=info size=10KB ok=true ratio=0.5", { app: "web" }),
    entry("not parseable at all =", { app: "web" }),
  ];

  it("finds metadata, JSON and logfmt fields with their types, parsers and cardinality", () => {
    expect(detectFields(sample, 100)).toEqual([
      { label: "app_extracted", type: "string", cardinality: 1, parsers: ["json"] },
      { label: "latency", type: "duration", cardinality: 2, parsers: ["json"] },
      { label: "level", type: "string", cardinality: 1, parsers: ["logfmt"] },
      { label: "ok", type: "boolean", cardinality: 1, parsers: ["logfmt"] },
      { label: "ratio", type: "float", cardinality: 1, parsers: ["logfmt"] },
      { label: "size", type: "bytes", cardinality: 1, parsers: ["logfmt"] },
      { label: "status", type: "int", cardinality: 2, parsers: ["json"] },
      { label: "trace_id", type: "string", cardinality: 2, parsers: null },
      { label: "user_id", type: "string", cardinality: 2, parsers: ["json"] },
    ]);
  });

  it("keeps the first field_limit fields found", () => {
    const out = detectFields(sample, 2);
    expect(out).toHaveLength(2);
    // The first entry's metadata comes first, then its line's fields in line order.
    expect(out.map((f) => f.label)).toEqual(["status", "trace_id"]);
  });

  it("labels the query's own parsers extracted are fields of the line's parser", () => {
    const e = entry("a=1 b=x", { app: "api" }, {}, { a: "1", b: "x", __error__: "" });
    expect(detectFields([e], 10)).toEqual([
      { label: "a", type: "int", cardinality: 1, parsers: ["logfmt"] },
      { label: "b", type: "string", cardinality: 1, parsers: ["logfmt"] },
    ]);
  });

  it("a parser's field of a line neither parser reads has no parser", () => {
    const e = entry("x=", { app: "api" }, {}, { pattern_field: "v" });
    // `x=` is logfmt with an empty value: read, no field; the pattern field keeps logfmt.
    const unparsed = entry('{"broken": ', { app: "api" }, {}, { pattern_field: "v" });
    expect(detectFields([e], 10)).toEqual([
      { label: "pattern_field", type: "string", cardinality: 1, parsers: ["logfmt"] },
    ]);
    expect(detectFields([unparsed], 10).find((f) => f.label === "pattern_field")).toBeDefined();
  });
});

describe("detectFieldValues", () => {
  it("lists a field's distinct values, sizes rewritten, capped at the limit", () => {
    const sample = [
      entry("size=1536KiB code=1", { app: "a" }),
      entry("size=10KB code=2", { app: "a" }),
      entry("size=10KB code=3", { app: "a" }, { code: "9" }),
    ];
    expect(detectFieldValues(sample, "size", 10)).toEqual(["1.6MB", "10kB"]);
    expect(detectFieldValues(sample, "code", 10)).toEqual(["1", "2", "3", "9"]);
    expect(detectFieldValues(sample, "code", 2)).toHaveLength(2);
    expect(detectFieldValues(sample, "missing", 10)).toEqual([]);
  });
});

describe("formatQuery (Loki's format_query)", () => {
  it.each([
    ['{app="api"}|="x"', '{app="api"} |= "x"'],
    ['sum by(app)(rate({app="api"}[5m]))', 'sum by (app) (rate({app="api"} [5m]))'], // the printer's spacing
  ])("%s → %s", (query, formatted) => {
    expect(formatQuery(query)).toEqual({ body: { status: "success", data: formatted } });
  });

  it("a long query is laid out over several lines, as Loki's Prettify", () => {
    const selector =
      '{app="checkout", namespace="production", cluster="eu-west-1", container="api"}';
    expect(formatQuery(`${selector} |= "error" | logfmt | level="error"`)).toEqual({
      body: {
        status: "success",
        data: `${selector}\n  |= "error"\n  | logfmt\n  | level="error"`,
      },
    });
  });

  it("a parse error is a 400 invalid-query with LogQL's words", () => {
    const answer = formatQuery('{app="api"');
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      status: "invalid-query",
      error: expect.stringMatching(/^parse error at line 1, col \d+: syntax error/) as unknown,
    });
  });
});
