import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BATCH, eachBatch, fastHashing, hashBatch, hashKey, lastHash, xxhash64 } from "./hash.js";

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const hashOf = (key: string | Uint8Array): bigint => {
  hashKey(key);
  return (BigInt(lastHash[1]!) << 32n) | BigInt(lastHash[0]!);
};

// Expected values from the reference C implementation: python-xxhash 4.1.0, which bundles
// libxxhash 0.8.4 (github.com/Cyan4973/xxHash), via `xxhash.xxh64(data, seed).hexdigest()`.
// The first three are also xxHash's published sanity values.
const KNOWN: [string, Uint8Array, bigint, string][] = [
  ["empty", bytes(""), 0n, "ef46db3751d8e999"],
  ["a", bytes("a"), 0n, "d24ec4f1a98c6e5b"],
  ["abc", bytes("abc"), 0n, "44bc2cf5ad770999"],
  [
    "a trace id (one 32-byte stripe)",
    bytes("4bf92f3577b34da6a3ce929d0e0e4736"),
    0n,
    "2ab28d25664b8cfd",
  ],
  ["bytes 0..199", Uint8Array.from({ length: 200 }, (_, i) => i), 0n, "50dc1079b99e879c"],
  ["UTF-8 text", bytes("trace_id=é✓"), 0n, "69fb16848fefaf88"],
  ["abc, seed 12345", bytes("abc"), 12345n, "01700e64f6f23509"],
];

describe("xxhash64", () => {
  it.each(KNOWN)("matches the reference for %s", (_name, input, seed, hex) => {
    expect(xxhash64(input, seed).toString(16).padStart(16, "0")).toBe(hex);
    if (seed === 0n) {
      expect(hashOf(input).toString(16).padStart(16, "0")).toBe(hex);
      const text = new TextDecoder().decode(input);
      if (bytes(text).length === input.length) {
        expect(hashOf(text).toString(16).padStart(16, "0")).toBe(hex);
      }
    }
  });

  it("uses the direct wasm path on this xxhash-wasm version", () => {
    expect(fastHashing).toBe(true);
  });

  it("hashes a string as its UTF-8 bytes, on the fast path and off it", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => {
        expect(hashOf(text)).toBe(xxhash64(text));
        expect(hashOf(bytes(text))).toBe(xxhash64(text));
      }),
      { numRuns: 2000 },
    );
  });

  it("grows its buffer for keys larger than wasm memory", () => {
    const large = "x".repeat(300_000) + "é";
    expect(hashOf(large)).toBe(xxhash64(large));
    const raw = Uint8Array.from({ length: 200_000 }, (_, i) => i & 0xff);
    expect(hashOf(raw)).toBe(xxhash64(raw));
    expect(hashOf("abc").toString(16)).toBe("44bc2cf5ad770999");
  });
});

describe("hashBatch", () => {
  const key = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.uint8Array({ maxLength: 40 }),
  );

  it("gives every key the hash a single call gives it", () => {
    fc.assert(
      fc.property(fc.array(key, { minLength: 1, maxLength: BATCH }), (keys) => {
        const hashes = hashBatch(keys, 0, keys.length).slice();
        keys.forEach((k, i) => {
          hashKey(k);
          expect([hashes[2 * i], hashes[2 * i + 1]]).toEqual([lastHash[0], lastHash[1]]);
        });
      }),
      { numRuns: 300 },
    );
  });

  it("visits every key of a long array once, in batches, growing memory for large keys", () => {
    const keys = Array.from({ length: 3 * BATCH + 7 }, (_, i) =>
      i === 600 ? "y".repeat(500_000) : `key-${i}`,
    );
    const seen: bigint[] = [];
    eachBatch(keys, (hashes, from, count) => {
      expect(from).toBe(seen.length);
      for (let i = 0; i < count; i++) {
        seen.push((BigInt(hashes[2 * i + 1]!) << 32n) | BigInt(hashes[2 * i]!));
      }
    });
    expect(seen).toEqual(keys.map((k) => xxhash64(k)));
  });
});
