// Needle in a haystack, end to end: 1,000,000 lines in 500 streams pushed into `sieve all`
// (protobuf + snappy, as Promtail sends them), each trace_id on three lines. For present and
// absent trace ids, `{...} | trace_id="..."` returns exactly the right lines while the blooms
// prune at least 95% of the chunks in range; with the bloom blocks deleted the answer is the
// same and nothing is pruned (fail open).
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import snappy from "snappyjs";
import { encodePushRequest, type PushStream } from "@sieve/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJson, spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const STREAMS = 500;
const LINES_PER_STREAM = 2000;
const LINES_PER_TRACE = 3;
const TOTAL = STREAMS * LINES_PER_STREAM;
const BASE_MS = Date.now() - 30 * 60_000;

// Trace t of stream s covers lines 3t..3t+2 of that stream; ids look like real ones.
const traceId = (s: number, t: number) =>
  ((s * 7919 + t * 104729) >>> 0).toString(16).padStart(8, "0") +
  s.toString(16).padStart(4, "0") +
  t.toString(16).padStart(4, "0");
const lineOf = (s: number, i: number) =>
  `level=info msg="request handled" stream=${s} seq=${i} path=/api/v1/items/${(i * 31) % 997} duration=${i % 250}ms`;
const tsNs = (i: number) => BigInt(BASE_MS + i) * 1_000_000n;

function request(streams: readonly number[], from: number, to: number): Uint8Array {
  const body: PushStream[] = streams.map((s) => ({
    labels: `{app="needle", stream="s${s}"}`,
    entries: Array.from({ length: to - from }, (_, k) => {
      const i = from + k;
      const ns = tsNs(i);
      return {
        timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
        line: lineOf(s, i),
        structuredMetadata: [
          { name: "trace_id", value: traceId(s, Math.floor(i / LINES_PER_TRACE)) },
        ],
      };
    }),
  }));
  return snappy.compress(encodePushRequest({ streams: body }));
}

let dir: string;
let sieve: SieveProcess | undefined;
const window = {
  start: String(BigInt(BASE_MS - 60_000) * 1_000_000n),
  end: String(BigInt(BASE_MS + 3_600_000) * 1_000_000n),
};

interface NeedleAnswer {
  lines: string[];
  chunksInRange: number;
  chunksPruned: number;
}

async function needle(id: string): Promise<NeedleAnswer> {
  const body = (await getJson(sieve!.url, "/loki/api/v1/query_range", {
    query: `{app="needle"} | trace_id="${id}"`,
    limit: "100",
    ...window,
  })) as {
    data: {
      result: { values: [string, string][] }[];
      stats: { sieve: { chunksInRange: number; chunksPrunedByBlooms: number } };
    };
  };
  return {
    lines: body.data.result.flatMap((r) => r.values.map((v) => v[1])).sort(),
    chunksInRange: body.data.stats.sieve.chunksInRange,
    chunksPruned: body.data.stats.sieve.chunksPrunedByBlooms,
  };
}

const present = Array.from({ length: 12 }, (_, k) => {
  const s = (k * 41) % STREAMS;
  const t = (k * 97) % Math.floor(LINES_PER_STREAM / LINES_PER_TRACE);
  const lines = Array.from({ length: LINES_PER_TRACE }, (_, j) =>
    lineOf(s, t * LINES_PER_TRACE + j),
  );
  return { id: traceId(s, t), lines: lines.sort() };
});
const absent = ["ffffffffffffffff", "4bf92f3577b34da6", traceId(STREAMS, 0)];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-needle-"));
  // Small chunks, so the haystack spans thousands of them (Loki's default is 1.5 MB).
  const config = join(dir, "sieve.yaml");
  // Loki's 4 MB/s ingestion limit would throttle a test that pushes 100 MB at once.
  await writeFile(
    config,
    [
      "ingester:",
      "  chunkTargetBytes: 6144",
      "distributor:",
      "  limits:",
      "    ingestionRateBytes: 1073741824",
      "    ingestionBurstBytes: 1073741824",
      "",
    ].join("\n"),
  );
  sieve = await spawnSieve(["all", "--data-dir", join(dir, "data"), "--config-file", config]);
  const batches: Uint8Array[] = [];
  for (let s = 0; s < STREAMS; s += 50) {
    const streams = Array.from({ length: 50 }, (_, k) => s + k);
    for (let from = 0; from < LINES_PER_STREAM; from += 500) {
      batches.push(request(streams, from, from + 500));
    }
  }
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const body = batches[next++]!;
      const response = await fetch(new URL("/loki/api/v1/push", sieve!.url), {
        method: "POST",
        headers: { "Content-Type": "application/x-protobuf" },
        body,
      });
      if (response.status !== 204)
        throw new Error(`push: ${response.status} ${await response.text()}`);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  // Every acknowledged line is in the queue; flush until the store holds them all.
  await waitFor(
    async () => {
      await fetch(new URL("/flush", sieve!.url), { method: "POST" });
      const stats = (await getJson(sieve!.url, "/loki/api/v1/index/stats", {
        query: '{app="needle"}',
        ...window,
      })) as { entries: number; chunks: number };
      return stats.entries === TOTAL ? stats : undefined;
    },
    "every line to be flushed",
    120_000,
  );
  // index/stats counts the heads too: every line is in, so one more flush stores them all.
  expect((await fetch(new URL("/flush", sieve.url), { method: "POST" })).status).toBe(204);
}, 300_000);

afterAll(async () => {
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("needle in a haystack", { timeout: 120_000 }, () => {
  it("returns exactly the trace's lines and prunes at least 95% of the chunks in range", async () => {
    const stats = (await getJson(sieve!.url, "/loki/api/v1/index/stats", {
      query: '{app="needle"}',
      ...window,
    })) as { streams: number; chunks: number; entries: number };
    expect(stats).toMatchObject({ streams: STREAMS, entries: TOTAL });
    expect(stats.chunks).toBeGreaterThanOrEqual(2000);
    for (const { id, lines } of present) {
      const answer = await needle(id);
      expect(answer.lines, id).toEqual(lines);
      expect(answer.chunksInRange).toBe(stats.chunks);
      expect(answer.chunksPruned / answer.chunksInRange, id).toBeGreaterThanOrEqual(0.95);
    }
    for (const id of absent) {
      const answer = await needle(id);
      expect(answer.lines, id).toEqual([]);
      expect(answer.chunksPruned / answer.chunksInRange, id).toBeGreaterThanOrEqual(0.95);
    }
  });

  it("gives the same lines with no pruning once the bloom blocks are deleted (fail open)", async () => {
    expect(await sieve!.stop("SIGTERM")).toBe(0);
    const blooms = join(dir, "data", "store", "fake", "blooms");
    for (const day of await readdir(blooms)) await rm(join(blooms, day), { recursive: true });
    sieve = await spawnSieve(["all", "--data-dir", join(dir, "data")]);
    for (const { id, lines } of present.slice(0, 4)) {
      const answer = await needle(id);
      expect(answer.lines, id).toEqual(lines);
      expect(answer.chunksPruned, id).toBe(0);
    }
  });
});
