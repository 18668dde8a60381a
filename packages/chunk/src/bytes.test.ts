import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ByteReader, ByteWriter } from "./bytes.js";
import { ChunkError } from "./errors.js";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const from = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h, "hex"));

describe("varints", () => {
  // Encodings as protobuf writes them (LEB128; zig-zag for signed values).
  const unsigned: [bigint, string][] = [
    [0n, "00"],
    [1n, "01"],
    [127n, "7f"],
    [128n, "8001"],
    [300n, "ac02"],
    [16383n, "ff7f"],
    [16384n, "808001"],
    [(1n << 49n) - 1n, "ffffffffffff7f"],
    [1n << 49n, "8080808080808001"],
    [(1n << 53n) - 1n, "ffffffffffffff0f"],
    [1n << 63n, "80808080808080808001"],
    [(1n << 64n) - 1n, "ffffffffffffffffff01"],
  ];
  test.each(unsigned)("uvarint64 %s is %s", (value, encoded) => {
    const w = new ByteWriter(1);
    w.uvarint64(value);
    expect(hex(w.toBytes())).toBe(encoded);
    const r = new ByteReader(from(encoded), "t");
    expect(r.uvarint64()).toBe(value);
    r.expectEnd();
  });

  const signed: [bigint, string][] = [
    [0n, "00"],
    [-1n, "01"],
    [1n, "02"],
    [-2n, "03"],
    [-(1n << 63n), "ffffffffffffffffff01"],
    [(1n << 63n) - 1n, "feffffffffffffffff01"],
  ];
  test.each(signed)("varint64 %s is %s", (value, encoded) => {
    const w = new ByteWriter(1);
    w.varint64(value);
    expect(hex(w.toBytes())).toBe(encoded);
    expect(new ByteReader(from(encoded), "t").varint64()).toBe(value);
  });

  const malformed: [string, string, (r: ByteReader) => unknown][] = [
    ["empty", "", (r) => r.uvarint64()],
    ["unterminated", "8080", (r) => r.uvarint64()],
    ["redundant zero byte", "8000", (r) => r.uvarint64()],
    ["redundant zero byte, long form", "80808080808080808000", (r) => r.uvarint64()],
    ["over 64 bits", "ffffffffffffffffff02", (r) => r.uvarint64()],
    ["eleven bytes", "ffffffffffffffffffff01", (r) => r.uvarint64()],
    ["number above its cap", "ac02", (r) => r.uvarint(299)],
    ["number unterminated", "ff", (r) => r.uvarint()],
    ["number redundant zero", "ff00", (r) => r.uvarint()],
    ["number beyond 2^53", "ffffffffffffffff7f", (r) => r.uvarint()],
    ["string longer than the input", "05616263", (r) => r.string()],
    ["string with invalid UTF-8", "02c328", (r) => r.string()],
    ["u32 short", "010203", (r) => r.u32le()],
  ];
  test.each(malformed)("rejects %s", (_, encoded, read) => {
    expect(() => read(new ByteReader(from(encoded), "t"))).toThrow(ChunkError);
  });

  test("a real U+FFFD in a string is kept", () => {
    const w = new ByteWriter(1);
    w.string("a\uFFFDb");
    expect(new ByteReader(w.toBytes(), "t").string()).toBe("a\uFFFDb");
  });

  test("numbers and strings round-trip", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.maxSafeNat(),
            fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }),
            fc.string({ unit: "grapheme" }),
          ),
        ),
        (items) => {
          const w = new ByteWriter(1);
          for (const [n, b, s] of items) {
            w.uvarint(n);
            w.varint64(b);
            w.string(s);
          }
          const r = new ByteReader(w.toBytes(), "t");
          for (const [n, b, s] of items) {
            expect(r.uvarint()).toBe(n);
            expect(r.varint64()).toBe(b);
            expect(r.string()).toBe(s);
          }
          r.expectEnd();
        },
      ),
    );
  });
});
