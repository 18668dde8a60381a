import { mkdtemp, rm, writeFile, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { FsObjectStore } from "@sieve/storage";
import { RibbonFilter } from "@sieve/bloom";
import {
  ALL_METADATA_TOKENS,
  CHUNK_PREFIX_BYTES,
  encodeBloomBlock,
  writeChunkPrefix,
} from "@sieve/index";
import type { BloomBlockStore, NgramOptions, SeriesBloomOptions } from "@sieve/index";
import { fingerprint, labelsFromObject, labelsString } from "@sieve/labels";
import { compilePipeline, extractBloomTests, parseExpr, printExpr } from "@sieve/logql";
import type { BloomTest } from "@sieve/logql";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import type { BloomGatewayConfig } from "./config.js";
import { keptChunks, matchingChunks, writeBlock } from "./fixtures.test-helper.js";
import type { SeriesSpec, WrittenSeries } from "./fixtures.test-helper.js";
import { BloomGateway } from "./gateway.js";
import type { FilterRequest, FilterSeries } from "@sieve/proto";

const logger = pino({ level: "silent" });
let dir: string;
let store: FsObjectStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-gateway-"));
  store = new FsObjectStore(dir);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function gateway(
  overrides: Partial<BloomGatewayConfig> = {},
  s: BloomBlockStore = store,
): BloomGateway {
  return new BloomGateway({ ...DEFAULT_CONFIG, ...overrides }, s, logger, new Registry());
}

function request(test: BloomTest | string, series: readonly FilterSeries[]): FilterRequest {
  const t = typeof test === "string" ? extractBloomTests(parseExpr(test)) : test;
  return { tenant: "team-a", from: 0n, through: 2n ** 62n, test: t, series };
}

/** `n` series of `chunks` chunks of `lines` entries, each entry with its own trace_id. */
function haystack(n: number, chunks: number, lines: number, app = "api"): SeriesSpec[] {
  return Array.from({ length: n }, (_, s) => ({
    labels: { app, pod: `pod-${s}` },
    chunks: Array.from({ length: chunks }, (_, c) =>
      Array.from({ length: lines }, (_, l) => ({
        trace_id: `t-${s}-${c}-${l}`,
        level: l % 2 === 0 ? "info" : "error",
      })),
    ),
  }));
}

let blockCount = 0;
/** A new block of `specs`, with their lines' n-grams when `ngrams` is given. */
async function block(
  specs: SeriesSpec[],
  ngrams?: NgramOptions,
  tokens?: Pick<SeriesBloomOptions, "metadataTokens" | "prefixed">,
): Promise<WrittenSeries[]> {
  const key = `team-a/blooms/block-${++blockCount}`;
  return writeBlock(store, key, specs, undefined, ngrams, tokens);
}

describe("BloomGateway.filterChunkRefs", () => {
  test("a needle keeps its chunk, skips other series and prunes the rest", async () => {
    const series = await block(haystack(20, 8, 50));
    const g = gateway();
    const res = await g.filterChunkRefs(request('{app="api"} | trace_id="t-7-3-12"', series));
    const needle = `${series[7]!.fingerprint}/${series[7]!.chunks[3]!.from}`;
    expect(keptChunks(res).has(needle)).toBe(true);
    // fp 1% per token, two tokens a test: a stray survivor or two at most.
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(160 - 3);
    expect(res.stats.seriesSkipped).toBeGreaterThanOrEqual(19 - 2);
    // One block read for the 20 series; 19 of them joined that read.
    expect(res.stats).toMatchObject({ series: 20, chunks: 160, blocksRead: 1, cacheHits: 19 });
    expect(res.stats.failedOpen).toEqual({});
    const again = await g.filterChunkRefs(request('{app="api"} | trace_id="t-7-3-12"', series));
    expect(again).toEqual({ ...res, stats: { ...res.stats, blocksRead: 0, cacheHits: 20 } });
  });

  test("absent needles prune at least 95% of chunks; present ones are always kept", async () => {
    const series = await block(haystack(10, 10, 20));
    const g = gateway();
    let pruned = 0;
    let total = 0;
    for (let i = 0; i < 50; i++) {
      const res = await g.filterChunkRefs(request(`{app="api"} | trace_id="absent-${i}"`, series));
      pruned += res.stats.chunksPruned;
      total += res.stats.chunks;
      const s = i % 10;
      const c = (i * 7) % 10;
      const present = await g.filterChunkRefs(
        request(`{app="api"} | trace_id="t-${s}-${c}-${i % 20}"`, series),
      );
      expect(
        keptChunks(present).has(`${series[s]!.fingerprint}/${series[s]!.chunks[c]!.from}`),
      ).toBe(true);
    }
    expect(pruned / total).toBeGreaterThanOrEqual(0.95);
  });

  test("a leaf on a stream label holds without the bloom", async () => {
    const series = await block(haystack(3, 4, 5));
    const g = gateway();
    const res = await g.filterChunkRefs(request('{pod=~".+"} | app="api"', series));
    expect(res.stats).toMatchObject({ chunks: 12, chunksPruned: 0, seriesSkipped: 0 });
    // Any value: the pipeline, not the bloom, judges a stream label.
    const web = await g.filterChunkRefs(request('{pod=~".+"} | app="web"', series));
    expect(web.stats.chunksPruned).toBe(0);
    const absent = await g.filterChunkRefs(request('{pod=~".+"} | team="web"', series));
    expect(absent.stats.chunksPruned).toBe(12);
    // The same from the series' table (the array came back with its blooms held).
    const cut = vi.spyOn(g.cache, "cutHeld");
    for (const test of ['app="api"', 'app="web"', 'app=~".+"']) {
      const again = await g.filterChunkRefs(request(`{pod=~".+"} | ${test}`, series));
      expect(again.stats.chunksPruned, test).toBe(0);
    }
    expect(cut).not.toHaveBeenCalled();
  });

  test("a test that cannot prune reads nothing and keeps everything", async () => {
    const series = await block(haystack(3, 4, 5));
    const res = await gateway().filterChunkRefs(request('{app="api"} | trace_id!="x"', series));
    expect(res.stats).toEqual({
      series: 3,
      seriesSkipped: 0,
      chunks: 12,
      chunksPruned: 0,
      chunksPrunedByLine: 0,
      blocksRead: 0,
      cacheHits: 0,
      failedOpen: {},
    });
    expect(res.series.map((s) => s.chunks)).toEqual(series.map((s) => s.chunks));
  });

  test("a single-chunk bloom (no prefixed tokens) answers the chunk with the series test", async () => {
    const series = await block(haystack(4, 1, 10));
    expect(series.every((s) => !s.chunks[0]!.prefixed)).toBe(true);
    const res = await gateway().filterChunkRefs(
      request('{app="api"} | trace_id="t-2-0-3"', series),
    );
    expect([...keptChunks(res)]).toContain(
      `${series[2]!.fingerprint}/${series[2]!.chunks[0]!.from}`,
    );
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(2);
  });

  test("a bloom written before chunk tokens were keyed by checksum is tested by its 20-byte prefixes", async () => {
    // As Sieve wrote multi-chunk blooms before: each token behind its chunk's prefix, hashed
    // as bytes, and record flags without bit 2.
    const encoder = new TextEncoder();
    const key = `team-a/blooms/block-${++blockCount}`;
    const prefix = new Uint8Array(CHUNK_PREFIX_BYTES);
    const prefixed = (token: string) => {
      const bytes = encoder.encode(token);
      const out = new Uint8Array(prefix.length + bytes.length);
      out.set(prefix);
      out.set(bytes, prefix.length);
      return out;
    };
    const specs = haystack(3, 4, 20);
    const series = specs.map((spec, s) => {
      const labels = labelsString(labelsFromObject(spec.labels));
      const chunks = spec.chunks.map((entries, c) => {
        const from = 1_714_521_600_000_000_000n + BigInt(s * 10 + c) * 1_000_000n;
        return {
          from,
          through: from + 999n,
          checksum: 1000 + s * 10 + c,
          bytes: 100,
          entries: entries.length,
          prefixed: true,
        };
      });
      const keys = spec.chunks.flatMap((entries, c) => {
        writeChunkPrefix(chunks[c]!, prefix);
        return entries.flatMap((sm) =>
          Object.entries(sm).flatMap(([name, value]) => [
            prefixed(name),
            prefixed(`${name}=${value}`),
          ]),
        );
      });
      return {
        labels,
        fingerprint: fingerprint(labels),
        chunks,
        filter: RibbonFilter.fromKeys(keys, 0.01),
      };
    });
    series.sort((a, b) => (a.fingerprint < b.fingerprint ? -1 : 1));
    const encoded = encodeBloomBlock(
      series.map(({ fingerprint, filter, chunks }) => ({
        fingerprint,
        filter,
        chunks,
        metadataTokens: ALL_METADATA_TOKENS,
      })),
    );
    await store.put(key, encoded.bytes);
    const asked: FilterSeries[] = series.map((s, i) => ({
      fingerprint: s.fingerprint,
      labels: s.labels,
      chunks: s.chunks,
      bloom: {
        kind: "block",
        key,
        offset: encoded.entries[i]!.offset,
        length: encoded.entries[i]!.length,
      },
    }));
    const needle = series.find((s) => s.labels.includes("pod-1"))!;
    const res = await gateway().filterChunkRefs(request('{app="api"} | trace_id="t-1-2-5"', asked));
    expect(keptChunks(res)).toContain(`${needle.fingerprint}/${needle.chunks[2]!.from}`);
    expect(res.stats.failedOpen).toEqual({});
    // 12 chunks, each tested on its own; fp 1% per token.
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(12 - 3);
  });

  test("too many series is a typed error", async () => {
    const series = await block(haystack(3, 1, 1));
    await expect(
      gateway({ maxSeriesPerRequest: 2 }).filterChunkRefs(request('{a="b"} | x="y"', series)),
    ).rejects.toMatchObject({ code: "too_many_series", status: 400 });
  });
});

describe("fail open", () => {
  const needle = '{app="api"} | trace_id="nowhere"';

  async function expectFailOpen(
    series: readonly FilterSeries[],
    reason: string,
    g: BloomGateway = gateway(),
  ): Promise<void> {
    const res = await g.filterChunkRefs(request(needle, series));
    const chunks = series.reduce((n, s) => n + s.chunks.length, 0);
    expect(res.stats.failedOpen).toEqual({ [reason]: chunks });
    expect(res.stats.chunksPruned).toBe(0);
    expect(res.series.map((s) => s.chunks)).toEqual(series.map((s) => s.chunks));
    // Each chunk kept untested has its verdict, but for a missing bloom (the request says so).
    const verdicts = res.verdicts ?? [];
    expect(verdicts).toHaveLength(reason === "missing_bloom" ? 0 : chunks);
    for (const v of verdicts) expect(v).toMatchObject({ outcome: "failed_open", reason });
  }

  test("a missing bloom", async () => {
    const series = (await block(haystack(2, 3, 4))).map((s) => ({
      ...s,
      bloom: { kind: "missing", reason: "too_large" } as const,
    }));
    await expectFailOpen(series, "missing_bloom");
  });

  test("a deleted block", async () => {
    const series = await block(haystack(2, 3, 4));
    const key = (series[0]!.bloom as { key: string }).key;
    await store.delete(key);
    await expectFailOpen(series, "block_not_found");
  });

  test("corrupted bytes in a record, a location past the end, another series' record", async () => {
    const series = await block(haystack(3, 3, 4));
    const loc = series[0]!.bloom as { kind: "block"; key: string; offset: number; length: number };
    const path = join(dir, loc.key);
    const bytes = await readFile(path);
    bytes[loc.offset + loc.length - 3]! ^= 0xff; // inside series 0's filter: its CRC fails
    await writeFile(path, bytes);
    await expectFailOpen([series[0]!], "corrupt_bloom");
    const past = { ...series[1]!, bloom: { ...loc, offset: bytes.length + 10 } };
    await expectFailOpen([past], "corrupt_bloom");
    const swapped = { ...series[1]!, bloom: series[2]!.bloom };
    await expectFailOpen([swapped], "corrupt_bloom");
    const negative = { ...series[1]!, bloom: { ...loc, offset: -1 } };
    await expectFailOpen([negative], "corrupt_bloom");
  });

  test("an oversized record is not read", async () => {
    const series = await block(haystack(2, 3, 4));
    let reads = 0;
    const counting: BloomBlockStore = {
      getRange: (k, o, l) => (reads++, store.getRange(k, o, l)),
      head: (k) => store.head(k),
    };
    await expectFailOpen(series, "oversized_bloom", gateway({ maxBloomRecordBytes: 16 }, counting));
    expect(reads).toBe(0);
  });

  // Whole blocks (the default) and record by record (blocks past maxBlockBytes).
  test.each([
    { path: "whole block", maxBlockBytes: DEFAULT_CONFIG.maxBlockBytes, entries: 1 },
    { path: "record by record", maxBlockBytes: 1, entries: 2 },
  ])("a read slower than the timeout ($path)", async ({ maxBlockBytes, entries }) => {
    const series = await block(haystack(2, 3, 4));
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: BloomBlockStore = {
      getRange: async (k, o, l) => {
        await gate;
        return store.getRange(k, o, l);
      },
      head: (k) => store.head(k),
    };
    const g = gateway({ readTimeoutMs: 30, maxBlockBytes }, slow);
    await expectFailOpen(series, "timeout", g);
    release();
    // The read went on and filled the cache: the next request tests with the blooms.
    await expect.poll(() => g.cacheStats().entries, { interval: 5 }).toBe(entries);
    const res = await g.filterChunkRefs(request(needle, series));
    expect(res.stats).toMatchObject({ failedOpen: {}, cacheHits: 2 });
  });

  test("a store error and unparseable labels", async () => {
    const series = await block(haystack(2, 3, 4));
    const failing: BloomBlockStore = {
      getRange: () => Promise.reject(new Error("connection reset")),
      head: () => Promise.reject(new Error("connection reset")),
    };
    await expectFailOpen(series, "store_error", gateway({}, failing));
    await expectFailOpen([{ ...series[0]!, labels: "{not labels" }], "invalid_labels");
  });
});

describe("explain: chunk verdicts", () => {
  /**
   * Series a: the needle in its first chunk only; b: no needle; both with level=info and two
   * chunks (tested chunk by chunk); c: one chunk without the needle (tested as a series).
   */
  const specs: SeriesSpec[] = [
    {
      labels: { app: "api", pod: "a" },
      chunks: [[{ trace_id: "needle", level: "info" }], [{ trace_id: "other-1", level: "info" }]],
      lines: [["GET /needle/path 200"], ["GET /other 200"]],
    },
    {
      labels: { app: "api", pod: "b" },
      chunks: [[{ trace_id: "other-2", level: "info" }], [{ trace_id: "other-3", level: "info" }]],
      lines: [["GET /b 200"], ["GET /b 500"]],
    },
    {
      labels: { app: "api", pod: "c" },
      chunks: [[{ trace_id: "other-4", level: "info" }]],
      lines: [["GET /c 200"]],
    },
  ];
  const explained = (q: string, series: readonly FilterSeries[]): FilterRequest => ({
    ...request(q, series),
    explain: true,
  });
  const ids = (series: readonly WrittenSeries[], s: number, c: number) => ({
    fingerprint: series[s]!.fingerprint,
    from: series[s]!.chunks[c]!.from,
    through: series[s]!.chunks[c]!.through,
    checksum: series[s]!.chunks[c]!.checksum,
  });
  const byFrom = <T extends { from: bigint }>(vs: readonly T[] | undefined): T[] =>
    [...(vs ?? [])].sort((x, y) => (x.from < y.from ? -1 : 1));

  test("series-level and chunk-level prunes, each with the leaf that failed", async () => {
    const series = await block(specs);
    expect(series.map((s) => s.chunks.map((c) => c.prefixed))).toEqual([
      [true, true],
      [true, true],
      [false],
    ]);
    const g = gateway();
    const q = '{app="api"} | trace_id="needle"';
    const res = await g.filterChunkRefs(explained(q, series));
    expect(keptChunks(res)).toEqual(
      new Set([`${series[0]!.fingerprint}/${series[0]!.chunks[0]!.from}`]),
    );
    const test = 'trace_id="needle"';
    expect(byFrom(res.verdicts)).toEqual(
      byFrom([
        { ...ids(series, 0, 1), outcome: "chunk", test },
        { ...ids(series, 1, 0), outcome: "chunk", test },
        { ...ids(series, 1, 1), outcome: "chunk", test },
        { ...ids(series, 2, 0), outcome: "series", test },
      ]),
    );
    // Asked without explain, the same answer and no verdicts.
    const plain = await g.filterChunkRefs(request(q, series));
    expect(plain.verdicts).toBeUndefined();
    expect(plain.series).toEqual(res.series);
  });

  test.each([
    // In a failed `and`, its first failing child; in a failed `or`, its first child.
    ['{app="api"} | level="info" and trace_id="nope"', 'trace_id="nope"'],
    ['{app="api"} | trace_id="nope" or trace_id="nada"', 'trace_id="nope"'],
    ['{app="api"} | user=~".+"', 'user=~".+"'],
    ['{app="api"} | trace_id="say \\"hi\\""', 'trace_id="say \\"hi\\""'],
  ])("%s names %s", async (q, leaf) => {
    const series = await block(specs);
    const res = await gateway().filterChunkRefs(explained(q, series));
    expect(res.verdicts).toHaveLength(5);
    for (const v of res.verdicts!) {
      const outcome = v.fingerprint === series[2]!.fingerprint ? "series" : "chunk";
      expect(v).toMatchObject({ outcome, test: leaf });
    }
  });

  test("a line filter on n-gram blooms names its literal", async () => {
    const series = await block(specs, { length: 4, skip: 0 });
    const res = await gateway().filterChunkRefs(explained('{app="api"} |= "/needle/"', series));
    expect(byFrom(res.verdicts)).toEqual(
      byFrom([
        { ...ids(series, 0, 1), outcome: "chunk", test: '|= "/needle/"' },
        { ...ids(series, 1, 0), outcome: "chunk", test: '|= "/needle/"' },
        { ...ids(series, 1, 1), outcome: "chunk", test: '|= "/needle/"' },
        { ...ids(series, 2, 0), outcome: "series", test: '|= "/needle/"' },
      ]),
    );
  });

  test("with explain, a missing bloom's chunks are listed as kept untested", async () => {
    const series = (await block(specs)).map((s) => ({
      ...s,
      bloom: { kind: "missing", reason: "too_large" } as const,
    }));
    const res = await gateway().filterChunkRefs(explained('{app="api"} | trace_id="x"', series));
    expect(res.verdicts).toHaveLength(5);
    for (const v of res.verdicts!)
      expect(v).toMatchObject({ outcome: "failed_open", reason: "missing_bloom" });
  });
});

describe("cache", () => {
  test("record by record: concurrent requests for the same blooms read each record once", async () => {
    const series = await block(haystack(5, 3, 4));
    let reads = 0;
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gated: BloomBlockStore = {
      getRange: async (k, o, l) => {
        reads++;
        await gate;
        return store.getRange(k, o, l);
      },
      head: (k) => store.head(k),
    };
    const g = gateway({ maxBlockBytes: 1 }, gated);
    const pending = Array.from({ length: 8 }, () =>
      g.filterChunkRefs(request('{app="api"} | trace_id="t-1-1-1"', series)),
    );
    await expect.poll(() => reads, { interval: 5 }).toBe(5);
    release();
    const results = await Promise.all(pending);
    expect(reads).toBe(5);
    expect(results.reduce((n, r) => n + r.stats.blocksRead, 0)).toBe(5);
    expect(results.reduce((n, r) => n + r.stats.cacheHits, 0)).toBe(35);
    expect(new Set(results.map((r) => JSON.stringify([...keptChunks(r)])))).toHaveProperty(
      "size",
      1,
    );
    expect(g.cacheStats()).toMatchObject({ misses: 5, inflight: 35, hits: 0, entries: 5 });
  });

  test("record by record: the byte budget evicts the least recently used blooms", async () => {
    const series = await block(haystack(30, 2, 20));
    const first = gateway({ maxBlockBytes: 1 });
    await first.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    const all = first.cacheStats().bytes;
    const budget = Math.floor(all / 3);
    const g = gateway({ cacheMaxBytes: budget, maxBlockBytes: 1 });
    const res0 = await g.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    expect(res0.stats).toMatchObject({ blocksRead: 30, failedOpen: {} });
    const stats = g.cacheStats();
    expect(stats.bytes).toBeLessThanOrEqual(budget);
    expect(stats.evictions).toBeGreaterThan(0);
    expect(stats.entries + stats.evictions).toBe(30);
    // The most recent series are the ones still cached.
    const res = await g.filterChunkRefs(request('{app="api"} | trace_id="x"', series.slice(-3)));
    expect(res.stats.cacheHits).toBe(3);
  });
});

/** A store over the test store that counts heads and reads, reads held until `release`. */
function countingStore(gated = false): {
  store: BloomBlockStore;
  heads: () => number;
  reads: () => number;
  release: () => void;
} {
  let heads = 0;
  let reads = 0;
  let release = (): void => undefined;
  const gate = gated ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve();
  return {
    store: {
      getRange: async (k, o, l) => {
        reads++;
        await gate;
        return store.getRange(k, o, l);
      },
      head: (k) => (heads++, store.head(k)),
    },
    heads: () => heads,
    reads: () => reads,
    release: () => {
      release();
    },
  };
}

function keyOf(s: FilterSeries): string {
  return (s.bloom as { key: string }).key;
}

describe("whole blocks", () => {
  test("concurrent requests load each block once", async () => {
    const series = [
      ...(await block(haystack(5, 3, 4, "a"))),
      ...(await block(haystack(5, 3, 4, "b"))),
      ...(await block(haystack(5, 3, 4, "c"))),
    ];
    const counting = countingStore(true);
    const g = gateway({}, counting.store);
    const q = '{app=~".+"} | trace_id="t-1-1-1"';
    const pending = Array.from({ length: 8 }, () => g.filterChunkRefs(request(q, series)));
    await expect.poll(counting.reads, { interval: 5 }).toBe(3);
    counting.release();
    const results = await Promise.all(pending);
    expect({ heads: counting.heads(), reads: counting.reads() }).toEqual({ heads: 3, reads: 3 });
    expect(results.reduce((n, r) => n + r.stats.blocksRead, 0)).toBe(3);
    expect(results.reduce((n, r) => n + r.stats.cacheHits, 0)).toBe(8 * 15 - 3);
    expect(g.cacheStats()).toMatchObject({
      misses: 3,
      inflight: 8 * 15 - 3,
      hits: 0,
      entries: 3,
      blockLoads: 3,
      recordReads: 0,
    });
    // The same answer as reading each record alone.
    const alone = await gateway({ maxBlockBytes: 1 }).filterChunkRefs(request(q, series));
    for (const r of results) expect(r.series).toEqual(alone.series);
    expect(results[0]!.stats.failedOpen).toEqual({});
  });

  test("the byte budget evicts the least recently used whole blocks", async () => {
    const blocks = await Promise.all(
      Array.from({ length: 8 }, (_, b) => block(haystack(10, 2, 20, `app-${b}`))),
    );
    const sizes = await Promise.all(
      blocks.map(async (bs) => (await store.head(keyOf(bs[0]!))).size),
    );
    // Loaded whole (a block at most a quarter of the budget), but not all 8 fit.
    const budget = 4 * Math.max(...sizes);
    const g = gateway({ cacheMaxBytes: budget });
    const q = (b: number): FilterRequest => request(`{app="app-${b}"} | trace_id="x"`, blocks[b]!);
    const first: Awaited<ReturnType<BloomGateway["filterChunkRefs"]>>[] = [];
    for (let b = 0; b < 8; b++) {
      const res = await g.filterChunkRefs(q(b));
      expect(res.stats).toMatchObject({ blocksRead: 1, cacheHits: 9, failedOpen: {} });
      expect(g.cacheStats().bytes).toBeLessThanOrEqual(budget);
      first.push(res);
    }
    const stats = g.cacheStats();
    expect(stats).toMatchObject({ blockLoads: 8, recordReads: 0 });
    expect(stats.evictions).toBeGreaterThan(0);
    expect(stats.entries + stats.evictions).toBe(8);
    // The most recent block is still held; the first was evicted and is loaded again.
    const last = await g.filterChunkRefs(q(7));
    expect(last.stats).toMatchObject({ blocksRead: 0, cacheHits: 10 });
    expect(last.series).toEqual(first[7]!.series);
    const again = await g.filterChunkRefs(q(0));
    expect(again.stats).toMatchObject({ blocksRead: 1, cacheHits: 9 });
    expect(again.series).toEqual(first[0]!.series);
    expect(g.cacheStats().bytes).toBeLessThanOrEqual(budget);
  });

  test("a block past maxBlockBytes, or a quarter of the budget, is read record by record", async () => {
    const series = await block(haystack(6, 3, 4));
    const size = (await store.head(keyOf(series[0]!))).size;
    const q = request('{app="api"} | trace_id="t-2-1-3"', series);
    const whole = await gateway().filterChunkRefs(q);
    for (const overrides of [{ maxBlockBytes: size - 1 }, { cacheMaxBytes: 4 * size - 4 }]) {
      const counting = countingStore();
      const g = gateway(overrides, counting.store);
      const res = await g.filterChunkRefs(q);
      expect(res.series).toEqual(whole.series);
      expect(res.stats).toEqual({ ...whole.stats, blocksRead: 6, cacheHits: 0 });
      expect(g.cacheStats()).toMatchObject({ blockLoads: 0, recordReads: 6, entries: 6 });
      expect({ heads: counting.heads(), reads: counting.reads() }).toEqual({ heads: 1, reads: 6 });
      // The verdict is remembered: no second head, the records come from memory.
      const warm = await g.filterChunkRefs(request('{app="api"} | trace_id="zz"', series));
      expect(warm.stats).toMatchObject({ blocksRead: 0, cacheHits: 6, failedOpen: {} });
      expect({ heads: counting.heads(), reads: counting.reads() }).toEqual({ heads: 1, reads: 6 });
    }
    // At the limit exactly, the block is loaded whole.
    const counting = countingStore();
    const g = gateway({ maxBlockBytes: size, cacheMaxBytes: 4 * size }, counting.store);
    expect((await g.filterChunkRefs(q)).stats).toMatchObject({ blocksRead: 1, cacheHits: 5 });
    expect(counting.reads()).toBe(1);
  });

  test("one damaged record in a cached block fails open for its series only", async () => {
    const series = await block(haystack(4, 3, 4));
    const loc = series[1]!.bloom as { key: string; offset: number; length: number };
    const path = join(dir, loc.key);
    const bytes = await readFile(path);
    bytes[loc.offset + loc.length - 7]! ^= 0x5a; // inside series 1's filter: its CRC fails
    await writeFile(path, bytes);
    const counting = countingStore();
    const g = gateway({}, counting.store);
    for (const [i, needle] of ["t-2-1-3", "t-1-0-0"].entries()) {
      const res = await g.filterChunkRefs(request(`{app="api"} | trace_id="${needle}"`, series));
      // Series 1 is kept untested; the three others are tested and mostly pruned.
      expect(res.stats.failedOpen).toEqual({ corrupt_bloom: 3 });
      expect(res.stats).toMatchObject({ blocksRead: i === 0 ? 1 : 0 });
      const kept = keptChunks(res);
      for (const c of series[1]!.chunks)
        expect(kept.has(`${series[1]!.fingerprint}/${c.from}`)).toBe(true);
      if (i === 0) {
        expect(kept.has(`${series[2]!.fingerprint}/${series[2]!.chunks[1]!.from}`)).toBe(true);
      }
      expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(9 - 2);
    }
    // The block was read once: the damage is remembered with it, not re-read.
    expect(counting.reads()).toBe(1);
    expect(g.cacheStats()).toMatchObject({ blockLoads: 1, recordReads: 0, entries: 1 });
  });

  test("a damaged index falls back to record reads, which still prune", async () => {
    const series = await block(haystack(4, 3, 4));
    const key = keyOf(series[0]!);
    const path = join(dir, key);
    const bytes = await readFile(path);
    const indexStart = Math.max(
      ...series.map((s) => {
        const b = s.bloom as { offset: number; length: number };
        return b.offset + b.length;
      }),
    );
    bytes[indexStart + 5]! ^= 0x01; // inside the index: its CRC fails
    await writeFile(path, bytes);
    const counting = countingStore();
    const g = gateway({}, counting.store);
    const res = await g.filterChunkRefs(request('{app="api"} | trace_id="t-3-2-1"', series));
    expect(res.stats.failedOpen).toEqual({});
    expect(keptChunks(res).has(`${series[3]!.fingerprint}/${series[3]!.chunks[2]!.from}`)).toBe(
      true,
    );
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(12 - 3);
    // One whole read that did not check out, then one read per record.
    expect(g.cacheStats()).toMatchObject({ blockLoads: 1, recordReads: 4, entries: 4 });
    expect(counting.reads()).toBe(5);
  });
});

// --- the no-false-negative property ------------------------------------------------------

const NAMES = ["trace_id", "user", "level"];
const VALUES = ["a", "b", "c", "dd"];
const metadata = fc.dictionary(fc.constantFrom(...NAMES), fc.constantFrom(...VALUES), {
  maxKeys: 3,
});
const seriesSpec = fc.record({
  labels: fc.oneof(
    fc.constant({ app: "api" }),
    fc.constant({ app: "api", user: "a" }),
    fc.constant({ app: "api", level: "b" }),
  ),
  chunks: fc.array(fc.array(metadata, { minLength: 1, maxLength: 6 }), {
    minLength: 1,
    maxLength: 5,
  }),
});
const leaf = fc.oneof(
  fc
    .tuple(fc.constantFrom(...NAMES, "app"), fc.constantFrom(...VALUES, "api"))
    .map(([n, v]) => `${n}="${v}"`),
  fc
    .tuple(
      fc.constantFrom(...NAMES),
      fc.constantFrom("!=", "=~", "!~"),
      fc.constantFrom("a", "a|b", ".+", "d.", ""),
    )
    .map(([n, op, v]) => `${n}${op}"${v}"`),
);
const filter: fc.Arbitrary<string> = fc.letrec<{ f: string }>((tie) => ({
  f: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc
      .tuple(tie("f"), fc.constantFrom(" and ", " or ", ", "), tie("f"))
      .map(([a, op, b]) => `(${a}${op}${b})`),
  ),
})).f;
/** Which tokens the blooms hold: names, pairs, chunk-prefixed ones. */
const tokenSettings = fc.record({
  metadataTokens: fc.record({ keys: fc.boolean(), values: fc.boolean() }),
  prefixed: fc.boolean(),
});

/** A block of `specs` (each its own stream) and the log query of `st`; none for a metric one. */
async function writtenQuery(
  specs: SeriesSpec[],
  st: string[],
  tokens: Pick<SeriesBloomOptions, "metadataTokens" | "prefixed">,
): Promise<
  { series: WrittenSeries[]; q: Extract<ReturnType<typeof parseExpr>, { kind: "log" }> } | undefined
> {
  // Distinct streams: the pod label makes each series its own.
  const unique = specs.map((s, i) => ({ ...s, labels: { ...s.labels, pod: `p${i}` } }));
  const series = await block(unique, undefined, tokens);
  const q = parseExpr(`{app="api"} ${st.join(" ")}`);
  return q.kind === "log" ? { series, q } : undefined;
}

const stages = fc.array(
  fc.oneof(
    filter.map((f) => `| ${f}`),
    filter.map((f) => `| ${f}`),
    fc.constantFrom("| logfmt", '|= "x"', "| drop user"),
  ),
  { minLength: 1, maxLength: 3 },
);

/** `n` series of `chunks` chunks of `lines` entries, each line naming its own order. */
function lineHaystack(n: number, chunks: number, lines: number): SeriesSpec[] {
  const orders = (s: number, c: number) =>
    Array.from({ length: lines }, (_, l) => `level=info msg="order ${s}-${c}-${l} shipped"`);
  return Array.from({ length: n }, (_, s) => ({
    labels: { app: "shop", pod: `pod-${s}` },
    chunks: Array.from({ length: chunks }, (_, c) =>
      Array.from({ length: lines }, (_, l) => ({ span_id: `s-${s}-${c}-${l}` })),
    ),
    lines: Array.from({ length: chunks }, (_, c) => orders(s, c)),
  }));
}

describe("line filters on n-gram blooms", () => {
  const specs = lineHaystack(10, 6, 30);
  const ngrams = { length: 4, skip: 0 };
  const needle = (series: WrittenSeries[], s: number, c: number) =>
    `${series[s]!.fingerprint}/${series[s]!.chunks[c]!.from}`;

  test("a literal in one chunk keeps that chunk and prunes nearly every other, all by line", async () => {
    const series = await block(specs, ngrams);
    const res = await gateway().filterChunkRefs(request('{app="shop"} |= "order 7-3-12 "', series));
    expect(keptChunks(res).has(needle(series, 7, 3))).toBe(true);
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(60 - 4);
    expect(res.stats.chunksPrunedByLine).toBe(res.stats.chunksPruned);
    const absent = await gateway().filterChunkRefs(
      request('{app="shop"} |= "order 99-9-9 "', series),
    );
    expect(absent.stats.chunksPruned).toBeGreaterThanOrEqual(60 - 3);
  });

  test("each record's own settings are used; a bloom without n-grams or a short literal keeps all", async () => {
    // Skip 1: the literal may sit at either parity of the line's n-grams.
    const skipped = await block(specs, {
      length: 3,
      skip: 1,
    });
    const res = await gateway().filterChunkRefs(
      request('{app="shop"} |= "der 4-5-29 sh"', skipped),
    );
    expect(keptChunks(res).has(needle(skipped, 4, 5))).toBe(true);
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(60 - 4);
    // Three code points: fewer than length + skip (4), so it cannot be tested.
    const short = await gateway().filterChunkRefs(request('{app="shop"} |= "4-5"', skipped));
    expect(short.stats.chunksPruned).toBe(0);
    const plain = await block(specs);
    const none = await gateway().filterChunkRefs(request('{app="shop"} |= "order 7-3-12 "', plain));
    expect(none.stats.chunksPruned).toBe(0);
  });

  test("line and metadata tests combine under and/or; what metadata alone prunes is not counted as line", async () => {
    const series = await block(specs, ngrams);
    const g = gateway();
    const both = await g.filterChunkRefs(
      request('{app="shop"} |= "order 7-3-12 " | span_id="s-7-3-12"', series),
    );
    expect(keptChunks(both).has(needle(series, 7, 3))).toBe(true);
    expect(both.stats.chunksPruned).toBeGreaterThanOrEqual(60 - 2);
    // The metadata test prunes these as well: none of them is the line filter's doing.
    expect(both.stats.chunksPrunedByLine).toBeLessThanOrEqual(2);
    const either = await g.filterChunkRefs(
      request('{app="shop"} |~ "order 7-3-12 |order 2-1-0 " | span_id=~".+"', series),
    );
    const kept = keptChunks(either);
    expect(kept.has(needle(series, 7, 3)) && kept.has(needle(series, 2, 1))).toBe(true);
    expect(either.stats.chunksPrunedByLine).toBe(either.stats.chunksPruned);
    expect(either.stats.chunksPruned).toBeGreaterThanOrEqual(60 - 6);
  });
});

describe("no false negatives", () => {
  test("every chunk holding an entry the query keeps is kept, whichever tokens the blooms hold", async () => {
    const g = gateway({ cacheMaxBytes: 1 << 20 });
    let pruned = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(seriesSpec, { minLength: 1, maxLength: 6 }),
        stages,
        tokenSettings,
        async (specs, st, tokens) => {
          const written = await writtenQuery(specs, st, tokens);
          if (written === undefined) return;
          const { series, q } = written;
          const pipeline = compilePipeline(q.pipeline);
          const line = "x user=z level=q";
          const must = matchingChunks(
            series,
            (sm, labels) =>
              pipeline.process({ timestamp: 1n, line, labels, structuredMetadata: sm }) !== null,
          );
          const res = await g.filterChunkRefs(request(extractBloomTests(q), series));
          const kept = keptChunks(res);
          for (const c of must) expect(kept.has(c), c).toBe(true);
          pruned += res.stats.chunksPruned;
        },
      ),
      { numRuns: 300 },
    );
    // The property is not vacuous: the queries did prune.
    expect(pruned).toBeGreaterThan(0);
  });
});

describe("no false negatives with line n-grams", () => {
  const char = fc.constantFrom("a", "b", "c", "é", "😀", " ", "-");
  const text = (max: number) => fc.array(char, { maxLength: max }).map((cs) => cs.join(""));
  const lineSeries = fc.record({
    labels: fc.constant({ app: "api" }),
    chunks: fc.array(fc.array(fc.tuple(metadata, text(24)), { minLength: 1, maxLength: 5 }), {
      minLength: 1,
      maxLength: 4,
    }),
  });
  const regexOf = (s: string) => s.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");

  test("every chunk holding a line the query keeps is kept, whatever the settings", async () => {
    const g = gateway({ cacheMaxBytes: 1 << 20 });
    let prunedByLine = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(lineSeries, { minLength: 1, maxLength: 4 }),
        fc.record({ length: fc.integer({ min: 3, max: 5 }), skip: fc.integer({ min: 0, max: 2 }) }),
        // Literals: cut from a line of the data (by index and span), or made up.
        fc.array(fc.oneof(fc.tuple(fc.nat(), fc.nat(), fc.nat(12)), text(8)), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.array(
          fc.constantFrom(
            "|= A",
            "|= A or B",
            '|~ "A|B"',
            "!= A",
            "| logfmt",
            '| line_format "x"',
            '| user="a"',
          ),
          {
            minLength: 1,
            maxLength: 3,
          },
        ),
        async (raw, ngrams, picks, shapes) => {
          const specs: SeriesSpec[] = raw.map((r, i) => ({
            labels: { ...r.labels, pod: `p${i}` },
            chunks: r.chunks.map((c) => c.map(([sm]) => sm)),
            lines: r.chunks.map((c) => c.map(([, line]) => line)),
          }));
          const all = specs.flatMap((s) => s.lines!.flat());
          const literals = picks.map((p) => {
            if (typeof p === "string") return p;
            const line = all[p[0] % all.length]!;
            const start = line.length === 0 ? 0 : p[1] % line.length;
            return line.slice(start, start + p[2]);
          });
          let k = 0;
          const next = () => literals[k++ % literals.length]!;
          const stages = shapes.map((shape) =>
            shape
              .replace('"A|B"', () => JSON.stringify(`${regexOf(next())}|${regexOf(next())}`))
              .replace("A", () => JSON.stringify(next()))
              .replace("B", () => JSON.stringify(next())),
          );
          let q;
          try {
            q = parseExpr(`{app="api"} ${stages.join(" ")}`);
          } catch {
            return; // a made-up literal the parser refuses (an empty regex alternative)
          }
          if (q.kind !== "log") return;
          const series = await block(specs, ngrams);
          const pipeline = compilePipeline(q.pipeline);
          const must = matchingChunks(
            series,
            (sm, labels, line) =>
              pipeline.process({ timestamp: 1n, line, labels, structuredMetadata: sm }) !== null,
          );
          const res = await g.filterChunkRefs(request(extractBloomTests(q), series));
          const kept = keptChunks(res);
          for (const c of must) expect(kept.has(c), `${c} for ${printExpr(q)}`).toBe(true);
          prunedByLine += res.stats.chunksPrunedByLine;
        },
      ),
      { numRuns: 400 },
    );
    // The property is not vacuous: line filters did prune.
    expect(prunedByLine).toBeGreaterThan(0);
  });
});

describe("BloomGateway.loadBlocks", () => {
  test("blocks loaded ahead answer the first request from memory, up to the bytes asked", async () => {
    const first = await block(haystack(6, 2, 20));
    const second = await block(haystack(6, 2, 20));
    const keys = [first, second].map((s) => (s[0]!.bloom as { key: string }).key);
    const g = gateway();
    // Room for one block: the first is loaded and fills it, the second is not read.
    expect(await g.loadBlocks(keys, 1)).toBe(1);
    expect(g.cacheStats()).toMatchObject({ blockLoads: 1 });
    const res = await g.filterChunkRefs(request('{app="api"} | trace_id="t-1-1-3"', first));
    expect(res.stats).toMatchObject({ blocksRead: 0, cacheHits: 6 });
    // A block that cannot be read is skipped; the others load.
    expect(await g.loadBlocks(["team-a/blooms/none", ...keys], 1 << 30)).toBe(2);
    expect(g.cacheStats()).toMatchObject({ blockLoads: 2 });
  });
});

describe("a series array sent again (its table)", () => {
  test("answers what finding each series' bloom answers: refs, stats and verdicts", async () => {
    let tabled = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(seriesSpec, { minLength: 1, maxLength: 6 }),
        stages,
        tokenSettings,
        fc.boolean(),
        async (specs, st, tokens, explain) => {
          const written = await writtenQuery(specs, st, tokens);
          if (written === undefined) return;
          const { series, q } = written;
          const req = { ...request(extractBloomTests(q), series), ...(explain && { explain }) };
          const g = gateway();
          await g.filterChunkRefs(req);
          const cut = vi.spyOn(g.cache, "cutHeld");
          // The second time, the blocks are held: each bloom is cut, and the table made.
          const found = await g.filterChunkRefs(req);
          const cuts = cut.mock.calls.length;
          const tabledAnswer = await g.filterChunkRefs(req);
          expect(tabledAnswer).toEqual(found);
          if (cut.mock.calls.length === cuts && req.test.kind !== "all") tabled++;
        },
      ),
      { numRuns: 300 },
    );
    // Not vacuous: the third request was answered from the table (no bloom cut again).
    expect(tabled).toBeGreaterThan(100);
  });

  test("a table is dropped when the cache evicts a block, and the blooms are found again", async () => {
    const sets = [];
    for (let i = 0; i < 6; i++) sets.push(await block(haystack(4, 2, 10, `app${i}`)));
    const [mine, ...others] = sets as [WrittenSeries[], ...WrittenSeries[][]];
    const ask = (series: readonly FilterSeries[], trace: string) =>
      request(`{app=~"app.*"} | trace_id="${trace}"`, series);
    const probe = gateway();
    await probe.filterChunkRefs(ask(mine, "x"));
    const one = probe.cacheStats().bytes;
    // Room for four blocks, each loaded whole.
    const g = gateway({ cacheMaxBytes: 4 * one + one / 2, maxBlockBytes: 2 * one });
    const req = ask(mine, "t-1-1-3");
    await g.filterChunkRefs(req);
    await g.filterChunkRefs(req);
    const cut = vi.spyOn(g.cache, "cutHeld");
    const tabled = await g.filterChunkRefs(req);
    expect(cut).not.toHaveBeenCalled();
    expect([...keptChunks(tabled)]).toHaveLength(1);
    for (const s of others) await g.filterChunkRefs(ask(s, "x"));
    expect(g.cacheStats().evictions).toBeGreaterThan(0);
    expect(g.cache.held(keyOf(mine[0]!))).toBeUndefined();
    const again = await g.filterChunkRefs(req);
    expect(again.stats).toMatchObject({ blocksRead: 1, failedOpen: {} });
    expect([...keptChunks(again)]).toEqual([...keptChunks(tabled)]);
    // Found through the block again, and a table made anew once it has been held twice.
    await g.filterChunkRefs(req);
    expect(cut).toHaveBeenCalled();
  });
});
