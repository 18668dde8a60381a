import fc from "fast-check";
import { crc32c } from "@sieve/kit";
import { describe, expect, it } from "vitest";
import { BloomError } from "./errors.js";
import { deserializeFilter, serializeFilter } from "./format.js";
import { PartitionedBloomFilter } from "./partitioned.js";
import { hashKey, lastHash } from "./hash.js";
import { RIBBON_WIDTH, RibbonFilter } from "./ribbon.js";
import { rate, traceIds } from "./testkeys.test-helper.js";

describe("RibbonFilter", () => {
  it("never answers absent for a key it was built from, and survives its format", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.uint8Array({ maxLength: 40 })), { maxLength: 400 }),
        fc.constantFrom(0.5, 0.1, 0.01, 0.001, 0.00002),
        (keys, fp) => {
          const filter = RibbonFilter.fromKeys(keys, fp);
          for (const key of keys) expect(filter.test(key)).toBe(true);
          const copy = deserializeFilter(serializeFilter(filter));
          expect(copy).toBeInstanceOf(RibbonFilter);
          const ribbon = copy as RibbonFilter;
          expect([ribbon.slots, ribbon.bits, ribbon.seed]).toEqual([
            filter.slots,
            filter.bits,
            filter.seed,
          ]);
          expect(ribbon.values).toEqual(filter.values);
          for (const key of keys) expect(copy.test(key)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("takes r = ceil(log2(1/fp)) bits a slot", () => {
    expect([0.5, 0.26, 0.25, 0.01, 0.001, 2 ** -16].map((fp) => RibbonFilter.bitsFor(fp))).toEqual([
      1, 2, 2, 7, 10, 16,
    ]);
    expect(() => RibbonFilter.bitsFor(2 ** -17)).toThrow(BloomError);
    expect(() => RibbonFilter.bitsFor(0)).toThrow(/rate 0/);
    expect(() => RibbonFilter.bitsFor(1)).toThrow(/rate 1/);
  });

  it.each([
    [1_000, 0.01],
    [20_000, 0.01],
    [20_000, 0.001],
    [200_000, 0.01],
  ])("with %d keys at fp %d: passes about 2^-r of absent keys in ~1.1·r bits a key", (n, fp) => {
    const keys = traceIds(n, 21);
    const filter = RibbonFilter.fromKeys(keys, fp);
    expect(rate(keys, (k) => filter.test(k))).toBe(1);
    const expected = 2 ** -filter.bits;
    const probes = traceIds(200_000, 22);
    const measured = rate(probes, (k) => filter.test(k));
    // 200,000 probes: the standard deviation is under 2% of 2^-7 and 7% of 2^-10.
    expect(Math.abs(measured - expected) / expected).toBeLessThan(0.25);
    const bitsPerKey = (8 * filter.byteLength) / n;
    expect(bitsPerKey).toBeLessThan(1.15 * filter.bits);
    expect(filter.byteLength).toBeLessThanOrEqual(RibbonFilter.bytesFor(n, fp) * 1.1);
    // A Bloom filter with the same rate takes 1.44·r bits a key.
    expect(filter.byteLength).toBeLessThan(
      0.85 * PartitionedBloomFilter.forCapacity(n, fp).byteLength,
    );
  });

  it("builds from any number of keys, equal ones included, down to none", () => {
    for (const n of [0, 1, 2, 63, 64, 65, 1000]) {
      const keys = traceIds(n, 5);
      const filter = RibbonFilter.fromKeys([...keys, ...keys.slice(0, 10)], 0.01);
      expect(filter.slots).toBeGreaterThanOrEqual(Math.max(RIBBON_WIDTH, n));
      for (const key of keys) expect(filter.test(key)).toBe(true);
    }
    // Nothing added: an absent key passes at about 2^-r, as for any other filter.
    const empty = RibbonFilter.fromKeys([], 0.01);
    expect(rate(traceIds(50_000, 6), (k) => empty.test(k))).toBeLessThan(0.02);
  });

  it("refuses a shape it cannot hold", () => {
    const values = new Uint8Array(56); // 64 slots of 7 bits
    expect(() => new RibbonFilter({ slots: 56, bits: 7, seed: 0 }, new Uint8Array(49))).toThrow(
      /slots 56/,
    );
    expect(() => new RibbonFilter({ slots: 65, bits: 7, seed: 0 }, values)).toThrow(/× 8/);
    expect(() => new RibbonFilter({ slots: 64, bits: 17, seed: 0 }, values)).toThrow(/bits 17/);
    expect(() => new RibbonFilter({ slots: 64, bits: 7, seed: -1 }, values)).toThrow(/seed -1/);
    expect(() => new RibbonFilter({ slots: 72, bits: 7, seed: 0 }, values)).toThrow(/56 bytes/);
  });

  it("holds each slot's value where the format puts it, and every key's equation", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.array(fc.string(), { maxLength: 100 }),
        (bits, keys) => {
          const filter = RibbonFilter.fromKeys(keys, 2 ** -bits);
          const { slots, seed } = filter;
          expect(slots % 8).toBe(0);
          expect(filter.values.length).toBe((slots / 8) * bits);
          // Slot i's value, read as docs/formats.md lays it out: bit j in column j.
          const slot = (i: number): number => {
            let v = 0;
            for (let j = 0; j < bits; j++) {
              v |= ((filter.values[j * (slots / 8) + (i >> 3)]! >> (i & 7)) & 1) << j;
            }
            return v;
          };
          // Each key's equation, computed from the format's hash derivation alone.
          for (const key of keys) {
            hashKey(key);
            const a = lastHash[0]!;
            const b = lastHash[1]!;
            const start = Math.floor((mix(a ^ seed) * (slots - 63)) / 2 ** 32);
            const low = mix(b ^ Math.imul(seed, 0x9e3779b9)) | 1;
            const high = mix(b ^ a ^ 0x7f4a7c15 ^ seed);
            let acc = 0;
            for (let j = 0; j < 64; j++) {
              const set = j < 32 ? (low >>> j) & 1 : (high >>> (j - 32)) & 1;
              if (set) acc ^= slot(start + j);
            }
            expect(acc).toBe(mix((a + Math.imul(b, 0x27d4eb2f) + seed) | 0) & (2 ** bits - 1));
          }
          const copy = new RibbonFilter(filter, Uint8Array.from(filter.values));
          for (const key of keys) expect(copy.test(key)).toBe(true);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("refuses damaged bytes with a BloomError", () => {
    const bytes = serializeFilter(RibbonFilter.fromKeys(traceIds(100, 1), 0.01));
    // Fingerprint bits 0 (offset 12), with the checksum made to match: refused, not a crash.
    const zeroBits = withChecksum(bytes, (b) => (b[12] = 0));
    expect(() => deserializeFilter(zeroBits)).toThrow(/inconsistent/);
    // Slots claiming more values than the bytes hold: truncated, before allocating.
    const huge = withChecksum(bytes, (b) => {
      new DataView(b.buffer).setUint32(8, 2 ** 28, true);
    });
    expect(() => deserializeFilter(huge)).toThrow(/truncated/);
    // Slots that are not a multiple of 8 (the length then checks out for 7-bit values).
    const odd = withChecksum(bytes, (b) => {
      new DataView(b.buffer).setUint32(8, new DataView(b.buffer).getUint32(8, true) - 1, true);
    });
    expect(() => deserializeFilter(odd)).toThrow(/inconsistent|truncated/);
    const flipped = bytes.slice();
    flipped[30] = flipped[30]! ^ 1;
    expect(() => deserializeFilter(flipped)).toThrow(/checksum/);
  });
});

/** A copy of a serialised filter changed by `change`, its CRC-32C recomputed. */
function withChecksum(bytes: Uint8Array, change: (b: Uint8Array) => void): Uint8Array {
  const out = bytes.slice();
  change(out);
  const body = out.subarray(0, out.length - 4);
  new DataView(out.buffer).setUint32(out.length - 4, crc32c(body), true);
  return out;
}

/** murmur3's 32-bit finaliser, as docs/formats.md gives it for ribbon filters. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
