import { describe, expect, it } from "vitest";
import {
  fingerprint,
  fingerprintKey,
  labelsFromObject,
  labelsString,
  partitionOf,
} from "./canonical.js";
import { parseLabels } from "./parse.js";
import { quoteGo } from "./quote.js";

describe("quoteGo", () => {
  // Expected strings are Go's strconv.Quote output for the same inputs.
  it.each([
    ["plain", '"plain"'],
    ["", '""'],
    ['a"b\\c', '"a\\"b\\\\c"'],
    ["\x07\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"'],
    ["\x00\x1b\x7f", '"\\x00\\x1b\\x7f"'],
    ["héllo ✓ 😀", '"héllo ✓ 😀"'],
    ["\u00a0\u200b", '"\\u00a0\\u200b"'],
    ["\u{e0001}", '"\\U000e0001"'],
  ])("%j → %s", (input, quoted) => {
    expect(quoteGo(input)).toBe(quoted);
  });
});

describe("labelsString", () => {
  it.each([
    ['{b="2", a="1"}', '{a="1", b="2"}'],
    ['{ "app" = "x" ,job="y\\n"}', '{app="x", job="y\\n"}'],
    ["{}", "{}"],
  ])("canonical form of %s is %s", (input, canonical) => {
    expect(labelsString(parseLabels(input))).toBe(canonical);
  });

  it("is the same for a JSON stream object and the selector string", () => {
    expect(labelsString(labelsFromObject({ job: "x", app: "y", empty: "" }))).toBe(
      labelsString(parseLabels('{app="y",job="x"}')),
    );
  });
});

describe("fingerprint", () => {
  // XXH64 reference values (seed 0) from the xxHash reference implementation.
  it.each([
    ["", 0xef46db3751d8e999n],
    ["abc", 0x44bc2cf5ad770999n],
  ])("xxhash64(%j)", (input, hash) => {
    expect(fingerprint(input)).toBe(hash);
  });

  it("does not depend on label order or spacing", () => {
    const a = fingerprint(labelsString(parseLabels('{a="1", b="2"}')));
    const b = fingerprint(labelsString(parseLabels('{ b = "2",a="1" }')));
    expect(a).toBe(b);
    expect(fingerprint(labelsString(parseLabels('{a="1", b="3"}')))).not.toBe(a);
  });

  it("key is 8 bytes big-endian", () => {
    expect([...fingerprintKey(0x0102030405060708n)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect([...fingerprintKey(0xffffffffffffffffn)]).toEqual(new Array(8).fill(255));
    expect(() => fingerprintKey(-1n)).toThrow(/invalid fingerprint/);
    expect(() => fingerprintKey(1n << 64n)).toThrow(/invalid fingerprint/);
  });

  it.each([
    [0n, 4, 0],
    [7n, 4, 3],
    [0xffffffffffffffffn, 16, 15],
    [0xffffffffffffffffn, 3, Number(0xffffffffffffffffn % 3n)],
  ])("partitionOf(%s, %i) = %i", (fp, partitions, partition) => {
    expect(partitionOf(fp, partitions)).toBe(partition);
  });
});
