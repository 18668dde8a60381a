import { describe, expect, it } from "vitest";
import { mulberry32 } from "./random.js";

describe("mulberry32", () => {
  it("gives the reference sequence for a seed, the same every time, in [0, 1)", () => {
    // The first outputs of the reference C implementation (Tommy Ettinger's) for seed 1.
    const next = mulberry32(1);
    const first = [next(), next(), next()].map((x) => Math.round(x * 2 ** 32));
    expect(first).toEqual([2693262067, 11749833, 2265367787]);
    const again = mulberry32(1);
    expect([again(), again(), again()].map((x) => Math.round(x * 2 ** 32))).toEqual(first);
    const r = mulberry32(42);
    for (let i = 0; i < 10_000; i++) {
      const x = r();
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThan(1);
    }
  });
});
