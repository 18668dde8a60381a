import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compress } from "snappyjs";
import { fingerprint, parseLabels } from "@sieve/labels";
import { decodeQueueRecord, encodePushRequest } from "@sieve/proto";
import { DEFAULT_LIMITS } from "./limits.js";
import type { TenantLimits } from "./limits.js";
import { preparePush } from "./prepare.js";
import type { PrepareOutcome, PreparedPush } from "./prepare.js";

const NOW_MS = Date.UTC(2026, 0, 1);
const TS = String(BigInt(NOW_MS) * 1_000_000n);

function prepareJson(body: string): PrepareOutcome {
  return preparePush({
    tenant: "t",
    body: Buffer.from(body),
    format: "json",
    encoding: "identity",
    maxDecompressedBytes: 16 << 20,
    limits: {
      ...DEFAULT_LIMITS,
      maxLabelNamesPerSeries: 1000,
      discoverServiceName: [],
      discoverLogLevels: false,
    },
    nowMs: NOW_MS,
  });
}

function accepted(outcome: PrepareOutcome): PreparedPush {
  if (!outcome.ok) throw new Error(`refused: ${outcome.refusal.message}`);
  return outcome.push;
}

/** Any code point, lone surrogates and controls included. */
const anyChar = fc.oneof(
  fc.integer({ min: 0, max: 0x10ffff }).map((cp) => String.fromCodePoint(cp)),
  fc.constantFrom("\ud800", "\udfff", "\x00", "\n", "\x7f", "\u0085", "\u2028", "\ufffe", '"'),
);

describe("lone UTF-16 surrogates in JSON (issue 10, case 1)", () => {
  it("decodes them as U+FFFD, as Go's encoding/json, in labels, lines and metadata", () => {
    const body = String.raw`{"streams":[{"stream":{"app":"x","k":"\ud800"},"values":[["${TS}","a\udc00b",{"m":"\ud800\u0041"}]]}]}`;
    const push = accepted(prepareJson(body));
    expect(push.rejections).toEqual([]);
    expect(push.streams.map((s) => s.labels)).toEqual(['{app="x", k="\uFFFD"}']);
    const record = decodeQueueRecord(push.records);
    expect(record.entries[0]!.line).toBe("a\uFFFDb");
    expect(record.entries[0]!.structuredMetadata).toEqual([{ name: "m", value: "\uFFFDA" }]);
    // What every reader does with the stream: parse its canonical string back.
    expect(parseLabels(record.labels)).toEqual([
      { name: "app", value: "x" },
      { name: "k", value: "\uFFFD" },
    ]);
  });

  it("keeps surrogate pairs, escaped or not", () => {
    const body = String.raw`{"streams":[{"stream":{"k":"\ud83d\ude00 😀"},"values":[["${TS}","x"]]}]}`;
    expect(accepted(prepareJson(body)).streams[0]!.labels).toBe('{k="😀 😀"}');
  });

  it("every label set accepted reads back, through its canonical string, as the same labels", () => {
    const name = fc.oneof(
      fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,8}$/),
      fc.string({ unit: anyChar }),
    );
    const value = fc.string({ unit: anyChar, maxLength: 12 });
    let checked = 0;
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 6 }), (stream) => {
        const push = accepted(
          prepareJson(JSON.stringify({ streams: [{ stream, values: [[TS, "x"]] }] })),
        );
        for (const s of push.streams) {
          const expected = Object.entries(stream)
            .map(([n, v]) => ({
              name: (n as string & { toWellFormed(): string }).toWellFormed(),
              value: (v as string & { toWellFormed(): string }).toWellFormed(),
            }))
            .filter((l) => l.value !== "")
            .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
          expect(parseLabels(s.labels)).toEqual(expected);
          expect(decodeQueueRecord(push.records).labels).toBe(s.labels);
          checked++;
        }
      }),
      { numRuns: 2000 },
    );
    expect(checked).toBeGreaterThan(200);
  });
});

describe("bodies that cost a lot to decode", () => {
  it("refuses a JSON body nested deeper than 64 levels before parsing it", () => {
    const deep = `{"streams":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`;
    const started = performance.now();
    const outcome = prepareJson(deep);
    expect(outcome).toEqual({
      ok: false,
      refusal: { status: 400, message: "nesting deeper than 64 levels" },
    });
    expect(performance.now() - started).toBeLessThan(200);
  });

  it("does not count brackets inside strings, escaped quotes included", () => {
    const line = `${"[".repeat(100)}\\"${"{".repeat(100)}\\\\`;
    const body = `{"streams":[{"stream":{"a":"b"},"values":[["${TS}","${line}"]]}]}`;
    const push = accepted(prepareJson(body));
    expect(decodeQueueRecord(push.records).entries[0]!.line).toBe(JSON.parse(`"${line}"`));
  });
});

describe("label sets sent as text, read once and remembered", () => {
  const ts = { seconds: NOW_MS / 1000, nanos: 0 };
  const body = (labels: readonly string[]) =>
    compress(
      encodePushRequest({
        streams: labels.map((l) => ({
          labels: l,
          entries: [{ timestamp: ts, line: "x", structuredMetadata: [] }],
        })),
      }),
    );
  const prepare = (labels: readonly string[], limits: Partial<TenantLimits> = {}) =>
    preparePush({
      tenant: "t",
      body: body(labels),
      format: "protobuf",
      encoding: "identity",
      maxDecompressedBytes: 16 << 20,
      limits: { ...DEFAULT_LIMITS, discoverLogLevels: false, ...limits },
      nowMs: NOW_MS,
    });
  const labelsOf = (outcome: PrepareOutcome) => accepted(outcome).streams.map((s) => s.labels);

  it("applies each push's limits and service name rule to a set read before", () => {
    const set = '{job="j", app="a"}';
    expect(labelsOf(prepare([set]))).toEqual(['{app="a", job="j", service_name="a"}']);
    expect(labelsOf(prepare([set], { discoverServiceName: ["job"] }))).toEqual([
      '{app="a", job="j", service_name="j"}',
    ]);
    expect(labelsOf(prepare([set], { discoverServiceName: [] }))).toEqual(['{app="a", job="j"}']);
    const refused = accepted(prepare([set], { maxLabelNamesPerSeries: 1 }));
    expect(refused.streams).toEqual([]);
    expect(refused.rejections.map((r) => r.reason)).toEqual(["max_label_names_per_series"]);
    expect(labelsOf(prepare([set]))).toEqual(['{app="a", job="j", service_name="a"}']);
  });

  it("refuses a set that does not parse every time it is sent, with the same message", () => {
    const first = accepted(prepare(['{app="a"', '{app="b"}']));
    const second = accepted(prepare(['{app="a"', '{app="b"}']));
    expect(first.rejections).toHaveLength(1);
    expect(second.rejections).toEqual(first.rejections);
    expect(second.streams.map((s) => s.labels)).toEqual(['{app="b", service_name="b"}']);
  });

  it("reads every set right past what it remembers (20,000 sets, twice)", () => {
    const sets = Array.from({ length: 20_000 }, (_v, i) => `{app="a${i}"}`);
    for (let round = 0; round < 2; round++) {
      for (let from = 0; from < sets.length; from += 5_000) {
        const chunk = sets.slice(from, from + 5_000);
        const got = accepted(prepare(chunk, { discoverServiceName: [] })).streams;
        expect(got.map((s) => s.labels)).toEqual(chunk);
        expect(got.map((s) => s.fingerprint)).toEqual(chunk.map((c) => fingerprint(c)));
      }
    }
  });
});
