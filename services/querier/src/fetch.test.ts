import { describe, expect, test } from "vitest";
import { TailSizes } from "./fetch.js";

const KIB = 1024;

describe("the first read of a chunk's tail", () => {
  test("is 128 KiB for a tenant with no tail read yet, or a chunk of unknown size", () => {
    const tails = new TailSizes();
    expect(tails.guess("t", 1n, 200_000)).toBe(128 * KIB);
    tails.learn("t", 1n, 20_000, 200_000);
    expect(tails.guess("other", 1n, 200_000)).toBe(128 * KIB);
    expect(tails.guess("t", 1n, 0)).toBe(128 * KIB);
    expect(tails.guess("t", 1n, Number.NaN)).toBe(128 * KIB);
  });

  // Each case: tails learnt as [series, tail, size], then [series, size] asked → bytes.
  test.each([
    // A series read before: its share (0.1) of the chunk, 5% more, and 1 KiB.
    { learnt: [[1n, 20_000, 200_000]], asked: [1n, 400_000], bytes: 42_000 + KIB },
    // A series not read yet: its tenant's largest recent share (0.3) ...
    {
      learnt: [
        [1n, 20_000, 200_000],
        [2n, 60_000, 200_000],
        [3n, 10_000, 200_000],
      ],
      asked: [4n, 100_000],
      bytes: 31_500 + KIB,
    },
    // ... but never more than 128 KiB, which its own share may pass.
    { learnt: [[1n, 60_000, 100_000]], asked: [2n, 1_000_000], bytes: 128 * KIB },
    { learnt: [[1n, 60_000, 100_000]], asked: [1n, 1_000_000], bytes: 630_000 + KIB },
    // A series' own last share, not its tenant's largest.
    {
      learnt: [
        [1n, 60_000, 100_000],
        [2n, 10_000, 100_000],
      ],
      asked: [2n, 100_000],
      bytes: 10_500 + KIB,
    },
    // Never more than the chunk; a tail longer than its chunk counts as all of it.
    { learnt: [[1n, 190_000, 200_000]], asked: [1n, 10_000], bytes: 10_000 },
    { learnt: [[1n, 300_000, 200_000]], asked: [1n, 50_000], bytes: 50_000 },
    // Nothing learnt from a zero or missing size or tail.
    {
      learnt: [
        [1n, 0, 200_000],
        [1n, 10, 0],
      ],
      asked: [1n, 200_000],
      bytes: 128 * KIB,
    },
  ])("learnt $learnt, asked $asked: $bytes bytes", ({ learnt, asked, bytes }) => {
    const tails = new TailSizes();
    for (const [fp, tail, size] of learnt)
      tails.learn("t", fp as bigint, tail as number, size as number);
    expect(tails.guess("t", asked[0] as bigint, asked[1] as number)).toBe(bytes);
  });

  test("a tenant's largest share is of its last 32 tails", () => {
    const tails = new TailSizes();
    tails.learn("t", 1n, 90_000, 100_000);
    for (let i = 0; i < 31; i++) tails.learn("t", 2n, 10_000, 100_000);
    // 0.9 of the chunk, 5% more, and 1 KiB.
    expect(tails.guess("t", 3n, 100_000)).toBe(94_500 + KIB);
    tails.learn("t", 2n, 10_000, 100_000);
    expect(tails.guess("t", 3n, 100_000)).toBe(10_500 + KIB);
    // The series itself still has its own.
    expect(tails.guess("t", 1n, 100_000)).toBe(94_500 + KIB);
  });

  test("forgets every series past 65,536, and every tenant past 4,096", () => {
    const tails = new TailSizes();
    tails.learn("t", 0n, 50_000, 100_000);
    for (let fp = 1n; fp < 65_536n; fp++) tails.learn("t", fp, 10_000, 100_000);
    expect(tails.guess("t", 0n, 100_000)).toBe(52_500 + KIB);
    tails.learn("t", 65_536n, 10_000, 100_000);
    // Series 0 forgotten: its tenant's largest recent share.
    expect(tails.guess("t", 0n, 100_000)).toBe(10_500 + KIB);
    for (let i = 0; i < 4096; i++) tails.learn(`tenant-${i}`, 1n, 10_000, 100_000);
    expect(tails.guess("t", 65_536n, 100_000)).toBe(128 * KIB);
  });
});
