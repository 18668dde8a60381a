import type { Entry } from "@sieve/chunk";
import { extractBloomTests, parseExpr, type BloomTest } from "@sieve/logql";
import { describe, expect, test } from "vitest";
import { ChunkAudit, testedPart } from "./audit.js";

const tests = (q: string): BloomTest => extractBloomTests(parseExpr(q));
const GRAMS = { length: 4, skip: 0 };

describe("testedPart: what a bloom evaluated of the query's test", () => {
  test.each<[string, boolean, string]>([
    // query, bloom has 4-grams, the part it tested (as the test of this query)
    ['{a="b"} | t="x"', false, '{a="b"} | t="x"'],
    ['{a="b"} |= "needle"', true, '{a="b"} |= "needle"'],
    ['{a="b"} |= "needle"', false, '{a="b"}'],
    ['{a="b"} |= "abc"', true, '{a="b"}'], // shorter than the n-grams: untestable
    ['{a="b"} |= "needle" | t="x"', false, '{a="b"} | t="x"'],
    ['{a="b"} |= "needle" | t="x"', true, '{a="b"} |= "needle" | t="x"'],
    ['{a="b"} |= "needle" or "abc"', true, '{a="b"}'],
    ['{a="b"} | t="x" or u="y"', false, '{a="b"} | t="x" or u="y"'],
  ])("%s (n-grams: %s) → %s", (query, ngrams, tested) => {
    expect(testedPart(tests(query), ngrams ? GRAMS : undefined)).toEqual(tests(tested));
  });

  test.each<[string, boolean, boolean, string]>([
    // query, the bloom holds name tokens, name=value tokens, the part it tested
    ['{a="b"} | t="x"', true, false, '{a="b"} | t=~".+"'],
    ['{a="b"} | t="x"', false, true, '{a="b"} | t="x"'],
    ['{a="b"} | t="x"', false, false, '{a="b"}'],
    ['{a="b"} | t=~".+"', false, true, '{a="b"}'],
    ['{a="b"} | t="x" or u=~".+"', true, false, '{a="b"} | t=~".+" or u=~".+"'],
    ['{a="b"} | t="x" or u=~".+"', false, true, '{a="b"}'],
  ])("%s (names: %s, pairs: %s) → %s", (query, keys, values, tested) => {
    expect(testedPart(tests(query), undefined, { keys, values })).toEqual(tests(tested));
  });
});

describe("ChunkAudit", () => {
  const entry = (line: string, md: Record<string, string> = {}): Entry => ({
    timestamp: 0n,
    line,
    structuredMetadata: Object.entries(md).map(([name, value]) => ({ name, value })),
  });

  test("an entry satisfies the test by its metadata, its line, or a stream label", () => {
    const audit = new ChunkAudit(tests('{a="b"} |= "needle" | t="x"'), { a: "b" });
    audit.see(entry("a needle here", { t: "y" }));
    audit.see(entry("nothing", { t: "x" }));
    expect(audit.found).toBe(false);
    audit.see(entry("the needle", { u: "1", t: "x" }));
    expect(audit.found).toBe(true);
    // A leaf on a stream label's name holds, as it does for the bloom.
    const onLabel = new ChunkAudit(tests('{a="b"} | a="c"'), { a: "b" });
    onLabel.see(entry("x"));
    expect(onLabel.found).toBe(true);
  });
});
