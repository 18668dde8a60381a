import { mkdtemp, rm, writeFile, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { FsObjectStore } from "@sieve/storage";
import type { BloomBlockStore } from "@sieve/index";
import { compilePipeline, extractBloomTests, parseExpr } from "@sieve/logql";
import type { BloomTest } from "@sieve/logql";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import type { BloomGatewayConfig } from "./config.js";
import { keptChunks, matchingChunks, writeBlock } from "./fixtures.test-helper.js";
import type { SeriesSpec, WrittenSeries } from "./fixtures.test-helper.js";
import { BloomGateway } from "./gateway.js";
import type { FilterRequest, FilterSeries } from "./gateway.js";

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
async function block(specs: SeriesSpec[]): Promise<WrittenSeries[]> {
  return writeBlock(store, `team-a/blooms/block-${++blockCount}`, specs);
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
    expect(res.stats).toMatchObject({ series: 20, chunks: 160, blocksRead: 20, cacheHits: 0 });
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
  });

  test("a test that cannot prune reads nothing and keeps everything", async () => {
    const series = await block(haystack(3, 4, 5));
    const res = await gateway().filterChunkRefs(request('{app="api"} | trace_id!="x"', series));
    expect(res.stats).toEqual({
      series: 3,
      seriesSkipped: 0,
      chunks: 12,
      chunksPruned: 0,
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

  test("a read slower than the timeout", async () => {
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
    const g = gateway({ readTimeoutMs: 30 }, slow);
    await expectFailOpen(series, "timeout", g);
    release();
    // The read went on and filled the cache: the next request tests with the blooms.
    await expect.poll(() => g.cacheStats().entries, { interval: 5 }).toBe(2);
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

describe("cache", () => {
  test("concurrent requests for the same blooms read each record once", async () => {
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
    const g = gateway({}, gated);
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

  test("the byte budget evicts the least recently used blooms", async () => {
    const series = await block(haystack(30, 2, 20));
    const first = gateway();
    await first.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    const all = first.cacheStats().bytes;
    const budget = Math.floor(all / 3);
    const g = gateway({ cacheMaxBytes: budget });
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
const stages = fc.array(
  fc.oneof(
    filter.map((f) => `| ${f}`),
    filter.map((f) => `| ${f}`),
    fc.constantFrom("| logfmt", '|= "x"', "| drop user"),
  ),
  { minLength: 1, maxLength: 3 },
);

describe("no false negatives", () => {
  test("every chunk holding an entry the query keeps is kept", async () => {
    const g = gateway({ cacheMaxBytes: 1 << 20 });
    let pruned = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(seriesSpec, { minLength: 1, maxLength: 6 }),
        stages,
        async (specs, st) => {
          // Distinct streams: the pod label makes each series its own.
          const unique = specs.map((s, i) => ({ ...s, labels: { ...s.labels, pod: `p${i}` } }));
          const series = await block(unique);
          const q = parseExpr(`{app="api"} ${st.join(" ")}`);
          if (q.kind !== "log") return;
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
