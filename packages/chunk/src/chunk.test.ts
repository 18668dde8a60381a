import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ChunkBuilder, encodeChunk } from "./builder.js";
import { ByteReader, ByteWriter } from "./bytes.js";
import { crc32c } from "@sieve/kit";
import type { Entry, EntryWithBytes, MetadataPair } from "./entry.js";
import { ChunkError } from "./errors.js";
import type { ChunkErrorCode } from "./errors.js";
import { DEFAULT_BLOCK_TARGET_BYTES, MAX_BLOCK_RAW_BYTES, TRAILER_BYTES } from "./format.js";
import { ChunkReader, decodeChunk } from "./reader.js";
import { chunkChecksum, chunkKey } from "./ref.js";

const key = (e: Entry): string =>
  JSON.stringify([
    e.timestamp.toString(),
    e.line,
    e.structuredMetadata.map((p) => [p.name, p.value]),
  ]);

/** What a chunk must hold: first occurrences of distinct entries, stably sorted by time. */
function expected(entries: readonly Entry[]): Entry[] {
  const seen = new Set<string>();
  const out: Entry[] = [];
  for (const e of entries) {
    const k = key(e);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(e);
  }
  return out.sort((a, b) => (a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0));
}

const plain = (entries: readonly Entry[]): string[] => entries.map(key);

/**
 * The tail a reader of `bytes` asks for, read as a querier reads it: a trailer's worth
 * first, then as much as each answer of {@link ChunkReader.tailLength} says.
 */
function tailOf(bytes: Uint8Array): Uint8Array {
  const size = bytes.byteLength;
  let tail = bytes.subarray(size - TRAILER_BYTES);
  for (;;) {
    const need = ChunkReader.tailLength(tail, size);
    expect(need).toBeGreaterThanOrEqual(tail.byteLength);
    if (need === tail.byteLength) return tail;
    tail = bytes.subarray(size - need);
  }
}

/** A copy of `bytes` with byte `at` flipped. */
function flip(bytes: Uint8Array, at: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  out[at]! ^= 0xff;
  return out;
}

function codeOf(fn: () => unknown): ChunkErrorCode | "no error" {
  try {
    fn();
  } catch (err) {
    if (err instanceof ChunkError) return err.code;
    throw err; // anything else is a crash: fail the test with it
  }
  return "no error";
}

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

// Metadata strings from a small pool, so names and values repeat and get interned.
const pair: fc.Arbitrary<MetadataPair> = fc.record({
  name: fc.constantFrom("trace_id", "span_id", "user", "ключ", "🙂", ""),
  value: fc.oneof(fc.string({ unit: "grapheme", maxLength: 12 }), fc.constantFrom("a", "b", "")),
});
const entryArb: fc.Arbitrary<Entry> = fc.record({
  // Mostly a narrow window, so timestamps collide and arrive out of order; sometimes anywhere.
  timestamp: fc.oneof(
    {
      weight: 4,
      arbitrary: fc.bigInt({ min: 1_700_000_000_000_000_000n, max: 1_700_000_000_000_000_050n }),
    },
    { weight: 1, arbitrary: fc.bigInt({ min: INT64_MIN, max: INT64_MAX }) },
  ),
  line: fc.oneof(
    fc.string({ unit: "grapheme", maxLength: 80 }),
    fc.string({ unit: "binary", maxLength: 40 }).map((s) => s.replace(/[\uD800-\uDFFF]/g, "x")),
    fc.constant(""),
  ),
  structuredMetadata: fc.array(pair, { maxLength: 12 }),
});
/** Entries with some exact duplicates mixed in, and a block target small enough for many blocks. */
const chunkArb = fc
  .tuple(
    fc.array(entryArb, { minLength: 1, maxLength: 300 }),
    fc.array(fc.nat(), { maxLength: 60 }),
  )
  .map(([entries, picks]) => {
    const all = [...entries];
    for (const p of picks) all.splice(p % (all.length + 1), 0, entries[p % entries.length]!);
    return all;
  });

describe("chunk round trip", () => {
  test("random entries decode to the distinct entries in time order", () => {
    fc.assert(
      fc.property(chunkArb, fc.integer({ min: 64, max: 4096 }), (entries, target) => {
        const builder = new ChunkBuilder({ blockTargetBytes: target });
        let added = 0;
        for (const e of entries) if (builder.append(e)) added++;
        const want = expected(entries);
        expect(added).toBe(want.length);
        const enc = builder.encode();
        expect(enc.entryCount).toBe(want.length);
        expect(enc.from).toBe(want[0]!.timestamp);
        expect(enc.through).toBe(want[want.length - 1]!.timestamp);
        expect(enc.checksum).toBe(chunkChecksum(enc.bytes));
        const dec = decodeChunk(enc.bytes, enc.checksum);
        expect(plain(dec.entries)).toEqual(plain(want));
        const reader = new ChunkReader(enc.bytes);
        expect(reader.entryCount).toBe(want.length);
        expect(plain([...reader.entries({ direction: "backward" })])).toEqual(
          plain(want).reverse(),
        );
      }),
      { numRuns: 200 },
    );
  });

  test("each appended entry's ids name its metadata in the symbol list, across block cuts", () => {
    fc.assert(
      fc.property(chunkArb, fc.integer({ min: 64, max: 4096 }), (entries, target) => {
        const builder = new ChunkBuilder({ blockTargetBytes: target });
        for (const e of entries) {
          if (!builder.append(e)) continue;
          const ids = [...builder.lastEntryIds];
          const names = ids.map((id) => builder.symbolList[id]);
          expect(names).toEqual(e.structuredMetadata.flatMap((p) => [p.name, p.value]));
        }
        // Interned strings are the table written: the chunk still decodes as appended.
        expect(plain(decodeChunk(builder.encode().bytes).entries)).toEqual(
          plain(expected(entries)),
        );
      }),
      { numRuns: 100 },
    );
  });

  test("range reads return exactly the entries in [from, through), both directions", () => {
    fc.assert(
      fc.property(
        chunkArb,
        fc.bigInt({ min: 1_700_000_000_000_000_000n - 5n, max: 1_700_000_000_000_000_055n }),
        fc.bigInt({ min: 0n, max: 60n }),
        (entries, from, span) => {
          const enc = encodeChunk(entries, { blockTargetBytes: 256 });
          const through = from + span;
          const want = expected(entries).filter(
            (e) => e.timestamp >= from && e.timestamp < through,
          );
          const reader = new ChunkReader(enc.bytes);
          expect(plain([...reader.entries({ from, through })])).toEqual(plain(want));
          expect(plain([...reader.entries({ from, through, direction: "backward" })])).toEqual(
            plain(want).reverse(),
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  test("a range read decompresses only the blocks that overlap it", () => {
    const entries: Entry[] = [];
    for (let i = 0; i < 400; i++) {
      entries.push({
        timestamp: BigInt(i),
        line: `line ${i} ${"y".repeat(30)}`,
        structuredMetadata: [],
      });
    }
    const bytes = Uint8Array.from(encodeChunk(entries, { blockTargetBytes: 1024 }).bytes);
    const reader = new ChunkReader(bytes);
    expect(reader.blocks.length).toBeGreaterThan(4);
    const [first, second] = reader.blocks;
    // Damage the first block: reads that do not need it still work, reads that do fail.
    bytes[first!.offset + 1]! ^= 0xff;
    const damaged = new ChunkReader(bytes);
    const lo = second!.minTs;
    const lines = [...damaged.entries({ from: lo, through: lo + 3n })].map((e) => e.timestamp);
    expect(lines).toEqual([lo, lo + 1n, lo + 2n]);
    expect(codeOf(() => [...damaged.entries({ from: 0n, through: 1n })])).toBe("bad_checksum");
    expect(codeOf(() => damaged.block(0))).toBe("bad_checksum");
    expect(codeOf(() => decodeChunk(bytes))).toBe("bad_checksum");
  });

  test("a block may hold a string exactly when one of its entries has it as metadata", () => {
    fc.assert(
      fc.property(chunkArb, fc.integer({ min: 64, max: 2048 }), (entries, target) => {
        const reader = new ChunkReader(encodeChunk(entries, { blockTargetBytes: target }).bytes);
        const probes = [
          "trace_id",
          "a",
          "",
          "absent",
          ...entries.flatMap((e) => e.structuredMetadata.flatMap((p) => [p.name, p.value])),
        ];
        for (let b = 0; b < reader.blocks.length; b++) {
          const held = new Set(
            reader.block(b).flatMap((e) => e.structuredMetadata.flatMap((p) => [p.name, p.value])),
          );
          for (const s of probes)
            expect(reader.blockMayHold(b, s), `block ${b}, ${s}`).toBe(held.has(s));
        }
        // Reading only the blocks that may hold a value keeps every entry holding it.
        const needle = probes[probes.length - 1]!;
        const has = (e: Entry): boolean =>
          e.structuredMetadata.some((p) => p.name === needle || p.value === needle);
        const kept = [...reader.entries({ blocks: (b) => reader.blockMayHold(b, needle) })];
        expect(plain(kept.filter(has))).toEqual(plain(expected(entries).filter(has)));
        // And decoding only the entries whose symbol ids include it gives exactly those.
        const ids = reader.symbolIds(needle);
        const keep = (refs: Uint32Array, pairs: number): boolean =>
          refs.subarray(0, 2 * pairs).some((id) => ids.includes(id));
        for (const direction of ["forward", "backward"] as const) {
          const only = [...reader.entries({ keep, direction })];
          const want = plain(expected(entries).filter(has));
          expect(plain(only)).toEqual(direction === "forward" ? want : want.reverse());
        }
      }),
      { numRuns: 150 },
    );
  });

  test("a fresh reader finds a string's ids as a checked one does, whatever bytes surround it", () => {
    fc.assert(
      fc.property(chunkArb, (entries) => {
        const bytes = encodeChunk(entries, { blockTargetBytes: 256 }).bytes;
        const checked = new ChunkReader(bytes);
        checked.check();
        const strings = entries.flatMap((e) =>
          e.structuredMetadata.flatMap((p) => [p.name, p.value]),
        );
        // Pieces of symbols and runs across two of them occur in the table's bytes without
        // being symbols: a search of the bytes finds them, only the walk can say no.
        const probes = ["", "absent", ...strings];
        for (const [i, s] of strings.entries()) {
          probes.push(s.slice(1), s.slice(0, -1), s + (strings[i + 1] ?? ""));
        }
        for (const s of probes) {
          const fresh = new ChunkReader(bytes);
          expect(fresh.symbolIds(s), JSON.stringify(s)).toEqual(checked.symbolIds(s));
          expect(checked.symbolIds(s).length > 0, JSON.stringify(s)).toBe(strings.includes(s));
        }
      }),
      { numRuns: 100 },
    );
  });

  test("version 1 chunks, written before block symbols, still read", () => {
    // encodeChunk of the three entries below with blockTargetBytes 12, by the version 1 writer.
    const v1 = Buffer.from(
      "5356434b010100000b28d00f056669727374010001f1fd820b0a24f02e067365636f6e6400faf7ff6f0d30a01f" +
        "05746869726402000203044afdfe591b68050874726163655f6964026161026262077370616e5f6964026363" +
        "296200803c1d1b0503080d0bd00f0001190c0af02e0001290f0da01f00011a000000adc05168",
      "hex",
    );
    const trace = (value: string): MetadataPair => ({ name: "trace_id", value });
    const want: Entry[] = [
      { timestamp: 1_000n, line: "first", structuredMetadata: [trace("aa")] },
      {
        timestamp: 2_000n,
        line: "third",
        structuredMetadata: [trace("bb"), { name: "span_id", value: "cc" }],
      },
      { timestamp: 3_000n, line: "second", structuredMetadata: [] },
    ];
    expect(v1[4]).toBe(1);
    expect(plain(decodeChunk(v1).entries)).toEqual(plain(want));
    const reader = new ChunkReader(v1);
    // Without block symbols every block may hold what the chunk holds, and nothing else.
    expect(reader.blocks.map((_, b) => reader.blockMayHold(b, "cc"))).toEqual([true, true, true]);
    expect(reader.blockMayHold(0, "dd")).toBe(false);
    // Its tail has no header: the footer's shape says it is version 1.
    const fromTail = new ChunkReader(Buffer.from(tailOf(v1)), v1.byteLength);
    for (const r of fromTail.missing(() => true)) {
      fromTail.addBlocks(r.offset, v1.subarray(r.offset, r.offset + r.length));
    }
    expect(plain([...fromTail.entries()])).toEqual(plain(want));
    expect(fromTail.blockMayHold(2, "cc")).toBe(true);
  });

  test("version 2 chunks, written before the symbol filter, still read", () => {
    // The same three entries, blockTargetBytes 12, by the version 2 writer (64099ce).
    const v2 = Buffer.from(
      "5356434b020100000b28d00f056669727374010001f1fd820b0a24f02e067365636f6e6400faf7ff6f0d30a01f" +
        "05746869726402000203044afdfe591b68050874726163655f6964026161026262077370616e5f6964026363" +
        "29620080092002000000040001000093088c273c1d1b0503080d0bd00f0001190c0af02e0001290f0da01f00" +
        "010b091c00000042aad9a7",
      "hex",
    );
    const trace = (value: string): MetadataPair => ({ name: "trace_id", value });
    expect(v2[4]).toBe(2);
    expect(plain(decodeChunk(v2).entries)).toEqual(
      plain([
        { timestamp: 1_000n, line: "first", structuredMetadata: [trace("aa")] },
        {
          timestamp: 2_000n,
          line: "third",
          structuredMetadata: [trace("bb"), { name: "span_id", value: "cc" }],
        },
        { timestamp: 3_000n, line: "second", structuredMetadata: [] },
      ]),
    );
    // Its tail has no header: the footer's shape says it is version 2, without a filter,
    // so a filter's reader needs the whole tail.
    const tail = Buffer.from(tailOf(v2));
    expect(ChunkReader.filterLength(tail, v2.byteLength)).toBe(tail.byteLength);
    expect(ChunkReader.symbolFilter(tail, v2.byteLength)).toBeUndefined();
    const fromTail = new ChunkReader(tail, v2.byteLength);
    // Blocks in the order they were cut: the third entry appended is the third block.
    expect(fromTail.blocks.map((_, b) => fromTail.blockMayHold(b, "cc"))).toEqual([
      false,
      false,
      true,
    ]);
    expect(fromTail.symbolIds("dd")).toEqual([]);
  });

  test("a tail reader answers as the whole chunk's, once given the blocks it names", () => {
    fc.assert(
      fc.property(
        chunkArb,
        fc.integer({ min: 64, max: 4096 }),
        fc.nat(),
        fc.array(fc.boolean(), { maxLength: 40 }),
        (entries, target, extra, pick) => {
          const builder = new ChunkBuilder({ blockTargetBytes: target });
          for (const e of entries) builder.append(e);
          const bytes = builder.encode().bytes;
          const size = bytes.byteLength;
          const whole = new ChunkReader(bytes);
          // Any tail longer than the one it asks for reads the same.
          const held = Math.min(size, tailOf(bytes).byteLength + (extra % 256));
          const reader = new ChunkReader(bytes.slice(size - held), size);
          expect(reader.byteLength).toBe(size);
          expect(reader.blocks).toEqual(whole.blocks);
          expect(reader.symbolCount).toBe(whole.symbolCount);
          for (const e of entries.slice(0, 5)) {
            for (const { name, value } of e.structuredMetadata) {
              expect(reader.symbolIds(value)).toEqual(whole.symbolIds(value));
              whole.blocks.forEach((_, b) => {
                expect(reader.blockMayHold(b, name)).toBe(whole.blockMayHold(b, name));
              });
            }
          }
          // The blocks a read wants and the tail lacks are named, added, then read.
          const wanted = (b: number): boolean => pick[b % Math.max(1, pick.length)] ?? true;
          const before = reader.retainedBytes;
          const ranges = reader.missing(wanted);
          for (const r of ranges) {
            expect(r.offset).toBeLessThan(size - held);
            reader.addBlocks(r.offset, bytes.slice(r.offset, r.offset + r.length));
          }
          expect(reader.missing(wanted)).toEqual([]);
          const added = ranges.reduce((n, r) => n + r.length, 0);
          expect(reader.retainedBytes).toBe(before + added);
          const got = plain([...reader.entries({ blocks: wanted })]);
          expect(got).toEqual(plain([...whole.entries({ blocks: wanted })]));
          // A block neither in the tail nor added is not read silently.
          const lacking = whole.blocks.findIndex((b, i) => !wanted(i) && b.offset < size - held);
          if (lacking >= 0) expect(() => reader.block(lacking)).toThrow(RangeError);
        },
      ),
      { numRuns: 150 },
    );
  });

  test("a tail too short for the reader, or damaged, is refused with a ChunkError", () => {
    const builder = new ChunkBuilder({ blockTargetBytes: 64 });
    for (let i = 0; i < 40; i++) {
      builder.append({
        timestamp: BigInt(i),
        line: `line ${i}`,
        structuredMetadata: [{ name: "trace_id", value: `t-${i}` }],
      });
    }
    const bytes = builder.encode().bytes;
    const size = bytes.byteLength;
    const need = tailOf(bytes).byteLength;
    expect(need).toBeLessThan(size);
    const cases: [string, Uint8Array, ChunkErrorCode | "no error"][] = [
      ["the tail it asks for", bytes.slice(size - need), "no error"],
      ["one byte short of the symbols", bytes.slice(size - need + 1), "truncated"],
      ["the trailer alone", bytes.slice(size - TRAILER_BYTES), "truncated"],
      ["less than a trailer", bytes.slice(size - 3), "truncated"],
      [
        "a footer byte flipped",
        flip(bytes, size - TRAILER_BYTES - 2).slice(size - need),
        "bad_checksum",
      ],
      ["a symbol byte flipped", flip(bytes, size - need + 3).slice(size - need), "bad_checksum"],
    ];
    for (const [name, tail, code] of cases) {
      expect(
        codeOf(() => new ChunkReader(tail, size)),
        name,
      ).toBe(code);
    }
    expect(() => new ChunkReader(bytes, size - 1)).toThrow(RangeError);
  });

  test("a duplicate of an entry in an already cut block is dropped", () => {
    const b = new ChunkBuilder({ blockTargetBytes: 64 });
    const e = (ts: bigint, line: string, md: MetadataPair[] = []): Entry => ({
      timestamp: ts,
      line,
      structuredMetadata: md,
    });
    for (let i = 0; i < 50; i++)
      expect(b.append(e(BigInt(i * 10), `line ${i} ${"x".repeat(20)}`))).toBe(true);
    expect(b.blockCount).toBeGreaterThan(5);
    expect(b.append(e(100n, `line 10 ${"x".repeat(20)}`))).toBe(false); // exact duplicate, old block
    expect(b.append(e(100n, `line 10 ${"x".repeat(19)}`))).toBe(true); // different line
    expect(b.append(e(100n, `line 10 ${"x".repeat(20)}`, [{ name: "a", value: "b" }]))).toBe(true);
    expect(b.append(e(100n, `line 10 ${"x".repeat(20)}`, [{ name: "a", value: "b" }]))).toBe(false);
    expect(b.append(e(101n, `line 10 ${"x".repeat(20)}`))).toBe(true); // different timestamp
    expect(b.entryCount).toBe(53);
    expect(decodeChunk(b.encode().bytes).entries.length).toBe(53);
  });

  test("blocks are cut near the target and the compressed estimate tracks the encoding", () => {
    const b = new ChunkBuilder();
    let ts = 1_700_000_000_000_000_000n;
    for (let i = 0; i < 20_000; i++) {
      ts += 1_000_000n;
      b.append({
        timestamp: ts,
        line: `level=info msg="request done" path=/api/v1/items/${i % 997} status=200 duration_ms=${i % 113}`,
        structuredMetadata: [
          {
            name: "trace_id",
            value: (Math.floor(i / 10) * 2654435761).toString(16).padStart(32, "0"),
          },
        ],
      });
    }
    const estimate = b.compressedBytesEstimate;
    const enc = b.encode();
    const reader = new ChunkReader(enc.bytes);
    for (const blk of reader.blocks.slice(0, -1)) {
      expect(blk.rawLength).toBeGreaterThanOrEqual(DEFAULT_BLOCK_TARGET_BYTES * 0.98);
      expect(blk.rawLength).toBeLessThan(DEFAULT_BLOCK_TARGET_BYTES * 1.02);
    }
    expect(estimate).toBeGreaterThanOrEqual(enc.bytes.byteLength * 0.9);
    expect(estimate).toBeLessThanOrEqual(enc.bytes.byteLength * 1.5);
    expect(enc.uncompressedBytes).toBe(reader.blocks.reduce((n, blk) => n + blk.rawLength, 0));
    expect(enc.bytes.byteLength).toBeLessThan(enc.uncompressedBytes / 2);
    expect(reader.symbolCount).toBe(1 + 2000);
  });

  test("lineBytes: the UTF-8 bytes of the lines held, duplicates dropped", () => {
    const b = new ChunkBuilder();
    const lines = ["plain", "héllo wörld", "日本語", "🙂 emoji"];
    for (const [i, line] of lines.entries()) {
      b.append({ timestamp: BigInt(i), line, structuredMetadata: [{ name: "k", value: "v" }] });
    }
    // An exact duplicate is dropped and not counted.
    b.append({ timestamp: 0n, line: "plain", structuredMetadata: [{ name: "k", value: "v" }] });
    const expected = lines.reduce((n, l) => n + Buffer.byteLength(l, "utf8"), 0);
    expect(expected).toBe(5 + 13 + 9 + 10);
    expect(b.lineBytes).toBe(expected);
    expect(b.encode().lineBytes).toBe(expected);
  });

  test("the key of an encoded chunk names its content", () => {
    const enc = encodeChunk([{ timestamp: 5n, line: "x", structuredMetadata: [] }]);
    const ref = {
      tenant: "t1",
      fingerprint: 0xabcn,
      from: enc.from,
      through: enc.through,
      checksum: enc.checksum,
    };
    expect(chunkKey(ref)).toBe(
      `t1/chunks/0000000000000abc/5-5-${enc.checksum.toString(16).padStart(8, "0")}`,
    );
    expect(encodeChunk([{ timestamp: 5n, line: "x", structuredMetadata: [] }]).checksum).toBe(
      enc.checksum,
    );
    expect(codeOf(() => decodeChunk(enc.bytes, enc.checksum ^ 1))).toBe("bad_checksum");
    // A chunk written before chunkChecksum is listed under its CRC-32C, and still checks.
    expect(decodeChunk(enc.bytes, crc32c(enc.bytes)).entries).toHaveLength(1);
  });

  test("chunks of one time range with sections of the same sizes have different keys", () => {
    // Every section carries its own CRC-32C, so two such chunks have one CRC-32C for the
    // whole object: listed under it, the second flushed overwrote the first.
    const chunk = (letter: string, count: number, length: number) =>
      encodeChunk(
        Array.from({ length: count }, (_, i) => ({
          timestamp: 1_700_000_000_000_000_000n,
          line: letter.repeat(length),
          structuredMetadata: [
            { name: "order", value: letter },
            { name: "step", value: String(i) },
          ],
        })),
      );
    // Lines of one repeated letter: these compress to the same sizes whatever the letter.
    const [a, b] = [chunk("a", 50, 120), chunk("b", 50, 120)];
    expect(a.entryCount).toBe(50);
    expect(Buffer.from(a.bytes).equals(Buffer.from(b.bytes))).toBe(false);
    expect(crc32c(a.bytes)).toBe(crc32c(b.bytes));
    expect(a.checksum).not.toBe(b.checksum);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz".split("")), {
          minLength: 2,
          maxLength: 2,
        }),
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 20, max: 400 }),
        ([x, y], count, length) => {
          expect(chunk(x!, count, length).checksum).not.toBe(chunk(y!, count, length).checksum);
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe("chunk builder input", () => {
  const ok: Entry = { timestamp: 1n, line: "x", structuredMetadata: [] };
  const bad: [string, unknown][] = [
    ["number timestamp", { ...ok, timestamp: 1 }],
    ["timestamp above int64", { ...ok, timestamp: 1n << 63n }],
    ["timestamp below int64", { ...ok, timestamp: -(1n << 63n) - 1n }],
    ["line not a string", { ...ok, line: 5 }],
    ["metadata not an array", { ...ok, structuredMetadata: {} }],
    ["metadata pair without value", { ...ok, structuredMetadata: [{ name: "a" }] }],
    ["metadata pair null", { ...ok, structuredMetadata: [null] }],
    ["line over the limit", { ...ok, line: "x".repeat(8 * 1024 * 1024 + 1) }],
  ];
  test.each(bad)("refuses %s with invalid_entry", (_, entry) => {
    const b = new ChunkBuilder();
    expect(codeOf(() => b.append(entry as Entry))).toBe("invalid_entry");
    expect(b.entryCount).toBe(0);
  });

  test.each([
    ["starting before its source", -1, 1],
    ["ending past its source", 0, 9],
    ["ending before it starts", 2, 1],
  ])("refuses line bytes %s with invalid_entry", (_, lineStart, lineEnd) => {
    const b = new ChunkBuilder();
    const entry: EntryWithBytes = { ...ok, source: Buffer.from("abcdefgh"), lineStart, lineEnd };
    expect(codeOf(() => b.append(entry))).toBe("invalid_entry");
    expect(b.entryCount).toBe(0);
  });

  test("an entry given as bytes makes the chunk its text makes", () => {
    fc.assert(
      fc.property(chunkArb, fc.string({ maxLength: 8 }), (entries, pad) => {
        const text = new ChunkBuilder({ blockTargetBytes: 512 });
        const bytes = new ChunkBuilder({ blockTargetBytes: 512 });
        for (const e of entries) {
          const line = Buffer.from(e.line);
          const source = Buffer.concat([Buffer.from(pad), line, Buffer.from(pad)]);
          const lineStart = Buffer.byteLength(pad);
          const viewed: EntryWithBytes = {
            timestamp: e.timestamp,
            structuredMetadata: e.structuredMetadata,
            source,
            lineStart,
            lineEnd: lineStart + line.length,
            get line(): string {
              // Read only to compare with a cut block's entries (a duplicate's rare path).
              return e.line;
            },
          };
          expect(bytes.append(viewed)).toBe(text.append(e));
        }
        expect(Buffer.from(bytes.encode().bytes).equals(Buffer.from(text.encode().bytes))).toBe(
          true,
        );
      }),
      { numRuns: 150 },
    );
  });

  test("line bytes that are not UTF-8 are written as their text, with U+FFFD", () => {
    const b = new ChunkBuilder();
    const source = Buffer.from([0x61, 0xff, 0x62]);
    const line = source.toString();
    const entry: EntryWithBytes = { ...ok, line, source, lineStart: 0, lineEnd: 3 };
    b.append(entry);
    expect(decodeChunk(b.encode().bytes).entries[0]!.line).toBe("a\ufffdb");
  });

  test("refuses an empty chunk and bad options", () => {
    expect(codeOf(() => new ChunkBuilder().encode())).toBe("empty_chunk");
    expect(codeOf(() => new ChunkBuilder({ blockTargetBytes: 0 }))).toBe("invalid_options");
    expect(codeOf(() => new ChunkBuilder({ blockTargetBytes: 5 * 1024 * 1024 }))).toBe(
      "invalid_options",
    );
  });

  test("a full symbol table refuses the entry that would overflow it, and only that one", () => {
    const b = new ChunkBuilder();
    const big = (i: number): string => String(i).padEnd(4 * 1024 * 1024, "v");
    let i = 0;
    const entry = (value: string): Entry => ({
      timestamp: BigInt(i),
      line: `line ${i}`,
      structuredMetadata: [{ name: "blob", value }],
    });
    for (; i < 15; i++) b.append(entry(big(i))); // 60 MiB of symbols
    expect(codeOf(() => b.append(entry(big(99))))).toBe("too_large");
    // Values already in the table add nothing: accepted however large they are.
    expect(b.append(entry(big(3)))).toBe(true);
    i++;
    expect(b.append(entry("small"))).toBe(true);
    expect(b.entryCount).toBe(17);
    const values = decodeChunk(b.encode().bytes).entries.map((e) => e.structuredMetadata[0]!.value);
    expect(values).not.toContain(big(99));
    expect(values.filter((v) => v === big(3))).toHaveLength(2);
  });

  test("a builder keeps working after encode", () => {
    const b = new ChunkBuilder();
    b.append({ timestamp: 2n, line: "b", structuredMetadata: [] });
    const first = b.encode();
    b.append({ timestamp: 1n, line: "a", structuredMetadata: [{ name: "k", value: "v" }] });
    b.append({ timestamp: 2n, line: "b", structuredMetadata: [] }); // duplicate across encode
    const second = b.encode();
    expect(decodeChunk(first.bytes).entries.map((e) => e.line)).toEqual(["b"]);
    expect(decodeChunk(second.bytes).entries.map((e) => e.line)).toEqual(["a", "b"]);
  });
});

describe("chunk decoding rejects damage", () => {
  // Small but complete: three blocks (one out of order, overlapping), metadata, unicode.
  const small = encodeChunk(
    [
      { timestamp: 100n, line: "first", structuredMetadata: [{ name: "trace_id", value: "abc" }] },
      { timestamp: 101n, line: "", structuredMetadata: [] },
      { timestamp: 99n, line: "日本", structuredMetadata: [{ name: "trace_id", value: "def" }] },
      { timestamp: 150n, line: "later", structuredMetadata: [{ name: "u", value: "🙂" }] },
      { timestamp: 120n, line: "mid", structuredMetadata: [] },
    ],
    { blockTargetBytes: 16 },
  ).bytes;

  test("the sample chunk has several blocks and decodes", () => {
    expect(new ChunkReader(small).blocks.length).toBeGreaterThanOrEqual(3);
    expect(decodeChunk(small).entries.map((e) => e.line)).toEqual([
      "日本",
      "first",
      "",
      "mid",
      "later",
    ]);
  });

  test("every single-byte change is rejected with a ChunkError", () => {
    const copy = Uint8Array.from(small);
    const accepted: string[] = [];
    for (let i = 0; i < small.length; i++) {
      for (let v = 0; v < 256; v++) {
        if (v === small[i]) continue;
        copy[i] = v;
        if (codeOf(() => decodeChunk(copy)) === "no error") accepted.push(`byte ${i} = ${v}`);
      }
      copy[i] = small[i]!;
    }
    expect(accepted).toEqual([]);
  });

  test("every truncation and an extension are rejected with a ChunkError", () => {
    const accepted: number[] = [];
    for (let n = 0; n < small.length; n++) {
      if (codeOf(() => decodeChunk(small.subarray(0, n))) === "no error") accepted.push(n);
    }
    expect(accepted).toEqual([]);
    const longer = new Uint8Array(small.length + 1);
    longer.set(small);
    expect(codeOf(() => decodeChunk(longer))).not.toBe("no error");
  });

  test("header fields get their own codes", () => {
    const cases: [number, number, ChunkErrorCode][] = [
      [0, 0x54, "bad_magic"],
      [4, 4, "unsupported_version"],
      [4, 0, "unsupported_version"],
      // A version 3 footer under a version 2 header: its symbol filter is not accounted for.
      [4, 2, "corrupt"],
      [5, 2, "unsupported_codec"],
      [6, 1, "corrupt"],
    ];
    for (const [at, value, code] of cases) {
      const copy = Uint8Array.from(small);
      copy[at] = value;
      expect(
        codeOf(() => decodeChunk(copy)),
        `byte ${at}`,
      ).toBe(code);
    }
    expect(codeOf(() => decodeChunk(new Uint8Array(3)))).toBe("truncated");
  });

  test("random bytes never crash the decoder", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.boolean(), (tail, withHeader) => {
        const bytes = withHeader ? Uint8Array.from([...small.subarray(0, 8), ...tail]) : tail;
        expect(codeOf(() => decodeChunk(bytes))).not.toBe("no error");
      }),
      { numRuns: 2000 },
    );
  });

  /**
   * Rewrites the footer with `edit` and a correct checksum, so the damage gets past the
   * CRC and must be caught by the consistency checks.
   */
  function withFooter(edit: (fields: bigint[]) => void): Uint8Array {
    const size = small.length;
    const footerLength = new DataView(small.buffer, small.byteOffset).getUint32(
      size - TRAILER_BYTES,
      true,
    );
    const start = size - TRAILER_BYTES - footerLength;
    const r = new ByteReader(small, "test", "corrupt", start, size - TRAILER_BYTES);
    const fields: bigint[] = [];
    // Four symbol-table fields, the block count, six fields a block (minTs signed), the
    // block symbols' two and the symbol filter's length.
    for (let i = 0; i < 5; i++) fields.push(r.uvarint64());
    for (let b = 0; b < Number(fields[4]); b++) {
      for (let j = 0; j < 6; j++) fields.push(j === 3 ? r.varint64() : r.uvarint64());
    }
    fields.push(r.uvarint64(), r.uvarint64(), r.uvarint64());
    edit(fields);
    const w = new ByteWriter();
    for (const [i, v] of fields.entries()) {
      if (i >= 5 && i < fields.length - 3 && (i - 5) % 6 === 3) w.varint64(v);
      else w.uvarint64(v);
    }
    const footer = w.toBytes();
    const out = new Uint8Array(start + footer.length + TRAILER_BYTES);
    out.set(small.subarray(0, start));
    out.set(footer, start);
    const dv = new DataView(out.buffer);
    dv.setUint32(start + footer.length, footer.length, true);
    dv.setUint32(start + footer.length + 4, crc32c(footer), true);
    return out;
  }

  test("a footer with a valid checksum but inconsistent fields is rejected before allocating", () => {
    expect(decodeChunk(withFooter(() => undefined)).entries.length).toBe(5); // the rewrite is faithful
    const edits: [string, (f: bigint[]) => void][] = [
      ["huge block count", (f) => (f[4] = 1n << 40n)],
      ["zero blocks", (f) => (f[4] = 0n)],
      ["block offset off by one", (f) => (f[5] = f[5]! + 1n)],
      ["block raw length over the cap", (f) => (f[7] = BigInt(MAX_BLOCK_RAW_BYTES) + 1n)],
      ["block raw length off by one", (f) => (f[7] = f[7]! + 1n)],
      ["huge entry count", (f) => (f[10] = 1n << 50n)],
      ["entry count off by one", (f) => (f[10] = f[10]! + 1n)],
      ["block minimum timestamp off", (f) => (f[8] = f[8]! - 1n)],
      [
        "block minimum timestamp off, maximum kept",
        (f) => {
          f[8] = f[8]! - 1n;
          f[9] = f[9]! + 1n;
        },
      ],
      ["block maximum timestamp off", (f) => (f[9] = f[9]! + 1n)],
      ["maximum timestamp overflows int64", (f) => (f[9] = (1n << 64n) - 1n)],
      ["symbol count off by one", (f) => (f[3] = f[3]! + 1n)],
      ["symbol table raw length over the cap", (f) => (f[2] = 1n << 40n)],
      ["symbol table moved", (f) => (f[0] = f[0]! - 1n)],
      ["block symbols longer", (f) => (f[f.length - 3] = f[f.length - 3]! + 1n)],
      ["block symbols shorter", (f) => (f[f.length - 3] = f[f.length - 3]! - 1n)],
      ["block symbols raw length off by one", (f) => (f[f.length - 2] = f[f.length - 2]! + 1n)],
      ["block symbols raw length over the cap", (f) => (f[f.length - 2] = 1n << 40n)],
      ["symbol filter longer", (f) => (f[f.length - 1] = f[f.length - 1]! + 1n)],
      ["symbol filter shorter", (f) => (f[f.length - 1] = f[f.length - 1]! - 1n)],
      ["symbol filter missing", (f) => f.pop()],
    ];
    for (const [name, edit] of edits) {
      expect(
        codeOf(() => decodeChunk(withFooter(edit))),
        name,
      ).not.toBe("no error");
    }
  });
});
