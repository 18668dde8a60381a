import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { decodeBloomRecord } from "@sieve/index";
import { FsObjectStore } from "@sieve/storage";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BloomCache } from "./cache.js";
import { writeBlock } from "./fixtures.test-helper.js";
import type { WrittenSeries } from "./fixtures.test-helper.js";

let dir: string;
let store: FsObjectStore;
/** Blocks of 1 to 12 series, with the bytes of each. */
const blocks: { series: WrittenSeries[]; size: number; bytes: Uint8Array }[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-gateway-cache-"));
  store = new FsObjectStore(dir);
  for (let b = 0; b < 6; b++) {
    const key = `t/blooms/block-${b}`;
    const series = await writeBlock(
      store,
      key,
      Array.from({ length: 1 + b * 2 }, (_, s) => ({
        labels: { app: "api", pod: `b${b}-p${s}` },
        chunks: Array.from({ length: 2 }, (_, c) =>
          Array.from({ length: 5 + 10 * s }, (_, l) => ({ trace_id: `${b}-${s}-${c}-${l}` })),
        ),
      })),
    );
    const bytes = await store.get(key);
    blocks.push({ series, size: bytes.length, bytes });
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("BloomCache", () => {
  test("any sequence of lookups: the budget holds, answers are the records' blooms, counts add up", async () => {
    const largest = Math.max(...blocks.map((b) => b.size));
    await fc.assert(
      fc.asyncProperty(
        // Budgets from below one block's quarter-rule (record path) to room for everything.
        fc.integer({ min: 2_000, max: 16 * largest }),
        fc.array(fc.tuple(fc.nat(5), fc.nat(11)), { minLength: 1, maxLength: 60 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 60 }),
        async (budget, lookups, together) => {
          const cache = new BloomCache(store, { maxBytes: budget, maxBlockBytes: 64 << 20 });
          let calls = 0;
          // Runs of lookups started together (concurrently) or one after another.
          let batch: Promise<void>[] = [];
          for (const [i, [b, s]] of lookups.entries()) {
            const block = blocks[b]!;
            const series = block.series[s % block.series.length]!;
            const loc = series.bloom as { key: string; offset: number; length: number };
            calls++;
            batch.push(
              cache.get(loc, series.fingerprint).then(({ bloom }) => {
                const expected = decodeBloomRecord(
                  block.bytes.subarray(loc.offset, loc.offset + loc.length),
                  series.fingerprint,
                );
                expect(bloom).toEqual(expected);
              }),
            );
            if (!together[i % together.length]!) {
              await Promise.all(batch);
              batch = [];
              expect(cache.stats().bytes).toBeLessThanOrEqual(budget);
            }
          }
          await Promise.all(batch);
          const stats = cache.stats();
          expect(stats.bytes).toBeLessThanOrEqual(budget);
          expect(stats.hits + stats.misses + stats.inflight).toBe(calls);
          // Every read from the store was a block or a record some lookup missed.
          expect(stats.blockLoads + stats.recordReads).toBeLessThanOrEqual(stats.misses);
        },
      ),
      { numRuns: 60 },
    );
  });

  test("load reads a block ahead once and decodes it; its series are then answered from memory", async () => {
    const cache = new BloomCache(store, { maxBytes: 64 << 20, maxBlockBytes: 64 << 20 });
    const block = blocks[3]!;
    const key = (block.series[0]!.bloom as { key: string }).key;
    expect(cache.heldBytes(key)).toBe(0);
    expect(await cache.load(key)).toBe(true);
    expect(await cache.load(key)).toBe(true); // held: not read again
    expect(cache.stats().blockLoads).toBe(1);
    // Its filters, every one decoded at load: the gets below decode nothing more.
    const held = cache.heldBytes(key);
    expect(held).toBeGreaterThan(0);
    for (const series of block.series) {
      const loc = series.bloom as { key: string; offset: number; length: number };
      const got = await cache.get(loc, series.fingerprint);
      expect(got.source).toBe("hit");
    }
    expect(cache.heldBytes(key)).toBe(held);
    expect(cache.stats()).toMatchObject({ blockLoads: 1, misses: 0, hits: block.series.length });
    // A block past the size bound is read record by record: nothing to load ahead.
    const small = new BloomCache(store, { maxBytes: 64 << 20, maxBlockBytes: 100 });
    expect(await small.load(key)).toBe(false);
    expect(small.heldBytes(key)).toBe(0);
    // A missing block is the caller's to skip.
    await expect(cache.load("t/blooms/none")).rejects.toThrow();
  });
});
