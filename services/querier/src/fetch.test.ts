import { describe, expect, test } from "vitest";
import { TailSizes } from "./fetch.js";

const KIB = 1024;

describe("the first read of a chunk's tail", () => {
  test("is 128 KiB for a tenant with no tail read yet, or a chunk of unknown size", () => {
    const tails = new TailSizes();
    expect(tails.guess("t", 200_000)).toBe(128 * KIB);
    tails.learn("t", 20_000, 200_000);
    expect(tails.guess("other", 200_000)).toBe(128 * KIB);
    expect(tails.guess("t", 0)).toBe(128 * KIB);
    expect(tails.guess("t", Number.NaN)).toBe(128 * KIB);
  });

  test.each([
    // [tails learnt as [tail, size], size asked, guess]
    [[[20_000, 200_000]], 200_000, 21_000 + KIB],
    [[[20_000, 200_000]], 400_000, 42_000 + KIB],
    // The largest share of those remembered.
    [
      [
        [20_000, 200_000],
        [60_000, 200_000],
        [10_000, 200_000],
      ],
      100_000,
      31_500 + KIB,
    ],
    // Never more than the chunk.
    [[[190_000, 200_000]], 10_000, 10_000],
    // A tail longer than its chunk (a damaged size) counts as all of it.
    [[[300_000, 200_000]], 50_000, 50_000],
    // Nothing learnt from a zero or missing size or tail.
    [
      [
        [0, 200_000],
        [10, 0],
      ],
      200_000,
      128 * KIB,
    ],
  ])("learnt %j, for %i bytes it reads %i", (learnt, size, guess) => {
    const tails = new TailSizes();
    for (const [tail, of] of learnt) tails.learn("t", tail!, of!);
    expect(tails.guess("t", size)).toBe(guess);
  });

  test("forgets a large tail once 32 smaller ones came after it", () => {
    const tails = new TailSizes();
    tails.learn("t", 90_000, 100_000);
    for (let i = 0; i < 31; i++) tails.learn("t", 10_000, 100_000);
    // 0.9 of the chunk, 5% more, and 1 KiB.
    expect(tails.guess("t", 100_000)).toBe(94_500 + KIB);
    tails.learn("t", 10_000, 100_000);
    expect(tails.guess("t", 100_000)).toBe(10_500 + KIB);
  });
});
