import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { openDataset, parseRfc3339Nano, readReplay, type LogEntry } from "./datasets.js";
import { scratchDir } from "../sieve.test-helper.js";
import { parseSpec, type DatasetSpec } from "./spec.js";

const TESTDATA = join(dirname(fileURLToPath(import.meta.url)), "testdata");
const NOW_MS = Date.UTC(2026, 10, 26, 12);
const NOW_NS = BigInt(NOW_MS) * 1_000_000n;

function generated(extra = ""): DatasetSpec {
  return parseSpec(`
name: t
datasets:
  - name: d
    generated:
      streams: 5
      lines: 3000
      span: 1h
      zipf: 1.2
      fields:
        - { name: trace_id, linesPerValue: 4, inLine: true }
        - { name: user_id, cardinality: 7 }
${extra}
configurations: {}
queries: { shapes: [{ name: q, fields: [trace_id] }] }
`).datasets[0]!;
}

async function collect(entries: AsyncIterable<LogEntry> | Iterable<LogEntry>): Promise<LogEntry[]> {
  const out: LogEntry[] = [];
  for await (const e of entries) out.push(e);
  return out;
}

const options = { specDir: TESTDATA, nowMs: NOW_MS, sampleSize: 50, replayFraction: 1 };

describe("generated datasets", () => {
  it("are the same for the same seed, read after read, and differ for another", async () => {
    const a = await openDataset(generated(), options);
    const first = await collect(a.entries());
    expect(await collect(a.entries())).toEqual(first);
    expect(await collect((await openDataset(generated(), options)).entries())).toEqual(first);
    const other = generated().valueOf() as { generated: object };
    const reseeded = { name: "d", generated: { ...other.generated, seed: 2 } } as DatasetSpec;
    const b = await collect((await openDataset(reseeded, options)).entries());
    expect(b.map((e) => e.line)).not.toEqual(first.map((e) => e.line));
  });

  it("hold what the spec says: lines, span, runs of shared values, cardinality, skew, values in lines", async () => {
    const d = await openDataset(generated(), options);
    const entries = await collect(d.entries());
    expect(d.summary).toMatchObject({ lines: 3000, streams: 5, kind: "generated" });
    expect(d.summary.rawBytes).toBe(entries.reduce((n, e) => n + Buffer.byteLength(e.line), 0));
    expect(d.endNs - d.startNs).toBeLessThanOrEqual(3600n * 1_000_000_000n);
    expect(d.endNs).toBeLessThanOrEqual(NOW_NS);
    const users = new Set(entries.map((e) => e.metadata[1]!.value));
    expect(users.size).toBeLessThanOrEqual(7);
    // A trace id is shared by the 4 consecutive lines of its stream (the last run may be short).
    const byTrace = new Map<string, LogEntry[]>();
    for (const e of entries) {
      const t = e.metadata[0]!.value;
      byTrace.set(t, [...(byTrace.get(t) ?? []), e]);
    }
    for (const lines of byTrace.values()) {
      expect(lines.length).toBeLessThanOrEqual(4);
      expect(new Set(lines.map((e) => e.stream)).size).toBe(1);
    }
    for (const e of entries) expect(e.line).toContain(`trace_id=${e.metadata[0]!.value}`);
    // Zipf 1.2 over 5 streams: the first holds the most lines, about 44%.
    const counts = new Map<string, number>();
    for (const e of entries) counts.set(e.stream, (counts.get(e.stream) ?? 0) + 1);
    const first = counts.get('{env="experiment", pod="pod-0", service="svc-0"}')!;
    expect(first / 3000).toBeGreaterThan(0.38);
    expect(first / 3000).toBeLessThan(0.5);
    // The sample holds real lines' values; absent values are in no line.
    for (const s of d.sample) {
      expect(
        entries.some((e) => e.stream === s.stream && e.metadata[0]!.value === s.values.trace_id),
      ).toBe(true);
    }
    const all = new Set(entries.flatMap((e) => e.metadata.map((m) => m.value)));
    for (let i = 0; i < 100; i++) expect(all.has(d.absentValue("trace_id", i))).toBe(false);
    expect(d.absentValue("trace_id", 3)).toBe(d.absentValue("trace_id", 3));
    expect(d.absentValue("trace_id", 3)).toHaveLength(16);
    expect(d.wideSelector).toBe('{env="experiment"}');
  });

  it.each(["logfmt", "json", "plain"])("writes %s lines near the asked length", async (shape) => {
    const spec = generated().valueOf() as { generated: object };
    const d = await openDataset(
      {
        name: "d",
        generated: { ...spec.generated, lineShape: shape, lineBytes: 300 },
      } as DatasetSpec,
      options,
    );
    const entries = await collect(d.entries());
    const mean = entries.reduce((n, e) => n + e.line.length, 0) / entries.length;
    expect(mean).toBeGreaterThan(250);
    expect(mean).toBeLessThan(350);
    if (shape === "json")
      for (const e of entries) expect(() => JSON.parse(e.line) as unknown).not.toThrow();
  });
});

describe("replay readers", () => {
  it("reads real `logcli query --output=jsonl` lines (3.7.6), fields as metadata, common labels put back", async () => {
    const entries = await collect(
      readReplay(
        join(TESTDATA, "logcli-3.7.6.jsonl"),
        "logcli-jsonl",
        new Set(["trace_id", "user_id"]),
        { env: "prod" },
        NOW_NS,
      ),
    );
    expect(entries).toHaveLength(7);
    expect(entries[0]).toEqual({
      stream: '{detected_level="unknown", env="prod", service="cart", service_name="cart"}',
      ts: 1_795_685_022_283_373_940n,
      line: "plain line with ünïcode ✓",
      metadata: [{ name: "trace_id", value: "t9" }],
    });
    expect(entries[1]!.line).toBe('level=info msg="checkout done" trace_id=t2 user="ana \\"q\\""');
    expect(entries[1]!.metadata).toEqual([
      { name: "trace_id", value: "t2" },
      { name: "user_id", value: "u2" },
    ]);
  });

  it("rebases a replay so its newest line is now, and keeps a fraction with --quick", async () => {
    const spec = parseSpec(`
name: t
datasets:
  - name: d
    replay: { file: logcli-3.7.6.jsonl, format: logcli-jsonl, labels: '{env="prod"}', fields: [trace_id, user_id] }
configurations: {}
queries: { shapes: [{ name: q, fields: [trace_id] }] }
`).datasets[0]!;
    const d = await openDataset(spec, options);
    expect(d.endNs - 1n).toBe(NOW_NS);
    expect(d.summary).toMatchObject({ lines: 7, streams: 2, kind: "replay" });
    expect(d.wideSelector).toBe('{detected_level=~".+"}');
    const quick = await openDataset(spec, { ...options, replayFraction: 0.3 });
    expect(quick.summary.lines).toBe(3);
  });

  it("reads Loki push JSON, one body per line or one body", async () => {
    const dir = scratchDir("replay-");
    const body = (ts: string, line: string) =>
      JSON.stringify({
        streams: [{ stream: { app: "a" }, values: [[ts, line, { trace_id: "x" }]] }],
      });
    writeFileSync(join(dir, "lines.json"), `${body("1000", "one")}\n${body("2000", "two")}\n`);
    writeFileSync(
      join(dir, "one.json"),
      JSON.stringify(
        {
          streams: [
            {
              stream: { app: "b" },
              values: [
                ["5", "five"],
                ["6", "six"],
              ],
            },
          ],
        },
        null,
        2,
      ),
    );
    const a = await collect(
      readReplay(join(dir, "lines.json"), "loki-push-json", new Set(), {}, NOW_NS),
    );
    expect(a).toEqual([
      { stream: '{app="a"}', ts: 1000n, line: "one", metadata: [{ name: "trace_id", value: "x" }] },
      { stream: '{app="a"}', ts: 2000n, line: "two", metadata: [{ name: "trace_id", value: "x" }] },
    ]);
    const b = await collect(
      readReplay(join(dir, "one.json"), "loki-push-json", new Set(), {}, NOW_NS),
    );
    expect(b.map((e) => [e.stream, e.ts, e.line])).toEqual([
      ['{app="b"}', 5n, "five"],
      ['{app="b"}', 6n, "six"],
    ]);
  });

  it("reads plain lines into one stream, 1 ms apart, ending now", async () => {
    const dir = scratchDir("replay-");
    writeFileSync(join(dir, "app.log"), "first\n\nsecond\nthird\n");
    const e = await collect(
      readReplay(join(dir, "app.log"), "lines", new Set(), { job: "x" }, NOW_NS),
    );
    expect(e.map((x) => [x.stream, NOW_NS - x.ts, x.line])).toEqual([
      ['{job="x"}', 3_000_000n, "first"],
      ['{job="x"}', 2_000_000n, "second"],
      ['{job="x"}', 1_000_000n, "third"],
    ]);
  });

  it.each([
    ["not JSON", "{", "logcli-jsonl", ":1: not JSON"],
    ["no timestamp", '{"line":"a"}', "logcli-jsonl", 'needs "line" and "timestamp"'],
    [
      "bad timestamp",
      '{"line":"a","timestamp":"yesterday","labels":{"a":"b"}}',
      "logcli-jsonl",
      "not an RFC 3339 time",
    ],
    [
      "no labels",
      '{"line":"a","timestamp":"2026-01-01T00:00:00Z"}',
      "logcli-jsonl",
      "no stream labels",
    ],
    ["push JSON without streams", '{"values":[]}', "loki-push-json", 'needs "streams"'],
  ] as const)("names the line of a bad file: %s", async (_what, text, format, message) => {
    const dir = scratchDir("replay-");
    writeFileSync(join(dir, "bad"), `${text}\n`);
    await expect(
      collect(readReplay(join(dir, "bad"), format, new Set(), {}, NOW_NS)),
    ).rejects.toThrow(message);
  });
});

describe("parseRfc3339Nano", () => {
  it.each([
    ["2026-11-26T09:23:42.28337394Z", 1_795_685_022_283_373_940n],
    ["2026-11-26T09:23:42Z", 1_795_685_022_000_000_000n],
    ["2026-11-26T10:23:42.000000001+01:00", 1_795_685_022_000_000_001n],
  ])("%s", (text, ns) => {
    expect(parseRfc3339Nano(text)).toBe(ns);
  });
});
