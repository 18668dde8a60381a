import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  crc32c,
  decodeFrame,
  decodeOffsets,
  decodeSegmentHeader,
  encodeFrame,
  encodeOffsets,
  encodeSegmentHeader,
  frameBytes,
  SEGMENT_HEADER_BYTES,
} from "./format.js";

function frame(offset: number, key: Uint8Array, value: Uint8Array): Buffer {
  const buf = Buffer.alloc(frameBytes(key.length, value.length));
  expect(encodeFrame(buf, 0, offset, key, value)).toBe(buf.length);
  return buf;
}

describe("frames", () => {
  it("round-trip any key, value and offset", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 64 }),
        fc.uint8Array({ maxLength: 2048 }),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        (key, value, offset) => {
          const buf = frame(offset, key, value);
          const decoded = decodeFrame(buf, 0, buf.length, offset);
          expect(decoded.kind).toBe("record");
          if (decoded.kind !== "record") return;
          expect(decoded.end).toBe(buf.length);
          expect(new Uint8Array(decoded.key)).toEqual(key);
          expect(new Uint8Array(decoded.value)).toEqual(value);
        },
      ),
    );
  });

  it("report every proper prefix as short, never as a record", () => {
    const buf = frame(7, Buffer.from("12345678"), Buffer.from("a line of a log"));
    for (let cut = 0; cut < buf.length; cut++) {
      expect(decodeFrame(buf, 0, cut, 7).kind, `cut at ${cut}`).toBe("short");
    }
  });

  it("reject every single-byte change", () => {
    const buf = frame(3, Buffer.from("key-8byt"), Buffer.from("some value bytes"));
    for (let i = 0; i < buf.length; i++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = Buffer.from(buf);
        bad[i]! ^= flip;
        const decoded = decodeFrame(bad, 0, bad.length, 3);
        expect(decoded.kind, `byte ${i} ^ ${flip}`).not.toBe("record");
      }
    }
  });

  it("reject a frame with another offset than expected", () => {
    const buf = frame(5, Buffer.from("k"), Buffer.from("v"));
    expect(decodeFrame(buf, 0, buf.length, 6)).toMatchObject({ kind: "bad" });
  });

  it.each([
    ["zero length", Buffer.from([0, 0, 0, 0, 0, 0, 0, 0])],
    ["length below the fixed body", Buffer.from([0, 0, 0, 0, 9, 0, 0, 0])],
    ["length above the format maximum", Buffer.from([0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])],
  ])("reject %s without allocating", (_, bytes) => {
    expect(decodeFrame(bytes, 0, bytes.length, 0)).toMatchObject({ kind: "bad" });
  });
});

describe("segment header", () => {
  it("round-trips the base offset", () => {
    for (const base of [0, 1, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER]) {
      expect(decodeSegmentHeader(encodeSegmentHeader(base))).toEqual({
        ok: true,
        baseOffset: base,
      });
    }
  });

  it.each([
    ["bad magic", 0, "bad_magic"],
    ["version", 4, "corrupt"],
    ["reserved", 6, "corrupt"],
    ["base offset", 9, "corrupt"],
    ["checksum", 17, "corrupt"],
  ] as const)("rejects a changed %s byte", (_, at, code) => {
    const buf = encodeSegmentHeader(42);
    buf[at]! ^= 0x10;
    expect(decodeSegmentHeader(buf)).toEqual({ ok: false, code });
  });

  it("rejects an unknown version with a valid checksum", () => {
    const buf = encodeSegmentHeader(0);
    buf[4] = 2;
    buf.writeInt32LE(crc32c(buf.subarray(0, 16)), 16);
    expect(decodeSegmentHeader(buf)).toEqual({ ok: false, code: "unsupported_version" });
  });

  it("rejects a short header", () => {
    expect(
      decodeSegmentHeader(encodeSegmentHeader(0).subarray(0, SEGMENT_HEADER_BYTES - 1)),
    ).toEqual({
      ok: false,
      code: "corrupt",
    });
  });
});

describe("offsets file", () => {
  it("round-trips", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat({ max: Number.MAX_SAFE_INTEGER }), { minLength: 1, maxLength: 64 }),
        (offsets) => {
          expect(decodeOffsets(encodeOffsets(offsets))).toEqual({ ok: true, committed: offsets });
        },
      ),
    );
  });

  it("rejects any single-byte change and any truncation", () => {
    const buf = encodeOffsets([1, 2, 3]);
    for (let i = 0; i < buf.length; i++) {
      const bad = Buffer.from(buf);
      bad[i]! ^= 0x04;
      expect(decodeOffsets(bad).ok, `byte ${i}`).toBe(false);
      expect(decodeOffsets(buf.subarray(0, i)).ok, `cut ${i}`).toBe(false);
    }
  });
});
