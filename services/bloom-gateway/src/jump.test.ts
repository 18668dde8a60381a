import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { jumpHash } from "./jump.js";

describe("jumpHash", () => {
  // Known answers from github.com/dgryski/go-jump jump_test.go, "generated from the
  // reference C++ code" of the paper: bucket for 1..19 buckets (20 for key 0).
  test.each<[bigint, number[]]>([
    [0n, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]],
    [1n, [0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17]],
    [0xdeadbeefn, [0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16]],
    [0x0ddc0ffeebadf00dn, [0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15]],
  ])("key %s matches the reference", (key, buckets) => {
    expect(buckets.map((_, i) => jumpHash(key, i + 1))).toEqual(buckets);
  });

  test("growing from n to n+1 buckets moves keys only to the new bucket", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.integer({ min: 1, max: 500 }),
        (key, n) => {
          const before = jumpHash(key, n);
          const after = jumpHash(key, n + 1);
          expect(before).toBeGreaterThanOrEqual(0);
          expect(before).toBeLessThan(n);
          expect(after === before || after === n).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });

  test("spreads keys evenly", () => {
    const counts = new Array<number>(10).fill(0);
    for (let i = 0n; i < 20_000n; i++) counts[jumpHash(i * 0x9e3779b97f4a7c15n, 10)]!++;
    for (const c of counts) expect(Math.abs(c - 2000)).toBeLessThan(200);
  });

  test("no buckets is bucket 0, not a loop", () => {
    expect(jumpHash(42n, 0)).toBe(0);
  });
});
