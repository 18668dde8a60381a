import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ChunkBuilder } from "./builder.js";
import { ByteWriter } from "./bytes.js";
import { ChunkError } from "./errors.js";
import { FILTER_FP_BITS, SymbolFilter, symbolHash, writeSymbolFilter } from "./filter.js";
import { ChunkReader } from "./reader.js";

function filterOf(symbols: readonly string[]): { filter: SymbolFilter; bytes: Uint8Array } {
  const w = new ByteWriter();
  writeSymbolFilter(
    w,
    Uint32Array.from(symbols, (s) => symbolHash(Buffer.from(s, "utf8"))),
  );
  const bytes = w.toBytes();
  return { filter: new SymbolFilter(bytes), bytes };
}

/** `n` distinct hex ids, as the peers bench's span ids, from `seed`. */
function ids(n: number, seed: number): string[] {
  return Array.from({ length: n }, (_, i) =>
    (Math.imul(i + 1, 0x9e3779b1) ^ seed).toString(16).padStart(8, "0").repeat(2),
  );
}

/** The last bytes of `chunk` that `ChunkReader.filterLength` asks for, as a store reads them. */
function filterTail(chunk: Uint8Array): Uint8Array {
  const size = chunk.byteLength;
  let tail = chunk.subarray(size - 8);
  for (let need = ChunkReader.filterLength(tail, size); need > tail.byteLength;) {
    tail = chunk.subarray(size - need);
    need = ChunkReader.filterLength(tail, size);
  }
  return tail;
}

describe("symbol filter", () => {
  test("holds every symbol it was built from, whatever the symbols", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "binary", maxLength: 40 }), { maxLength: 600 }),
        (symbols) => {
          const { filter } = filterOf(symbols);
          for (const s of symbols) expect(filter.mayHold(s), JSON.stringify(s)).toBe(true);
          expect(filter.count).toBeLessThanOrEqual(new Set(symbols).size);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("an empty filter holds nothing", () => {
    const { filter } = filterOf([]);
    expect(filter.count).toBe(0);
    expect(filter.mayHold("")).toBe(false);
    expect(filter.mayHold("trace_id")).toBe(false);
  });

  test("answers an absent symbol at most 2^-FILTER_FP_BITS of the time, in ~1 byte a symbol", () => {
    for (const n of [1, 40, 1_000, 5_300, 70_000]) {
      const present = ids(n, 0x1234);
      const { filter, bytes } = filterOf(present);
      const held = new Set(present);
      const absent = ids(20_000, 0x7777_0000).filter((s) => !held.has(s));
      const rate = absent.filter((s) => filter.mayHold(s)).length / absent.length;
      // At most 2^-5 = 3.1% by construction, plus the sample's noise.
      expect(rate, `n = ${n}`).toBeLessThan(2 ** -FILTER_FP_BITS * 1.3);
      if (n >= 1_000) {
        expect(bytes.byteLength / n, `n = ${n}`).toBeLessThan(1.15);
        expect(rate, `n = ${n}`).toBeGreaterThan(0); // a filter, not the set itself
      }
    }
  });

  test("a chunk's filter, read from its last bytes alone, holds each of its symbols", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 })), {
          minLength: 1,
          maxLength: 60,
        }),
        fc.array(fc.string({ maxLength: 12 }), { maxLength: 20 }),
        (pairs, probes) => {
          const builder = new ChunkBuilder({ blockTargetBytes: 256 });
          pairs.forEach(([name, value], i) =>
            builder.append({
              timestamp: BigInt(i),
              line: `line ${i}`,
              structuredMetadata: [{ name: `k${name}`, value }],
            }),
          );
          const chunk = builder.encode().bytes;
          const tail = filterTail(chunk);
          const filter = ChunkReader.symbolFilter(tail, chunk.byteLength)!;
          const reader = new ChunkReader(chunk);
          for (const s of [...pairs.flatMap(([n, v]) => [`k${n}`, v]), ...probes]) {
            // Never "no" for a symbol the chunk holds; the reader's exact answer agrees.
            if (reader.symbolIds(s).length > 0) expect(filter.mayHold(s)).toBe(true);
            if (!filter.mayHold(s)) expect(reader.symbolIds(s)).toEqual([]);
          }
          expect(tail.byteLength).toBeLessThan(ChunkReader.tailLength(chunk, chunk.byteLength));
        },
      ),
      { numRuns: 200 },
    );
  });

  test("a chunk's filter whose bytes changed is refused by its checksum", () => {
    const builder = new ChunkBuilder();
    ids(500, 9).forEach((v, i) =>
      builder.append({
        timestamp: BigInt(i),
        line: "x",
        structuredMetadata: [{ name: "span_id", value: v }],
      }),
    );
    const chunk = builder.encode().bytes;
    const tail = Uint8Array.from(filterTail(chunk));
    // The filter section starts the tail; its first bytes are the header, the rest the codes.
    for (const at of [0, 3, 40, 300]) {
      const copy = Uint8Array.from(tail);
      copy[at]! ^= 0x10;
      expect(() => ChunkReader.symbolFilter(copy, chunk.byteLength), `byte ${at}`).toThrow(
        expect.objectContaining({ code: "bad_checksum" }) as Error,
      );
    }
    expect(() => ChunkReader.symbolFilter(tail.subarray(1), chunk.byteLength)).toThrow(ChunkError);
    expect(() => ChunkReader.symbolFilter(tail.subarray(0, 4), chunk.byteLength)).toThrow(
      ChunkError,
    );
  });

  test.each([
    ["no fingerprint bits", [0, 0, 0, 0, 0]],
    ["33 fingerprint bits", [33, 0, 0, 0, 0]],
    ["a Rice parameter above the bits", [8, 9, 0, 0, 0]],
    ["more bucket bits than fingerprint bits", [4, 1, 5, 0, 0]],
    ["a count above the fingerprints' range", [2, 0, 0, 5, 0]],
    ["stream bits beyond the section", [8, 3, 0, 1, 64, 0, 0, 0, 0]],
    ["bucket offsets missing", [8, 3, 2, 1, 0, 0, 0, 0, 0]],
    ["a trailing byte", [8, 3, 0, 0, 0, 0, 0, 0, 0, 7]],
    ["a header cut short", [8, 3]],
  ])("a section with %s is refused as corrupt", (_, bytes) => {
    expect(() => new SymbolFilter(Uint8Array.from(bytes))).toThrow(
      expect.objectContaining({ code: "corrupt" }) as Error,
    );
  });

  test("bucket starts out of order fail open in a lookup, and its check says corrupt", () => {
    // One bucket starting at bit 9 of an 8-bit stream: every lookup lands there.
    const past = new SymbolFilter(Uint8Array.from([8, 3, 0, 1, 8, 9, 0, 0, 0, 0xff]));
    for (const s of ["a", "b", "trace_id", "span_id", "x".repeat(30)]) {
      expect(past.mayHold(s), s).toBe(true);
    }
    // Two buckets, the second starting before the first.
    const before = new SymbolFilter(
      Uint8Array.from([8, 3, 1, 2, 16, 4, 0, 0, 0, 2, 0, 0, 0, 0, 0]),
    );
    for (const filter of [past, before]) {
      expect(() => {
        filter.check();
      }).toThrow(expect.objectContaining({ code: "corrupt" }) as Error);
    }
    expect(() => {
      filterOf(ids(500, 3)).filter.check();
    }).not.toThrow();
  });

  test("random sections never crash a lookup", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.string({ maxLength: 20 }), (bytes, s) => {
        let filter: SymbolFilter;
        try {
          filter = new SymbolFilter(bytes);
        } catch (error) {
          expect(error).toBeInstanceOf(ChunkError);
          return;
        }
        expect(typeof filter.mayHold(s)).toBe("boolean");
      }),
      { numRuns: 3000 },
    );
  });
});
