import { parseExpr } from "@sieve/logql";
import type { LogExpr } from "@sieve/logql";
import { describe, expect, it } from "vitest";
import { PatternStore, mergePatterns, queryPatterns, sweepPatterns } from "./patterns.js";

const MIN_NS = 60_000_000_000n;
const matchers = (selector: string) => (parseExpr(selector) as LogExpr).matchers;
const level = (value: string) => [{ name: "detected_level", value }];

function store(): PatternStore {
  return new PatternStore({ maxClusters: 300, maxBuckets: 1081, bucketMs: 10_000 });
}

describe("patterns of an ingester's streams", () => {
  it("learns by stream and level, and merges equal patterns of several streams", () => {
    const s = store();
    const a = s.stream("t", "a", '{app="x", pod="a"}', { app: "x", pod: "a" });
    const b = s.stream("t", "b", '{app="x", pod="b"}', { app: "x", pod: "b" });
    const other = s.stream("u", "c", '{app="x"}', { app: "x" });
    for (let i = 0; i < 6; i++) {
      const ts = BigInt(i) * 20_000_000_000n; // every 20 s: 3 a minute
      a.train(`level=info msg="served" id=${i} took=${i}ms`, ts, level("info"), 0);
      b.train(`level=info msg="served" id=${i + 100} took=${i}ms`, ts, level("info"), 0);
      a.train(`level=error msg="failed" id=${i} took=${i}ms`, ts, [], 0);
      other.train(`level=info msg="served" id=${i} took=${i}ms`, ts, level("info"), 0);
    }
    const req = { start: 0n, end: 2n * MIN_NS, stepMs: 60_000 };
    expect(queryPatterns(s.tenantStreams("t"), matchers('{app="x"}'), req)).toEqual([
      {
        pattern: "level=error msg=failed id=<_> took=<_>",
        level: "unknown",
        samples: [
          [0, 3],
          [60, 3],
        ],
      },
      {
        pattern: "level=info msg=served id=<_> took=<_>",
        level: "info",
        samples: [
          [0, 6],
          [60, 6],
        ],
      },
    ]);
    expect(queryPatterns(s.tenantStreams("t"), matchers('{pod="b"}'), req)).toEqual([
      {
        pattern: "level=info msg=served id=<_> took=<_>",
        level: "info",
        samples: [
          [0, 3],
          [60, 3],
        ],
      },
    ]);
    // [start, end) cuts the second minute away.
    expect(
      queryPatterns(s.tenantStreams("t"), matchers('{pod="b"}'), { ...req, end: MIN_NS }),
    ).toEqual([
      { pattern: "level=info msg=served id=<_> took=<_>", level: "info", samples: [[0, 3]] },
    ]);
  });

  it("refuses more patterns than maxSeries", () => {
    const s = store();
    const a = s.stream("t", "a", '{app="x"}', { app: "x" });
    a.train("first kind of line here", 0n, [], 0);
    a.train("other sort of thing there", 0n, [], 0);
    const req = { start: 0n, end: MIN_NS, stepMs: 60_000 };
    expect(queryPatterns(s.tenantStreams("t"), matchers('{app="x"}'), req, 2)).toHaveLength(2);
    expect(() => queryPatterns(s.tenantStreams("t"), matchers('{app="x"}'), req, 1)).toThrow(
      "more than 1 patterns",
    );
  });

  it("mergePatterns adds counts step by step and sorts by pattern, then level", () => {
    expect(
      mergePatterns([
        [
          {
            pattern: "b",
            level: "info",
            samples: [
              [0, 1],
              [10, 2],
            ],
          },
        ],
        [
          {
            pattern: "b",
            level: "info",
            samples: [
              [10, 3],
              [20, 1],
            ],
          },
          { pattern: "a", level: "warn", samples: [[0, 1]] },
          { pattern: "a", level: "error", samples: [[0, 5]] },
        ],
      ]),
    ).toEqual([
      { pattern: "a", level: "error", samples: [[0, 5]] },
      { pattern: "a", level: "warn", samples: [[0, 1]] },
      {
        pattern: "b",
        level: "info",
        samples: [
          [0, 1],
          [10, 5],
          [20, 1],
        ],
      },
    ]);
  });

  it("the sweep drops what is past retention, then the least recently learning streams past the budget", () => {
    const s = store();
    const old = s.stream("t", "old", '{a="1"}', { a: "1" });
    old.train("one line of four words", 0n, [], 1_000);
    const quiet = s.stream("t", "quiet", '{a="2"}', { a: "2" });
    const busy = s.stream("t", "busy", '{a="3"}', { a: "3" });
    for (let i = 0; i < 50; i++) {
      const ts = BigInt(3_600_000 + i * 10_000) * 1_000_000n;
      quiet.train(`quiet line number ${"q".repeat(i % 7)} x${i}`, ts, [], 2_000);
      busy.train(`busy line ${"b".repeat(i + 1)} now`, ts, [], 3_000 + i);
    }
    // Past retention: the stream learned at time 0 has nothing left and goes.
    const kept = sweepPatterns([s], 60_000, 1 << 30);
    expect(kept.streams).toBe(2);
    expect([...s.all()].map((e) => e.key)).toEqual(["quiet", "busy"]);
    // Past the budget: the stream that learned least recently goes first.
    const bytes = kept.bytes;
    const tight = sweepPatterns([s], 60_000, Math.floor(bytes * 0.9));
    expect(tight.evictedStreams).toBeGreaterThanOrEqual(1);
    expect([...s.all()].map((e) => e.key)).not.toContain("quiet");
    expect(tight.bytes).toBeLessThanOrEqual(bytes * 0.9 * 0.75 + 1);
    expect(s.skipped.too_few_tokens).toBe(0);
  });

  it("a stream whose patterns were dropped while it lives is put back by its next line", () => {
    const s = store();
    const p = s.stream("t", "k", '{a="1"}', { a: "1" });
    p.train("one line of four words", 0n, [], 0);
    sweepPatterns([s], 60_000, 1 << 30); // nothing left in retention: dropped
    expect([...s.all()]).toHaveLength(0);
    p.train("one line of four words", 120_000_000_000n, [], 0);
    expect([...s.all()].map((e) => e.key)).toEqual(["k"]);
    const req = { start: 0n, end: 3n * MIN_NS, stepMs: 60_000 };
    expect(queryPatterns(s.tenantStreams("t"), matchers('{a="1"}'), req)).toEqual([
      { pattern: "one line of four words", level: "unknown", samples: [[120, 1]] },
    ]);
  });

  it("counts lines no pattern learned from, by reason", () => {
    const s = store();
    const p = s.stream("t", "k", '{a="1"}', { a: "1" });
    p.train("two words", 0n, [], 0);
    p.train("x".repeat(3001), 0n, [], 0);
    expect(s.skipped).toMatchObject({ too_few_tokens: 1, line_too_long: 1 });
  });
});
