import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { IndexError } from "./errors.js";
import {
  chunkPrefix,
  chunkTokens,
  forEachNgram,
  lineNgrams,
  literalNgrams,
  prefixToken,
  seriesTokens,
} from "./tokens.js";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

describe("seriesTokens and chunkTokens", () => {
  it("make Loki 3.3's four tokens of a pair (its TestStructuredMetadataTokenizer case)", () => {
    expect(seriesTokens("pod", "loki-1")).toEqual(["pod", "pod=loki-1"]);
    const chunk = { from: 1n, through: 2n, checksum: 3 };
    const prefix = chunkPrefix(chunk);
    const [name, pair] = chunkTokens(chunk, "pod", "loki-1");
    expect(Buffer.from(name.subarray(20)).toString()).toBe("pod");
    expect(Buffer.from(pair.subarray(20)).toString()).toBe("pod=loki-1");
    expect(hex(name.subarray(0, 20))).toBe(hex(prefix));
  });

  it.each([
    [{ from: 0n, through: 0n, checksum: 0 }, "0000000000000000" + "0000000000000000" + "00000000"],
    [
      { from: 1n, through: 256n, checksum: 0xdeadbeef },
      "0000000000000001" + "0000000000000100" + "deadbeef",
    ],
    [
      { from: -1n, through: 2n ** 62n, checksum: 1 },
      "ffffffffffffffff" + "4000000000000000" + "00000001",
    ],
  ])("prefix %# is big-endian from, through, checksum", (chunk, expected) => {
    expect(hex(chunkPrefix(chunk))).toBe(expected);
  });

  it("encodes the token after the prefix as UTF-8", () => {
    const token = prefixToken(new Uint8Array([9]), "é=✓");
    expect(hex(token)).toBe("09" + Buffer.from("é=✓").toString("hex"));
  });
});

describe("lineNgrams", () => {
  it.each([
    ["abcdef", 3, 0, ["abc", "bcd", "cde", "def"]],
    ["abcdef", 3, 1, ["abc", "cde"]],
    ["abcdefg", 3, 1, ["abc", "cde", "efg"]],
    ["abcdef", 4, 2, ["abcd"]],
    ["ab", 3, 0, []],
    ["", 1, 0, []],
    ["a😀bc", 2, 0, ["a😀", "😀b", "bc"]],
    ["😀😀😀", 2, 1, ["😀😀"]],
    ["a\uD800b", 2, 0, ["a\uD800", "\uD800b"]],
  ])("%j n=%d skip=%d", (line, length, skip, expected) => {
    expect(lineNgrams(line, { length, skip })).toEqual(expected);
  });

  it.each([
    [0, 0],
    [3, -1],
    [1.5, 0],
    [65, 0],
  ])("rejects n=%d skip=%d", (length, skip) => {
    expect(() => lineNgrams("abc", { length, skip })).toThrow(IndexError);
  });
});

describe("literalNgrams (the read side of the one tokenizer)", () => {
  it.each([
    ["abcdef", 3, 0, [["abc", "bcd", "cde", "def"]]],
    // Loki's orTest example: n=3, skip=1, "foobar" → ("foo" && "oba") || ("oob" && "bar").
    [
      "foobar",
      3,
      1,
      [
        ["foo", "oba"],
        ["oob", "bar"],
      ],
    ],
    ["a😀bc", 2, 1, [["a😀", "bc"], ["😀b"]]],
    ["abcd", 3, 2, undefined],
    ["ab", 3, 0, undefined],
    ["x\uD800y", 2, 0, undefined],
    ["\uDE00abc", 2, 0, undefined],
  ])("%j n=%d skip=%d", (literal, length, skip, expected) => {
    expect(literalNgrams(literal, { length, skip })).toEqual(expected);
  });

  // Code points from several planes, and lone surrogates, which a line may hold.
  const unit = fc.constantFrom("a", "b", "c", " ", "é", "✓", "😀", "𝄞", "\uD800", "\uDC00");
  it("every n-gram list a substring of a line offers is whole in the line's tokens, for one offset (property)", () => {
    fc.assert(
      fc.property(
        fc.array(unit, { maxLength: 40 }),
        fc.integer({ min: 3, max: 8 }),
        fc.integer({ min: 0, max: 3 }),
        fc.nat(),
        fc.nat(),
        (points, length, skip, a, b) => {
          const line = points.join("");
          const written = new Set<string>();
          forEachNgram(line, { length, skip }, (gram) => written.add(gram));
          // A substring by UTF-16 units, as `|=` matches: it may cut a pair.
          const start = line.length === 0 ? 0 : a % line.length;
          const literal = line.slice(start, start + (b % (line.length - start + 1)));
          const lists = literalNgrams(literal, { length, skip });
          if (lists === undefined) return;
          expect(lists).toHaveLength(skip + 1);
          for (const list of lists) expect(list.length).toBeGreaterThan(0);
          expect(lists.some((list) => list.every((gram) => written.has(gram)))).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });
});
