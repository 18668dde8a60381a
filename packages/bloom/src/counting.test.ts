import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CountingBloomFilter, SATURATED } from "./counting.js";
import { rate, traceIds } from "./testkeys.test-helper.js";

describe("CountingBloomFilter", () => {
  it("never answers absent for a key added and not removed", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string(), { maxLength: 400 }),
        fc.uniqueArray(fc.string(), { maxLength: 400 }),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 12 }),
        (kept, removed, counterPairs, hashes) => {
          const keep = kept.filter((k) => !removed.includes(k));
          const filter = new CountingBloomFilter({ counters: counterPairs * 2, hashes });
          for (const key of [...keep, ...removed]) filter.add(key);
          for (const key of removed) expect(filter.remove(key)).toBe(true);
          // Small filters saturate counters often: this is the case the saturation rule is for.
          for (const key of keep) expect(filter.test(key)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("forgets a removed key when nothing else shares its counters", () => {
    const filter = CountingBloomFilter.forCapacity(1000, 0.01);
    filter.add("a");
    filter.add("a");
    expect(filter.remove("a")).toBe(true);
    expect(filter.test("a")).toBe(true);
    expect(filter.remove("a")).toBe(true);
    expect(filter.test("a")).toBe(false);
    expect(filter.remove("a")).toBe(false);
    expect(filter.nibbles.every((b) => b === 0)).toBe(true);
  });

  it("saturates at 15 and never decrements a saturated counter", () => {
    const filter = new CountingBloomFilter({ counters: 2, hashes: 1 });
    for (let i = 0; i < 40; i++) filter.add("x");
    const index = filter.counterAt(0) === SATURATED ? 0 : 1;
    expect(filter.counterAt(index)).toBe(SATURATED);
    for (let i = 0; i < 40; i++) expect(filter.remove("x")).toBe(true);
    expect(filter.counterAt(index)).toBe(SATURATED);
    expect(filter.test("x")).toBe(true);
  });

  it("keeps its false-positive rate near target at capacity, with 4 bits a counter", () => {
    const filter = CountingBloomFilter.forCapacity(100_000, 0.01);
    const keys = traceIds(100_000, 31);
    for (const key of keys) filter.add(key);
    const measured = rate(traceIds(100_000, 32), (k) => filter.test(k));
    expect(Math.abs(measured - 0.01) / 0.01).toBeLessThan(0.15);
    expect(filter.byteLength * 8).toBe(filter.counters * 4);
  });
});
