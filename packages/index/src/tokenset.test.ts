import { hashKey, lastHash } from "@sieve/bloom";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TokenSet } from "./tokenset.js";

const utf8 = new TextEncoder();

/** A token's xxhash64 halves as the set stores them. */
function hashOf(token: string): string {
  hashKey(utf8.encode(token));
  return `${lastHash[0]}/${lastHash[1]}`;
}

describe("TokenSet", () => {
  it("holds exactly the distinct tokens added, by their hashes, in arrival order once sealed", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("a", "b", "")), {
          maxLength: 400,
        }),
        fc.integer({ min: 0, max: 64 }),
        (tokens, capacity) => {
          const set = new TokenSet(capacity);
          const model: string[] = [];
          for (const t of tokens) {
            const added = set.add(utf8.encode(t));
            expect(added).toBe(!model.includes(t));
            if (added) {
              // After a true answer, lastHash is the token's hash.
              expect(`${lastHash[0]}/${lastHash[1]}`).toBe(hashOf(t));
              model.push(t);
            }
          }
          expect(set.size).toBe(model.length);
          const open: string[] = [];
          set.forEachHash((lo, hi) => open.push(`${lo}/${hi}`));
          expect(open.sort()).toEqual(model.map(hashOf).sort());
          set.seal();
          const sealed: string[] = [];
          set.forEachHash((lo, hi) => sealed.push(`${lo}/${hi}`));
          expect(sealed).toEqual(model.map(hashOf));
          expect(set.byteLength).toBe(8 * model.length);
          expect(() => set.add(utf8.encode("x"))).toThrow();
        },
      ),
      { numRuns: 200 },
    );
  });

  it("holds a hash once: tokens whose hashes collide are one key to every filter", () => {
    const set = new TokenSet();
    expect(set.addHashed(7, 9)).toBe(true);
    expect(set.addHashed(7, 9)).toBe(false);
    expect(set.addHashed(7, 10)).toBe(true);
    expect(set.size).toBe(2);
  });

  it("takes a token from the start of a longer buffer", () => {
    const set = new TokenSet();
    const buf = utf8.encode("abcdef");
    expect(set.add(buf, 3)).toBe(true);
    expect(set.add(utf8.encode("abc"))).toBe(false);
    expect(set.add(buf)).toBe(true);
  });
});
