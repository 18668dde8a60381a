import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BloomFilter, hashesForBitsPerKey, optimalBits, popcount } from "./classic.js";
import { BloomError } from "./errors.js";
import { rate, traceIds } from "./testkeys.test-helper.js";

describe("BloomFilter sizing", () => {
  it.each([
    // LevelDB: k = bits·ln2 truncated, clamped to 1..30.
    [1, 1],
    [2, 1],
    [10, 6],
    [9.585, 6],
    [16, 11],
    [100, 30],
  ])("uses %d bits per key with k = %d, as LevelDB", (bitsPerKey, k) => {
    expect(hashesForBitsPerKey(bitsPerKey)).toBe(k);
    const filter = BloomFilter.withBitsPerKey(1000, bitsPerKey);
    expect(filter.hashes).toBe(k);
    expect(filter.bits).toBeGreaterThanOrEqual(Math.max(64, 1000 * bitsPerKey));
  });

  it("takes at most 9.6 bits a key at 1%", () => {
    for (const items of [1000, 100_000, 1_000_000]) {
      const filter = BloomFilter.forCapacity(items, 0.01);
      expect(filter.bits / items).toBeLessThanOrEqual(9.6);
      expect(filter.hashes).toBe(7);
      expect(optimalBits(items, 0.01)).toBe(filter.bits);
    }
  });

  it.each([
    [{ bits: 0, hashes: 3 }],
    [{ bits: 2 ** 32, hashes: 3 }],
    [{ bits: 100, hashes: 0 }],
    [{ bits: 100, hashes: 31 }],
    [{ bits: 1.5, hashes: 3 }],
  ])("refuses the shape %j", (shape) => {
    expect(() => new BloomFilter(shape)).toThrow(BloomError);
  });

  it.each([
    [0, 0.01],
    [100, 0],
    [100, 1],
    [Number.NaN, 0.01],
  ])("refuses capacity %d at rate %d", (items, fp) => {
    expect(() => BloomFilter.forCapacity(items, fp)).toThrow(/invalid filter parameters/);
  });
});

describe("BloomFilter", () => {
  it("never answers absent for an added key", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.uint8Array({ maxLength: 40 })), { maxLength: 300 }),
        fc.integer({ min: 64, max: 5000 }),
        fc.integer({ min: 1, max: 30 }),
        (keys, bits, hashes) => {
          const filter = new BloomFilter({ bits, hashes });
          filter.addMany(keys);
          for (const key of keys) expect(filter.test(key)).toBe(true);
          expect([...filter.testMany(keys)].every((bit) => bit === 1)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it.each([100_000, 1_000_000])(
    "has a false-positive rate within 15%% of 1%% at its capacity of %d keys",
    (items) => {
      const filter = BloomFilter.forCapacity(items, 0.01);
      const keys = traceIds(items, 1);
      filter.addMany(keys);
      expect(rate(keys, (k) => filter.test(k))).toBe(1);
      const measured = rate(traceIds(items, 2), (k) => filter.test(k));
      expect(Math.abs(measured - 0.01) / 0.01).toBeLessThan(0.15);
    },
  );

  it("answers testAndAdd with whether the key was there", () => {
    const filter = BloomFilter.forCapacity(1000, 0.001);
    expect(filter.testAndAdd("a")).toBe(false);
    expect(filter.testAndAdd("a")).toBe(true);
    expect(filter.test("a")).toBe(true);
    expect(filter.testAndAdd(new TextEncoder().encode("a"))).toBe(true);
  });

  it("estimates its fill ratio and key count", () => {
    const filter = BloomFilter.forCapacity(10_000, 0.01);
    expect(filter.fillRatio()).toBe(0);
    expect(filter.estimatedCount()).toBe(0);
    filter.addMany(traceIds(10_000, 3));
    expect(filter.fillRatio()).toBeCloseTo(0.5, 1);
    expect(Math.abs(filter.estimatedCount() - 10_000)).toBeLessThan(300);
    filter.clear();
    expect(filter.test(traceIds(1, 3)[0]!)).toBe(false);
  });

  it("counts bits like a naive popcount", () => {
    fc.assert(
      fc.property(fc.uint32Array({ maxLength: 64 }), (words) => {
        let naive = 0;
        for (const w of words) for (let b = 0; b < 32; b++) naive += (w >>> b) & 1;
        expect(popcount(words)).toBe(naive);
      }),
    );
  });
});
