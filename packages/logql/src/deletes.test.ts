import { describe, expect, test } from "vitest";
import { DeleteFilter, parseDeleteQuery } from "./deletes.js";

const S = 1_000_000_000n;
const entry = (ts: bigint, line: string, md: Record<string, string> = {}) => ({
  timestamp: ts,
  line,
  structuredMetadata: Object.entries(md).map(([name, value]) => ({ name, value })),
});

describe("DeleteFilter (Loki's deleteRequest.FilterFunction)", () => {
  const filter = DeleteFilter.compile([
    { query: '{app="api"} |= "secret"', start: 10n * S, end: 20n * S },
    { query: '{app="db", env=~"prod|stage"}', start: 100n * S, end: 200n * S },
    { query: '{app="web"} | logfmt | user="bob"', start: 0n, end: 1000n * S },
    { query: '{app="meta"} | trace_id="abc"', start: 0n, end: 1000n * S },
  ])!;

  test.each([
    // [labels, ts, line, metadata, deleted]
    [{ app: "api" }, 15n * S, "a secret here", {}, true],
    [{ app: "api" }, 15n * S, "nothing to see", {}, false],
    // Both ends inclusive, as Loki's ts.Before(start) || ts.After(end) keeps neither out.
    [{ app: "api" }, 10n * S, "secret", {}, true],
    [{ app: "api" }, 20n * S, "secret", {}, true],
    [{ app: "api" }, 20n * S + 1n, "secret", {}, false],
    [{ app: "api" }, 10n * S - 1n, "secret", {}, false],
    // No line filter: every line of the stream in range.
    [{ app: "db", env: "prod" }, 150n * S, "anything", {}, true],
    [{ app: "db", env: "dev" }, 150n * S, "anything", {}, false],
    // A parser and a label filter: the whole pipeline decides.
    [{ app: "web" }, 5n * S, "user=bob msg=hi", {}, true],
    [{ app: "web" }, 5n * S, "user=alice msg=hi", {}, false],
    // Structured metadata filters.
    [{ app: "meta" }, 5n * S, "x", { trace_id: "abc" }, true],
    [{ app: "meta" }, 5n * S, "x", { trace_id: "abd" }, false],
  ])("%j at %s: %s → %s", (labels, ts, line, md, deleted) => {
    expect(filter.forStream(labels)?.(entry(ts, line, md)) ?? false).toBe(deleted);
  });

  test("a stream no request selects has no test at all (no cost)", () => {
    expect(filter.forStream({ app: "other" })).toBeUndefined();
    const labels = { app: "api" };
    expect(filter.forStream(labels)).toBe(filter.forStream(labels));
  });

  test("only the requests overlapping a range are compiled; none gives undefined", () => {
    expect(DeleteFilter.compile([])).toBeUndefined();
    const specs = [{ query: '{a="b"}', start: 10n, end: 20n }];
    expect(DeleteFilter.compile(specs, 21n, 30n)).toBeUndefined();
    expect(DeleteFilter.compile(specs, 0n, 9n)).toBeUndefined();
    expect(DeleteFilter.compile(specs, 20n, 30n)?.start).toBe(10n);
  });

  test("a metric query or bad syntax is not a delete query", () => {
    expect(() => parseDeleteQuery('count_over_time({a="b"}[1m])')).toThrow("not a log selector");
    expect(() => parseDeleteQuery("{a=")).toThrow();
  });
});
