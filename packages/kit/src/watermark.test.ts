import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryWatermark, memoryMayHold } from "./watermark.js";

describe("MemoryWatermark", () => {
  it("reads 'may hold anything' until written, and 'nothing' once set empty", () => {
    const buffer = MemoryWatermark.buffer(2);
    expect(memoryMayHold(buffer, 1n)).toBe(true);
    new MemoryWatermark(buffer, 0).set(undefined);
    // Slot 1 is still unwritten: its ingester may hold anything.
    expect(memoryMayHold(buffer, 1n)).toBe(true);
    new MemoryWatermark(buffer, 1).set(undefined);
    expect(memoryMayHold(buffer, MemoryWatermark.NONE)).toBe(false);
  });

  it("refuses a slot outside its buffer", () => {
    const buffer = MemoryWatermark.buffer(2);
    expect(() => new MemoryWatermark(buffer, 2)).toThrow(RangeError);
    expect(() => new MemoryWatermark(buffer, -1)).toThrow(RangeError);
  });

  it("is shared: a slot written on another thread's view is read here", () => {
    const buffer = MemoryWatermark.buffer(1);
    // A second view, as a worker thread given the same SharedArrayBuffer has.
    new MemoryWatermark(buffer, 0).set(500n);
    expect(memoryMayHold(buffer, 500n)).toBe(false);
    expect(memoryMayHold(buffer, 501n)).toBe(true);
  });

  it("says 'may hold' for a range ending after the oldest entry of any slot, and only then", () => {
    const ts = fc.bigInt({ min: -(2n ** 62n), max: 2n ** 62n });
    fc.assert(
      fc.property(
        fc.array(fc.array(ts, { maxLength: 6 }), { minLength: 1, maxLength: 4 }),
        ts,
        (slots, end) => {
          const buffer = MemoryWatermark.buffer(slots.length);
          slots.forEach((entries, i) => {
            const w = new MemoryWatermark(buffer, i);
            w.set(undefined);
            for (const t of entries) w.lower(t);
          });
          const held = slots.flat();
          expect(memoryMayHold(buffer, end)).toBe(held.some((t) => t < end));
        },
      ),
    );
  });
});
