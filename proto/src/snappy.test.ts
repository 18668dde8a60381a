import { compress } from "snappyjs";
import { describe, expect, it } from "vitest";
import { ProtoError } from "./errors.js";
import { snappyDeclaredLength, snappyUncompress } from "./snappy.js";

describe("snappyUncompress", () => {
  it("round-trips a block", () => {
    const data = Buffer.from("hello snappy ".repeat(1000));
    expect(snappyUncompress(compress(data), 1 << 20).equals(data)).toBe(true);
  });

  it.each([
    [[0x00], 0],
    [[0x7f], 127],
    [[0x80, 0x01], 128],
    [[0xff, 0xff, 0xff, 0xff, 0x0f], 2 ** 32 - 1],
    [[0xff, 0xff, 0xff, 0xff, 0x1f], -1],
    [[0x80], -1],
    [[], -1],
  ])("reads the declared length of %j as %i", (bytes, length) => {
    expect(snappyDeclaredLength(Uint8Array.from(bytes))).toBe(length);
  });

  it("refuses a bomb by its header, before allocating", () => {
    // Declares 4 GiB - 1 of output in five bytes, followed by a copy that would repeat forever.
    const bomb = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x61, 0x01, 0x01]);
    const before = process.memoryUsage().arrayBuffers;
    let caught: unknown;
    try {
      snappyUncompress(bomb, 1 << 20);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ProtoError);
    expect((caught as ProtoError).code).toBe("snappy_too_large");
    expect((caught as { declaredBytes: number }).declaredBytes).toBe(2 ** 32 - 1);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(1 << 20);
  });

  it("refuses a block that overruns its declared length", () => {
    const real = compress(Buffer.from("a".repeat(100)));
    const lying = Buffer.from(real);
    lying[0] = 10; // declares 10 bytes, carries 100
    expect(() => snappyUncompress(lying, 1 << 20)).toThrow(/snappy block is corrupt/);
  });

  it("refuses garbage", () => {
    expect(() => snappyUncompress(Uint8Array.from([0x05, 0xff, 0xff]), 100)).toThrow(ProtoError);
  });
});
