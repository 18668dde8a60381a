import { describe, expect, it } from "vitest";
import { SpecError, parseSpec, quickSpec } from "./spec.js";

const VALID = `
name: fp-sweep
datasets:
  - name: shop
    generated:
      streams: 10
      lines: 50000
      span: 2h
      fields:
        - { name: trace_id, linesPerValue: 10, inLine: true }
        - { name: user_id, cardinality: 500 }
configurations:
  falsePositiveRate: [0.001, 0.01]
  filterLayout: [exact, scalable]
  ngrams: [off, { length: 4 }]
queries:
  repetitions: 5
  shapes:
    - { name: narrow, fields: [trace_id] }
    - { name: line, fields: [trace_id], filter: line, selector: wide }
`;

/** VALID with one line replaced (found by its text) or appended under a key. */
function variant(find: string, replace: string): string {
  if (!VALID.includes(find)) throw new Error(`VALID has no ${find}`);
  return VALID.replace(find, replace);
}

describe("parseSpec", () => {
  it("reads a valid spec with its defaults", () => {
    const spec = parseSpec(VALID);
    expect(spec.name).toBe("fp-sweep");
    const d = spec.datasets[0]!;
    if (!("generated" in d)) throw new Error("expected a generated dataset");
    expect(d.generated).toMatchObject({
      streams: 10,
      lines: 50_000,
      spanSeconds: 7200,
      lineShape: "logfmt",
      lineBytes: 200,
      zipf: 0,
      seed: 1,
    });
    expect(d.generated.fields[1]).toEqual({
      name: "user_id",
      cardinality: 500,
      linesPerValue: 1,
      inLine: false,
    });
    expect(spec.configurations).toEqual([
      {
        falsePositiveRate: [0.001, 0.01],
        filterLayout: ["exact", "scalable"],
        ngrams: ["off", { length: 4, skip: 0 }],
        tokens: [["key", "key=value", "prefixed"]],
        chunkTargetBytes: [1_572_864],
        chunkBlockBytes: [65_536],
      },
    ]);
    expect(spec.queries).toMatchObject({ repetitions: 5, limit: 1000, cold: true, warm: true });
    expect(spec.queries.shapes[1]).toEqual({
      name: "line",
      fields: ["trace_id"],
      values: "present",
      combine: "and",
      selector: "wide",
      filter: "line",
    });
  });

  it("reads a replay dataset; a matrix axis may be a scalar", () => {
    const spec = parseSpec(`
name: mine
datasets:
  - name: prod
    replay: { file: export.jsonl, format: logcli-jsonl, labels: '{cluster="eu"}', fields: [trace_id] }
configurations: { falsePositiveRate: 0.02 }
queries: { shapes: [{ name: q, fields: [trace_id] }] }
`);
    expect(spec.datasets[0]).toEqual({
      name: "prod",
      replay: {
        file: "export.jsonl",
        format: "logcli-jsonl",
        labels: '{cluster="eu"}',
        timestamps: "rebase",
        fields: ["trace_id"],
      },
    });
    expect(spec.configurations[0]!.falsePositiveRate).toEqual([0.02]);
  });

  // [what, spec text, the path the error must name, part of its message]
  const refusals: [string, string, string, string][] = [
    ["not YAML", "name: [", "(file)", "not YAML"],
    ["not a mapping", "- a", "(file)", "must be a mapping"],
    [
      "unknown top-level key",
      variant("name: fp-sweep", "name: fp-sweep\nrepeat: 2"),
      "repeat",
      "unknown key",
    ],
    ["bad name", variant("name: fp-sweep", "name: fp sweep"), "name", "does not match"],
    [
      "no datasets",
      "name: x\ndatasets: []\nconfigurations: {}\nqueries: {}",
      "datasets",
      "must not be empty",
    ],
    [
      "typo in a generated key",
      variant("streams: 10", "stream: 10"),
      "datasets[0].generated.stream",
      "unknown key",
    ],
    [
      "streams 0",
      variant("streams: 10", "streams: 0"),
      "datasets[0].generated.streams",
      "between 1",
    ],
    [
      "fractional lines",
      variant("lines: 50000", "lines: 1.5"),
      "datasets[0].generated.lines",
      "integer",
    ],
    ["bad span", variant("span: 2h", "span: 2 hours"), "datasets[0].generated.span", "duration"],
    [
      "bad line shape",
      variant("      span: 2h", "      span: 2h\n      lineShape: xml"),
      "datasets[0].generated.lineShape",
      "logfmt, json, plain",
    ],
    [
      "bad field name",
      variant("name: user_id", "name: user-id"),
      "datasets[0].generated.fields[1].name",
      "field name",
    ],
    [
      "both kinds",
      variant("    generated:", "    replay: { file: a, format: lines }\n    generated:"),
      "datasets[0]",
      "exactly one of",
    ],
    [
      "fp of 1",
      variant("[0.001, 0.01]", "[0.001, 1]"),
      "configurations.falsePositiveRate[1]",
      "between",
    ],
    [
      "unknown layout",
      variant("[exact, scalable]", "[exact, bloomier]"),
      "configurations.filterLayout[1]",
      "exact or scalable",
    ],
    [
      "n-gram without length",
      variant("{ length: 4 }", "{ skip: 1 }"),
      "configurations.ngrams[1].length",
      "integer",
    ],
    [
      "n-gram typo",
      variant("{ length: 4 }", "{ length: 4, skp: 1 }"),
      "configurations.ngrams[1].skp",
      "unknown key",
    ],
    [
      "unknown configuration key",
      variant("  ngrams:", "  token: [[key]]\n  ngrams:"),
      "configurations.token",
      "unknown key",
    ],
    [
      "a token set that is not a list",
      variant("  ngrams:", "  tokens: [key]\n  ngrams:"),
      "configurations.tokens[0]",
      "must be a list of token kinds",
    ],
    [
      "an unknown token kind",
      variant("  ngrams:", "  tokens: [[key, value]]\n  ngrams:"),
      "configurations.tokens[0][1]",
      "must be one of key, key=value, prefixed",
    ],
    [
      "a bad matrix in a list",
      VALID.replace(
        /configurations:[\s\S]*?queries:/,
        "configurations:\n  - { falsePositiveRate: [0.01] }\n  - { layout: exact }\nqueries:",
      ),
      "configurations[1].layout",
      "unknown key",
    ],
    [
      "no shapes",
      `${VALID.slice(0, VALID.indexOf("  shapes:"))}  shapes: []\n`,
      "queries.shapes",
      "must not be empty",
    ],
    [
      "shape with an unknown field",
      variant("fields: [trace_id] }", "fields: [span_id] }"),
      "queries.shapes[0].fields[0]",
      "no field span_id",
    ],
    [
      "line shape over a field not in lines",
      variant("{ name: line, fields: [trace_id]", "{ name: line, fields: [user_id]"),
      "queries.shapes[1].fields[0]",
      "inLine: true",
    ],
    [
      "duplicate shape",
      variant("name: line,", "name: narrow,"),
      "queries.shapes[1].name",
      "used twice",
    ],
    [
      "bad combine",
      variant("filter: line,", "filter: line, combine: xor,"),
      "queries.shapes[1].combine",
      "and, or",
    ],
    [
      "neither cold nor warm",
      variant("repetitions: 5", "repetitions: 5\n  cold: false\n  warm: false"),
      "queries.warm",
      "cannot both be false",
    ],
    [
      "repetitions 0",
      variant("repetitions: 5", "repetitions: 0"),
      "queries.repetitions",
      "between 1",
    ],
  ];

  it.each(refusals)("refuses %s, naming the key", (_what, text, path, message) => {
    let error: unknown;
    try {
      parseSpec(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SpecError);
    expect((error as SpecError).path).toBe(path);
    expect((error as SpecError).message).toContain(message);
  });

  it("needs labels for a plain lines replay", () => {
    expect(() =>
      parseSpec(`
name: x
datasets: [{ name: d, replay: { file: a.log, format: lines } }]
configurations: {}
queries: { shapes: [{ name: q, fields: [f] }] }
`),
    ).toThrow("datasets[0].replay.labels: is required for format lines");
  });

  it("reads a list of matrices and token sets in any order, named by the kinds", () => {
    const spec = parseSpec(`
name: three-vs-three
datasets: [{ name: d, generated: { streams: 1, lines: 10, fields: [{ name: t, inLine: true }] } }]
configurations:
  - { ngrams: [off] }
  - { ngrams: [{ length: 4, skip: 1 }], tokens: [[prefixed], [prefixed, key=value, key]] }
queries: { shapes: [{ name: q, fields: [t] }] }
`);
    expect(spec.configurations.map((m) => m.tokens)).toEqual([
      [["key", "key=value", "prefixed"]],
      [["prefixed"], ["key", "key=value", "prefixed"]],
    ]);
  });
});

describe("quickSpec", () => {
  it("scales generated datasets to a tenth and repetitions to 3", () => {
    const quick = quickSpec(parseSpec(VALID));
    const d = quick.datasets[0]!;
    if (!("generated" in d)) throw new Error("expected a generated dataset");
    expect(d.generated.lines).toBe(5000);
    expect(d.generated.fields.map((f) => f.cardinality)).toEqual([0, 50]);
    expect(quick.queries.repetitions).toBe(3);
  });
});
