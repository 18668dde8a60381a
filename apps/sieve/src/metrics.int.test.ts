// Metric queries over busy streams against a real `sieve all` over loopback (issue 15): a
// `sum(count_over_time(...))` over more lines than the ingester's `maxEntriesPerQuery`
// (100,000) was refused (the issue reports a 500); pushed down, it answers 200 with the right count, and a
// query over 2,000,000 lines in heads and chunks equals the count this test computes. The
// process's peak resident memory during that query is printed (the query runs on a query
// worker thread of the same process).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import snappy from "snappyjs";
import { encodePushRequest, type PushStream } from "@sieve/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSieve, type SieveProcess } from "./sieve.test-helper.js";

const MS = 1_000_000n;
/** Start of the data, recent enough for the distributor's sample-age limit. */
const T0_MS = Math.floor((Date.now() - 50 * 60_000) / 60_000) * 60_000;
const LEVELS = ["info", "warn", "error", "debug"];

let dir: string;
let sieve: SieveProcess;

/**
 * A push body: `count` lines of `{app}` from line `from`, line i at T0 + i * `spacingUs` µs,
 * level `LEVELS[i % 4]` in the line (short lines: the test pushes millions).
 */
function body(app: string, from: number, count: number, spacingUs: number): Uint8Array {
  const entries = [];
  for (let i = from; i < from + count; i++) {
    const ns = BigInt(T0_MS) * MS + BigInt(i) * BigInt(spacingUs) * 1000n + 1n;
    entries.push({
      timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
      line: `level=${LEVELS[i % 4]} i=${i}`,
      structuredMetadata: [],
    });
  }
  const streams: PushStream[] = [{ labels: `{app="${app}"}`, entries }];
  return snappy.compress(encodePushRequest({ streams }));
}

async function push(bodies: Uint8Array[]): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < bodies.length) {
      const b = bodies[next++]!;
      const res = await fetch(new URL("/loki/api/v1/push", sieve.url), {
        method: "POST",
        headers: { "Content-Type": "application/x-protobuf" },
        body: b,
      });
      if (res.status !== 204) throw new Error(`push: ${res.status} ${await res.text()}`);
    }
  };
  await Promise.all([lane(), lane()]);
}

/** Pushes `total` lines of `{app}` in bodies of 50,000 lines. */
async function pushLines(app: string, from: number, total: number, spacingUs: number) {
  const bodies = [];
  for (let i = from; i < from + total; i += 50_000) {
    bodies.push(body(app, i, Math.min(50_000, from + total - i), spacingUs));
  }
  await push(bodies);
}

async function query(path: string, params: Record<string, string>) {
  const res = await fetch(`${sieve.url}${path}?${new URLSearchParams(params).toString()}`);
  return { status: res.status, text: await res.text() };
}

type MatrixBody = {
  data: { result: { metric: Record<string, string>; values: [number, string][] }[] };
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-metrics-"));
  const config = join(dir, "sieve.yaml");
  // Loki's 4 MB/s tenant rate and 3 MB/s stream rate would refuse these pushes; 32 MiB
  // bodies fit 50,000 lines.
  await writeFile(
    config,
    [
      "distributor:",
      "  maxBodyBytes: 33554432",
      "  maxDecompressedBytes: 33554432",
      "  limits:",
      "    ingestionRateBytes: 1073741824",
      "    ingestionBurstBytes: 1073741824",
      "    perStreamRateBytes: 1073741824",
      "    perStreamBurstBytes: 1073741824",
      "",
    ].join("\n"),
  );
  sieve = await spawnSieve(["all", "--data-dir", join(dir, "data"), "--config-file", config]);
}, 60_000);

afterAll(async () => {
  // A graceful stop flushes every head first.
  await sieve.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

/** Waits until a count query sees `want` lines (the queue delivers to the ingester). */
async function settled(q: string, time: bigint, want: number): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await query("/loki/api/v1/query", { query: q, time: String(time) });
    if (r.status !== 200) return r.text;
    const v = (JSON.parse(r.text) as { data: { result: { value: [number, string] }[] } }).data
      .result[0]?.value[1];
    if (v === String(want) || Date.now() > deadline) return r.text;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("metric queries over busy streams", () => {
  it("sum(count_over_time) over 150,000 lines in the heads answers 200 and the count (issue 15: refused before, past the ingester's maxEntriesPerQuery)", async () => {
    const n = 150_000;
    // 150,000 lines over 10 minutes: 4 ms apart.
    await pushLines("busy", 0, n, 4000);
    const end = BigInt(T0_MS + 10 * 60_000) * MS;
    const text = await settled(`sum(count_over_time({app="busy"}[10m]))`, end, n);
    expect(JSON.parse(text)).toMatchObject({
      status: "success",
      data: {
        resultType: "vector",
        result: [{ metric: {}, value: [Number(end / MS) / 1000, String(n)] }],
      },
    });
    const r = await query("/loki/api/v1/query_range", {
      query: `sum(count_over_time({app="busy"}[5m]))`,
      start: String(BigInt(T0_MS + 5 * 60_000) * MS),
      end: String(end),
      step: "300",
    });
    expect(r.status, r.text).toBe(200);
    const values = (JSON.parse(r.text) as MatrixBody).data.result[0]!.values;
    expect(values.map(([, v]) => Number(v))).toEqual([75_000, 75_000]);
    // Grafana's log-volume histogram, as its Loki data source sends it (pkg/tsdb/loki's
    // makeDataRequest: ns bounds, the step in ms, the supporting query's X-Query-Tags).
    const params = new URLSearchParams({
      query: `sum by (level, detected_level) (count_over_time({app="busy"} | drop __error__[1m]))`,
      direction: "backward",
      start: String(BigInt(T0_MS + 60_000) * MS),
      end: String(end),
      step: "60000ms",
    });
    const volume = await fetch(`${sieve.url}/loki/api/v1/query_range?${params.toString()}`, {
      headers: { "X-Query-Tags": "Source=logvolhist" },
    });
    const histogram = await volume.text();
    expect(volume.status, histogram).toBe(200);
    const answer = JSON.parse(histogram) as MatrixBody & { data: { resultType: string } };
    expect(answer.data.resultType).toBe("matrix");
    const counted = answer.data.result.flatMap((series) => series.values.map(([, v]) => Number(v)));
    expect(answer.data.result.every((series) => series.values.length === 10)).toBe(true);
    expect(counted.reduce((a, b) => a + b, 0)).toBe(n);
  }, 60_000);

  it("a metric query over 2,000,000 lines in heads and chunks equals the test's count", async () => {
    const n = 2_000_000;
    // 2 M lines over 40 minutes: 1.2 ms apart; the first half flushed to chunks.
    const spacingUs = 1200;
    const pushStarted = performance.now();
    await pushLines("big", 0, n / 2, spacingUs);
    await settled(
      `sum(count_over_time({app="big"}[45m]))`,
      BigInt(T0_MS + 45 * 60_000) * MS,
      n / 2,
    );
    const flushed = await fetch(new URL("/flush", sieve.url), { method: "POST" });
    expect(flushed.status).toBe(204);
    await pushLines("big", n / 2, n / 2, spacingUs);
    const endMs = T0_MS + 41 * 60_000;
    await settled(`sum(count_over_time({app="big"}[45m]))`, BigInt(endMs) * MS, n);
    const pushMs = performance.now() - pushStarted;
    // The test's own count, per level and step: windows (t - 1m, t], t = T0 + k min.
    const want = new Map<string, number[]>();
    for (const l of LEVELS) want.set(l, Array<number>(41).fill(0));
    for (let i = 0; i < n; i++) {
      const ns = i * spacingUs * 1000 + 1; // after T0, exact in a double
      const k = Math.ceil(ns / 60e9); // the step whose window holds it
      want.get(LEVELS[i % 4]!)![k - 1]! += 1;
    }
    const rss: number[] = [];
    const sample = async (): Promise<void> => {
      const res = await fetch(new URL("/metrics", sieve.url));
      const m = /^process_resident_memory_bytes (\S+)$/m.exec(await res.text());
      if (m !== null) rss.push(Number(m[1]));
    };
    await sample();
    const before = rss[0]!;
    const state = { done: false };
    const sampling = (async () => {
      while (!state.done) {
        await sample();
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    const t0 = performance.now();
    const r = await query("/loki/api/v1/query_range", {
      // Grafana's log-volume query: by the level the distributor detected (`level=` here).
      query: `sum by (detected_level) (count_over_time({app="big"}[1m]))`,
      start: String(BigInt(T0_MS + 60_000) * MS),
      end: String(BigInt(endMs) * MS),
      step: "60",
    });
    const ms = performance.now() - t0;
    state.done = true;
    await sampling;
    expect(r.status, r.text).toBe(200);
    const result = (JSON.parse(r.text) as MatrixBody).data.result;
    expect(result.map((s) => s.metric.detected_level).sort()).toEqual([...LEVELS].sort());
    let total = 0;
    for (const s of result) {
      const expected = want.get(s.metric.detected_level!)!;
      const got = Array<number>(41).fill(0);
      for (const [sec, v] of s.values)
        got[Math.round((sec * 1000 - T0_MS) / 60_000) - 1] = Number(v);
      expect(got).toEqual(expected);
      total += got.reduce((a, b) => a + b, 0);
    }
    expect(total).toBe(n);
    const peak = Math.max(...rss);
    console.log(
      `2,000,000 lines pushed and delivered in ${pushMs.toFixed(0)} ms (half flushed to chunks); ` +
        `the query over them: ${ms.toFixed(0)} ms; process RSS ` +
        `${(before / 2 ** 20).toFixed(0)} MiB before, peak ${(peak / 2 ** 20).toFixed(0)} MiB ` +
        `during the query (${rss.length} samples)`,
    );
  }, 120_000);
});
