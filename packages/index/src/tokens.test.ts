import { describe, expect, it } from "vitest";
import { IndexError } from "./errors.js";
import { chunkPrefix, chunkTokens, lineNgrams, prefixToken, seriesTokens } from "./tokens.js";

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
