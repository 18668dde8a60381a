import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { hashString, StringIds } from "./intern.js";

describe("StringIds", () => {
  test("gives each distinct string the next id, and finds every string held", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string({ maxLength: 4 }),
            fc.string({ unit: "binary", maxLength: 20 }),
            // Long strings share their hashed ends: only the length and middle tell them apart.
            fc
              .string({ minLength: 1, maxLength: 3 })
              .map((m) => "a".repeat(70) + m + "b".repeat(70)),
          ),
          { maxLength: 500 },
        ),
        (strings) => {
          const ids = new StringIds();
          const model = new Map<string, number>();
          for (const s of strings) {
            const want = model.get(s) ?? model.size;
            model.set(s, want);
            expect(ids.intern(s)).toBe(want);
          }
          expect(ids.size).toBe(model.size);
          expect(ids.strings).toEqual([...model.keys()]);
          for (const [s, id] of model) expect(ids.idOf(s)).toBe(id);
          expect(ids.idOf("never interned \u0000")).toBe(-1);
        },
      ),
      { numRuns: 200 },
    );
  });

  test("hashes by value, whatever string object holds it", () => {
    const a = "span_id=" + "4bf92f3577b34da6";
    const b = ["span_id", "4bf92f3577b34da6"].join("=");
    expect(hashString(a)).toBe(hashString(b));
    expect(hashString("x".repeat(300))).not.toBe(hashString("x".repeat(301)));
  });
});
