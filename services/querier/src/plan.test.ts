import type { IndexedSeries } from "@sieve/index";
import { matchesLabels, type Matcher } from "@sieve/logql";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LoadedSegment } from "./context.js";
import { seriesMatching } from "./plan.js";

const NAMES = ["app", "env", "pod"];
const VALUES = ["", "a", "b", "c"];

/** A label set over a small alphabet: equal values across series are common. */
const labelsArb = fc
  .subarray(NAMES)
  .chain((names) =>
    fc
      .tuple(...names.map(() => fc.constantFrom(...VALUES.slice(1))))
      .map((values) => Object.fromEntries(names.map((n, i) => [n, values[i]!]))),
  );

const matcherArb: fc.Arbitrary<Matcher> = fc.record({
  name: fc.constantFrom(...NAMES, "absent"),
  op: fc.constantFrom("=", "!=", "=~", "!~"),
  value: fc.constantFrom(...VALUES, "a|b", ".+", ".*"),
});

function segmentOf(labels: readonly Record<string, string>[]): LoadedSegment {
  const series: IndexedSeries[] = labels.map((l, i) => ({
    fingerprint: BigInt(i),
    labels: JSON.stringify(l),
    chunks: [],
  }));
  return { series, labels, bytes: 0 };
}

describe("seriesMatching", () => {
  it("answers the series some selector matches, in order, as testing each series does", () => {
    fc.assert(
      fc.property(
        fc.array(labelsArb, { maxLength: 30 }),
        fc.array(fc.array(matcherArb, { minLength: 1, maxLength: 3 }), {
          minLength: 1,
          maxLength: 3,
        }),
        (labels, selectors) => {
          const segment = segmentOf(labels);
          const expected = segment.series.filter((_, i) =>
            selectors.some((m) => matchesLabels(m, labels[i]!)),
          );
          expect(seriesMatching(segment, selectors)).toEqual(expected);
          // Asked again, from the postings made by the first call.
          expect(seriesMatching(segment, selectors)).toEqual(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("tests only the series an equality matcher names", () => {
    const labels = Array.from({ length: 500 }, (_, i) => ({ service: `svc-${i % 50}` }));
    const segment = segmentOf(labels);
    const tested: Record<string, string>[] = [];
    // Each label record counts the matchers' reads of it.
    segment.labels.forEach((l, i) => {
      Object.defineProperty(l, "service", {
        get: () => {
          tested.push(labels[i]!);
          return `svc-${i % 50}`;
        },
        enumerable: true,
      });
    });
    seriesMatching(segment, [[{ name: "service", op: "=", value: "svc-3" }]]); // postings made
    tested.length = 0;
    const got = seriesMatching(segment, [[{ name: "service", op: "=", value: "svc-3" }]]);
    expect(got).toHaveLength(10);
    expect(tested).toHaveLength(10);
  });
});
