/**
 * Fuzzing the parser: random strings, random token soups and mutations of valid queries
 * must either parse (and then print and re-parse to the same tree) or throw ParseError;
 * nothing else may escape, and nothing may hang.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ParseError } from "./errors.js";
import { parseExpr } from "./index.js";
import { printExpr } from "./printer.js";

const SEEDS = [
  '{app="foo"} |= "error" | json | status >= 500',
  'sum by (host) (rate({app="foo"} | logfmt | level="error" [5m]))',
  'quantile_over_time(0.99, {app="foo"} | json | unwrap duration(latency) | __error__="" [5m]) by (path)',
  'topk(5, sum(bytes_rate({a="b"}[1h])) by (x)) > bool 10 or vector(0)',
  '{app="foo"} | pattern "<ip> <_> <status>" | line_format "{{.ip | ToUpper}}" | label_format a=b',
  'label_replace(rate({app="foo"}[5m]), "dst", "$1", "src", "(.*)") * on(a) group_left(b) vector(1)',
  '{app="foo"} |~ "a|b" or "c" | drop x, y="z" | keep a | size > 1KiB and d < 1s, (e="1" or f!~"g")',
];

const TOKENS = [
  "{",
  "}",
  "(",
  ")",
  "[",
  "]",
  ",",
  "|",
  "|=",
  "!=",
  "|~",
  "!~",
  "=~",
  "=",
  "==",
  ">",
  ">=",
  "<",
  "+",
  "-",
  "*",
  "/",
  "^",
  "%",
  " ",
  '"x"',
  "`y`",
  "5m",
  "1s",
  "20MB",
  "0.5",
  "42",
  "app",
  "foo",
  "json",
  "logfmt",
  "unwrap",
  "by",
  "without",
  "on",
  "group_left",
  "bool",
  "or",
  "and",
  "unless",
  "sum",
  "rate",
  "count_over_time",
  "topk",
  "offset",
  "vector",
  "label_replace",
  "line_format",
  '"{{.a}}"',
  "pattern",
  "regexp",
  '"(?P<a>.)"',
  "ip",
  "--strict",
  "#",
  "\n",
  '"\\',
  "`",
];

function check(q: string): void {
  let tree;
  try {
    tree = parseExpr(q);
  } catch (e) {
    if (!(e instanceof ParseError)) throw e;
    expect(e.message.startsWith("parse error")).toBe(true);
    return;
  }
  expect(parseExpr(printExpr(tree))).toEqual(tree);
}

const mutate = fc
  .tuple(
    fc.constantFrom(...SEEDS),
    fc.array(
      fc.tuple(
        fc.nat(),
        fc.nat({ max: 3 }),
        fc.constantFrom(...TOKENS),
        fc.string({ maxLength: 3 }),
      ),
      { minLength: 1, maxLength: 4 },
    ),
  )
  .map(([seed, edits]) => {
    let s = seed;
    for (const [at, kind, tok, junk] of edits) {
      const i = at % (s.length + 1);
      if (kind === 0) s = s.slice(0, i) + s.slice(i + 1 + (at % 5));
      else if (kind === 1) s = s.slice(0, i) + tok + s.slice(i);
      else if (kind === 2) s = s.slice(0, i) + junk + s.slice(i);
      else s = s.slice(0, i) + s.slice(i, i + 8) + s.slice(i);
    }
    return s;
  });

describe("parser fuzz", () => {
  it("random strings only ever throw ParseError", () => {
    fc.assert(fc.property(fc.string({ maxLength: 80, unit: "binary" }), check), { numRuns: 3000 });
  });

  it("token soups only ever throw ParseError", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...TOKENS), { maxLength: 30 }).map((t) => t.join(" ")),
        check,
      ),
      { numRuns: 5000 },
    );
  });

  it("mutated valid queries only ever throw ParseError, and parse back when they parse", () => {
    fc.assert(fc.property(mutate, check), { numRuns: 5000 });
  });

  it("every seed parses", () => {
    for (const s of SEEDS) expect(() => parseExpr(s)).not.toThrow();
  });
});
