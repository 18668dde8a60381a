import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TokenSet } from "./tokenset.js";

const utf8 = new TextEncoder();
const text = new TextDecoder();

describe("TokenSet", () => {
  it("holds exactly the distinct tokens added, in arrival order, whatever their number", () => {
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
            const bytes = utf8.encode(t);
            const added = set.add(bytes);
            const key = text.decode(bytes);
            expect(added).toBe(!model.includes(key));
            if (added) model.push(key);
          }
          expect(set.size).toBe(model.length);
          const order: string[] = [];
          set.forEachToken((b) => order.push(text.decode(b)));
          expect(order).toEqual(model);
          const viaSlots: string[] = [];
          let hashes = 0;
          set.forEach((_lo, _hi, b) => viaSlots.push(text.decode(b)));
          set.forEachHash(() => hashes++);
          expect(viaSlots.sort()).toEqual([...model].sort());
          expect(hashes).toBe(model.length);
          // Sealed: the same tokens with the same hashes, in arrival order.
          const before = new Map<string, string>();
          set.forEach((lo, hi, b) => before.set(text.decode(b), `${lo}/${hi}`));
          set.seal();
          const after: [string, string][] = [];
          set.forEach((lo, hi, b) => after.push([text.decode(b), `${lo}/${hi}`]));
          expect(after).toEqual(model.map((k) => [k, before.get(k)]));
          const sealedHashes: string[] = [];
          set.forEachHash((lo, hi) => sealedHashes.push(`${lo}/${hi}`));
          expect(sealedHashes).toEqual(after.map(([, h]) => h));
          expect(() => set.add(utf8.encode("x"))).toThrow();
        },
      ),
      { numRuns: 200 },
    );
  });

  it("keeps two tokens whose hashes collide but whose bytes differ", () => {
    const set = new TokenSet();
    expect(set.addHashed(7, 9, utf8.encode("one"))).toBe(true);
    expect(set.addHashed(7, 9, utf8.encode("two"))).toBe(true);
    expect(set.addHashed(7, 9, utf8.encode("one"))).toBe(false);
    expect(set.addHashed(7, 9, utf8.encode("two"))).toBe(false);
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
