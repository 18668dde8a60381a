import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { popcount } from "./classic.js";
import { PartitionedBloomFilter } from "./partitioned.js";
import { rate, traceIds } from "./testkeys.test-helper.js";

describe("PartitionedBloomFilter", () => {
  it("never answers absent for an added key, and sets one bit per slice", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string(), { maxLength: 300 }),
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 30 }),
        (keys, sliceWords, hashes) => {
          const filter = new PartitionedBloomFilter({ hashes, sliceBits: sliceWords * 32 });
          filter.addMany(keys);
          for (const key of keys) expect(filter.test(key)).toBe(true);
          const one = new PartitionedBloomFilter({ hashes, sliceBits: sliceWords * 32 });
          one.add(keys[0] ?? "");
          for (let i = 0; i < hashes; i++) {
            expect(popcount(one.words.subarray(i * sliceWords, (i + 1) * sliceWords))).toBe(1);
          }
          expect(filter.fillRatio()).toBe(popcount(filter.words) / filter.bits);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("uses k = ceil(log2(1/fp)) slices and at most 9.6 bits a key at 1%", () => {
    const filter = PartitionedBloomFilter.forCapacity(1_000_000, 0.01);
    expect(filter.hashes).toBe(7);
    expect(filter.bits / 1_000_000).toBeLessThanOrEqual(9.6);
    // 0.9^k ≤ 0.01 needs k = 44 slices: refused rather than clamped to a filter that misses its rate.
    expect(PartitionedBloomFilter.forCapacity(1000, 0.01, 0.7).hashes).toBe(13);
    expect(() => PartitionedBloomFilter.forCapacity(1000, 0.01, 0.9)).toThrow(/needs 44 slices/);
  });

  it.each([100_000, 1_000_000])(
    "has a false-positive rate within 15%% of 1%% at its capacity of %d keys",
    (items) => {
      const filter = PartitionedBloomFilter.forCapacity(items, 0.01);
      const keys = traceIds(items, 11);
      filter.addMany(keys);
      expect(rate(keys, (k) => filter.test(k))).toBe(1);
      const measured = rate(traceIds(items, 12), (k) => filter.test(k));
      expect(Math.abs(measured - 0.01) / 0.01).toBeLessThan(0.15);
      expect(Math.abs(filter.estimatedFalsePositiveRate() - 0.01) / 0.01).toBeLessThan(0.15);
      expect(Math.abs(filter.estimatedCount() - items) / items).toBeLessThan(0.02);
    },
  );

  it("answers testAndAdd with whether the key was there", () => {
    const filter = PartitionedBloomFilter.forCapacity(100, 0.01);
    expect(filter.testAndAdd("k")).toBe(false);
    expect(filter.testAndAdd("k")).toBe(true);
    const before = filter.fillRatio();
    filter.add("k");
    expect(filter.fillRatio()).toBe(before);
  });
});
