// Loki's log level discovery, case by case (its field_detection_test.go is the reference),
// and through preparation: `detected_level` reaches the queue record on both push paths.
import { decodeQueueRecord, encodePushRequest } from "@sieve/proto";
import fc from "fast-check";
import { compress } from "snappyjs";
import { describe, expect, it } from "vitest";
import {
  LEVEL_FIELDS,
  LEVEL_LABEL,
  LEVEL_METADATA,
  detectLevel,
  leadingLevel,
  levelMetadataName,
  normalizeLevel,
} from "./level.js";
import { DEFAULT_LIMITS } from "./limits.js";
import { preparePush } from "./prepare.js";

const labels = (o: Record<string, string> = {}) =>
  Object.entries(o).map(([name, value]) => ({ name, value }));
const md =
  (o: Record<string, string> = {}) =>
  (name: string) =>
    o[name];

describe("detectLevel", () => {
  it.each<[string, Record<string, string>, Record<string, string>, string, string | undefined]>([
    ["a level label", { level: "WARNING" }, {}, "msg=x level=debug", "warn"],
    ["a level metadata field", {}, { severity: "Err" }, "plain", "error"],
    ["an unknown word kept as written", { lvl: "notice" }, {}, "", "notice"],
    ["detected_level already there", {}, { detected_level: "info" }, "level=error", undefined],
    ["OTLP severity 17", {}, { severity_number: "17" }, "info", "error"],
    ["OTLP severity 0", {}, { severity_number: "0" }, "", "unknown"],
    ["OTLP severity not a number", {}, { severity_number: "x" }, "", "info"],
    ["logfmt", {}, {}, 'ts=1 level=wrn msg="a b"', "warn"],
    ["logfmt, the better-ranked field wins", {}, {}, "lvl=debug level=error", "error"],
    ["logfmt, quoted and upper case key", {}, {}, 'LEVEL="critical" x=1', "critical"],
    ["logfmt without a level: keywords", {}, {}, "msg=x status=500 [ERROR] boom", "error"],
    ["JSON", {}, {}, '{"level":"dbg","msg":"x"}', "debug"],
    ["JSON, nested once", {}, {}, '{"log":{"severity":"fatal"}}', "fatal"],
    ["JSON, nested too deep: keywords", {}, {}, '{"a":{"b":{"level":"error"}}}', "unknown"],
    ["JSON that does not parse: keywords", {}, {}, "{ INFO: not json }", "info"],
    ["keywords: info", {}, {}, "GET /api took 3ms, info", "info"],
    ["keywords: warning", {}, {}, "disk almost full (warning)", "warn"],
    ["keywords: none", {}, {}, "GET /api 200", "unknown"],
    // Words that name an Object property are words like any other.
    ["a level label constructor", { level: "constructor" }, {}, "", "constructor"],
    ["a level metadata field __proto__", {}, { lvl: "__proto__" }, "", "__proto__"],
    ["logfmt level=constructor: keywords", {}, {}, "level=constructor x", "unknown"],
    ["JSON level toString: keywords", {}, {}, '{"level":"toString"}', "unknown"],
  ])("%s", (_name, streamLabels, metadata, line, want) => {
    expect(detectLevel(labels(streamLabels), md(metadata), line)).toBe(want);
  });

  it.each<[string, string | undefined]>([
    ["level=info msg=x", "info"],
    ["level=WARNING", "warn"],
    ["level=notice msg=x", undefined],
    ['level="info"', undefined],
    [" level=info", undefined],
    ["lvl=info", undefined],
    ["level=", undefined],
    ["level=constructor", undefined],
    ["level=__proto__ x", undefined],
    ["level=Information", "info"],
    ["level=informations", undefined],
  ])("leadingLevel(%j) is %s, as the logfmt scan would say or nothing", (line, want) => {
    const bytes = Buffer.from(`xx${line}yy`);
    // The slice ends before "yy": a value running to the end of the line.
    expect(leadingLevel(bytes, 2, bytes.length - 2)).toBe(want);
    if (want !== undefined) expect(detectLevel([], () => undefined, line)).toBe(want);
  });

  it.each([
    ["TRC", "trace"],
    ["Information", "info"],
    ["WARN", "warn"],
    ["err", "error"],
    ["panic", "panic"],
    ["constructor", "constructor"],
    ["__proto__", "__proto__"],
  ])("normalizes %s to %s", (level, want) => {
    expect(normalizeLevel(level)).toBe(want);
  });
});

describe("the byte readers agree with the string path", () => {
  const levels = ["trace", "debug", "info", "warn", "error", "critical", "fatal"];
  const words = ["TRC", "dbg", "Information", "WRN", "warning", "err", "panic", "é", ...levels];
  // Words, their prefixes and case changes, and any other text.
  const word = fc.oneof(
    fc.constantFrom(...words),
    fc.tuple(fc.constantFrom(...words), fc.nat(12)).map(([w, n]) => w.slice(0, n)),
    fc.string({ maxLength: 14 }),
  );
  const cased = fc
    .tuple(word, fc.array(fc.boolean(), { minLength: 14, maxLength: 14 }))
    .map(([w, up]) => Array.from(w, (c, i) => (up[i] ? c.toUpperCase() : c)).join(""));

  it("leadingLevel finds every known word, whatever its case, as the logfmt scan would", () => {
    fc.assert(
      fc.property(cased, fc.constantFrom("", " msg=x", "\tx", "=y"), (w, tail) => {
        const line = `level=${w}${tail}`;
        const bytes = Buffer.from(`..${line}..`);
        const got = leadingLevel(bytes, 2, bytes.length - 2);
        const first = line.slice("level=".length).split(" ")[0]!;
        expect(got !== undefined, line).toBe(levels.includes(normalizeLevel(first)));
        if (got !== undefined) expect(got).toBe(detectLevel([], () => undefined, line));
      }),
    );
  });

  it("levelMetadataName finds exactly the names the detector reads", () => {
    const names = fc.oneof(
      fc.constantFrom(...LEVEL_METADATA, "span_id", "trace_id", "levels", "leve", "Lvl_", ""),
      fc.string({ maxLength: 16 }),
      fc.constantFrom(...LEVEL_FIELDS).map((n) => n.toUpperCase()),
    );
    fc.assert(
      fc.property(names, (name) => {
        const bytes = Buffer.from(`x${name}y`);
        const want = LEVEL_METADATA.has(name) ? name : undefined;
        expect(levelMetadataName(bytes, 1, bytes.length - 1)).toBe(want);
      }),
    );
  });
});

describe("detected_level through preparation", () => {
  const now = Date.UTC(2026, 0, 1);
  const ts = BigInt(now) * 1_000_000n;
  const limits = { ...DEFAULT_LIMITS, discoverServiceName: [] };
  const metadataOf = (records: Uint8Array, end: number) =>
    decodeQueueRecord(records.subarray(0, end)).entries.map((e) => e.structuredMetadata);

  it("protobuf (byte ranges) and JSON give the same pairs, after the pushed ones", () => {
    const lines = ["level=error boom", "all good, info", '{"level":"warn"}'];
    const proto = compress(
      encodePushRequest({
        streams: [
          {
            labels: '{app="a"}',
            entries: lines.map((line, i) => ({
              timestamp: { seconds: Number(ts / 1_000_000_000n), nanos: i },
              line,
              structuredMetadata: i === 0 ? [{ name: "trace_id", value: "t1" }] : [],
            })),
          },
        ],
      }),
    );
    const json = JSON.stringify({
      streams: [
        {
          stream: { app: "a" },
          values: lines.map((line, i) =>
            i === 0 ? [String(ts), line, { trace_id: "t1" }] : [String(ts + BigInt(i)), line],
          ),
        },
      ],
    });
    const want = [
      [
        { name: "trace_id", value: "t1" },
        { name: LEVEL_LABEL, value: "error" },
      ],
      [{ name: LEVEL_LABEL, value: "info" }],
      [{ name: LEVEL_LABEL, value: "warn" }],
    ];
    for (const [format, body] of [
      ["protobuf", proto],
      ["json", Buffer.from(json)],
    ] as const) {
      const outcome = preparePush({
        tenant: "t",
        body,
        format,
        encoding: "identity",
        maxDecompressedBytes: 1 << 20,
        limits,
        nowMs: now,
      });
      if (!outcome.ok) throw new Error(outcome.refusal.message);
      const { records, streams } = outcome.push;
      expect(metadataOf(records, streams[0]!.recordEnd), format).toEqual(want);
    }
    const off = preparePush({
      tenant: "t",
      body: proto,
      format: "protobuf",
      encoding: "identity",
      maxDecompressedBytes: 1 << 20,
      limits: { ...limits, discoverLogLevels: false },
      nowMs: now,
    });
    if (!off.ok) throw new Error(off.refusal.message);
    expect(metadataOf(off.push.records, off.push.streams[0]!.recordEnd)).toEqual([
      [{ name: "trace_id", value: "t1" }],
      [],
      [],
    ]);
  });
});
