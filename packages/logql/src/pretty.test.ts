import { describe, expect, it } from "vitest";
import { parseExpr } from "./index.js";
import { MAX_CHARS_PER_LINE, prettyExpr } from "./pretty.js";
import { printExpr } from "./printer.js";

const LONG_SELECTOR =
  '{app="checkout", namespace="production", cluster="eu-west-1", container="api"}';

describe("prettyExpr (Loki's Prettify layout)", () => {
  it.each<[string, string]>([
    // Short: one line, the printer's canonical text.
    ['{app="api"}|="x"|json', '{app="api"} |= "x" | json'],
    ['sum by(app)(rate({app="api"}[5m]))', 'sum by (app) (rate({app="api"} [5m]))'],
    // A long pipeline: each stage on its own line; the run of line filters is one stage.
    [
      `${LONG_SELECTOR} |= "error" != "timeout" | logfmt | level="error"`,
      [LONG_SELECTOR, '  |= "error" != "timeout"', "  | logfmt", '  | level="error"'].join("\n"),
    ],
    // A long range aggregation inside a vector aggregation.
    [
      `topk(5, sum by (pod) (count_over_time(${LONG_SELECTOR} | json [5m])))`,
      [
        "topk(",
        "  5,",
        "  sum by (pod)(",
        "    count_over_time(",
        // The log query fits in 100 characters: one line, the range after it.
        `      ${LONG_SELECTOR} | json [5m]`,
        "    )",
        "  )",
        ")",
      ].join("\n"),
    ],
    // A long binary operation: the operator on its own line.
    [
      `sum(rate(${LONG_SELECTOR}[1m])) / on (app) group_left sum(rate({app="x"}[1m]))`,
      [
        // Each operand fits in 100 characters: one line each.
        `  sum(rate(${LONG_SELECTOR} [1m]))`,
        "/ on (app) group_left",
        '  sum(rate({app="x"} [1m]))',
      ].join("\n"),
    ],
    // unwrap goes to its own line, the range after it.
    [
      `sum_over_time(${LONG_SELECTOR} | logfmt | unwrap bytes(size) | __error__="" [5m])`,
      [
        "sum_over_time(",
        `  ${LONG_SELECTOR} | logfmt`,
        "    | unwrap bytes(size)",
        '    | __error__="" [5m]',
        ")",
      ].join("\n"),
    ],
  ])("%s", (query, pretty) => {
    expect(prettyExpr(parseExpr(query))).toBe(pretty);
  });

  it.each([
    `${LONG_SELECTOR} |= "a" |= "b" | json | line_format "{{.msg}}" | label_format x=y | drop a, b`,
    `(sum(rate(${LONG_SELECTOR}[1m])) + sum(rate(${LONG_SELECTOR}[1m]))) * 2`,
    `label_replace(sum by (pod) (rate(${LONG_SELECTOR}[1m])), "dst", "v", "pod", "(.*)")`,
    `quantile_over_time(0.99, ${LONG_SELECTOR} | json | unwrap duration(took) [5m]) by (pod) > bool 1`,
    `count_over_time(${LONG_SELECTOR} [5m] offset 1h) ^ 2 ^ count_over_time(${LONG_SELECTOR} [5m])`,
  ])("parses back to the same tree: %s", (query) => {
    const e = parseExpr(query);
    const pretty = prettyExpr(e);
    expect(pretty).toContain("\n");
    expect(printExpr(parseExpr(pretty))).toBe(printExpr(e));
    for (const line of pretty.split("\n")) {
      expect(line.trimEnd()).toBe(line); // no trailing spaces
    }
  });

  it("keeps a query of exactly the limit on one line", () => {
    const pad = "x".repeat(MAX_CHARS_PER_LINE - '{app=""}'.length);
    expect(prettyExpr(parseExpr(`{app="${pad}"}`))).toBe(`{app="${pad}"}`);
  });
});
