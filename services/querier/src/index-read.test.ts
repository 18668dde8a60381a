import type { Entry } from "@sieve/chunk";
import { mergeIndexed, type IndexedSeries } from "@sieve/index";
import { matchesLabels, type Matcher } from "@sieve/logql";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG, DEFAULT_QUERY_LIMITS } from "./config.js";
import { QueryContext, type LoadedSegment, type QuerierParts } from "./context.js";
import { cachedSegment, listedSegments, readSeries, seriesMatching } from "./index-read.js";
import { Querier } from "./querier.js";
import { tempStore, writeFlush, type TestStream } from "./testdata.test-helper.js";
import type { FsObjectStore } from "@sieve/storage";

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

describe("readSeries over several segments", () => {
  const S = 1_000_000_000n;
  // An hour before midnight: flushes past it write a segment for each day, and a query
  // of one day merges other segments than a query of both.
  const T0 = BigInt(Date.UTC(2026, 10, 27, 23)) * 1_000_000n;
  let close: () => Promise<void>;
  let store: FsObjectStore;
  let parts: QuerierParts;

  /** `n` entries of `labels` a minute apart from minute `start`. */
  function stream(labels: Record<string, string>, start: number, n: number): TestStream {
    const entries: Entry[] = Array.from({ length: n }, (_, i) => ({
      timestamp: T0 + BigInt(start + i) * 60n * S,
      line: `line ${start + i}`,
      structuredMetadata: [],
    }));
    return { labels, entries };
  }

  beforeAll(async () => {
    ({ store, close } = await tempStore());
    // Six flushes from an hour before midnight into the next day: streams in several of
    // them, overlapping in time, and one flush written twice (once without blooms), so
    // that a chunk is listed twice.
    const apps = ["api", "web", "db"];
    const envs = ["prod", "dev"];
    for (let f = 0; f < 6; f++) {
      const streams = apps.flatMap((app, a) =>
        envs
          .filter((_, e) => (f + a + e) % 3 !== 0)
          .map((env) => stream({ app, env }, f * 20 + a * 3, 12)),
      );
      await writeFlush(store, "t", streams, 4);
      if (f === 2)
        await writeFlush(store, "t", streams, 4, 512, undefined, { missing: "too_large" });
    }
    parts = (new Querier({ config: DEFAULT_CONFIG, store }) as unknown as { parts: QuerierParts })
      .parts;
  });
  afterAll(() => close());

  /** What selecting in each segment and merging the selections answers. */
  async function reference(
    from: bigint,
    through: bigint,
    selectors?: readonly (readonly Matcher[])[],
  ): Promise<IndexedSeries[]> {
    const keys = await listedSegments(parts, "t", from, through);
    const chosen = [];
    for (const key of keys) {
      const segment = (await cachedSegment(parts, "t", key))!;
      chosen.push(selectors === undefined ? segment.series : seriesMatching(segment, selectors));
    }
    return mergeIndexed(chosen, from, through);
  }

  it("answers what selecting in each segment and merging the selections answers", async () => {
    const selectorArb = fc.array(
      fc.record({
        name: fc.constantFrom("app", "env"),
        op: fc.constantFrom("=", "!=", "=~"),
        value: fc.constantFrom("api", "web", "db", "prod", "dev", "api|db", ".+"),
      }),
      { minLength: 1, maxLength: 2 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(selectorArb, { minLength: 1, maxLength: 2 }),
        fc.integer({ min: -10, max: 130 }),
        fc.integer({ min: 0, max: 140 }),
        async (selectors, start, minutes) => {
          const from = T0 + BigInt(start) * 60n * S;
          const through = from + BigInt(minutes) * 60n * S;
          const ctx = new QueryContext(DEFAULT_QUERY_LIMITS);
          const got = await readSeries(parts, "t", from, through, ctx, selectors);
          expect(got).toEqual(await reference(from, through, selectors));
        },
      ),
      { numRuns: 200 },
    );
  });

  it("answers a selection asked again over other ranges as anew", async () => {
    // The selection is kept on the merged view at its first use: a range holding all its
    // chunks answers it whole, a narrower one cuts it; each as the reference.
    const selectors = [[{ name: "app", op: "=", value: "web" } as Matcher]];
    const ranges: [bigint, bigint][] = [
      [T0 - 3_600n * S, T0 + 86_400n * S],
      [T0 + 30n * 60n * S, T0 + 50n * 60n * S],
      [T0 - 3_600n * S, T0 + 86_400n * S],
      [T0 + 600n * S, T0 + 600n * S],
    ];
    for (const [from, through] of ranges) {
      const got = await readSeries(
        parts,
        "t",
        from,
        through,
        new QueryContext(DEFAULT_QUERY_LIMITS),
        selectors,
      );
      const want = await reference(from, through, selectors);
      expect(got).toEqual(want);
      expect(got.length).toBeGreaterThan(0);
    }
  });

  it("merges the same segments once, and other segments anew", async () => {
    // A querier of its own: its caches hold no merge yet.
    const fresh = new Querier({ config: DEFAULT_CONFIG, store }) as unknown as {
      parts: QuerierParts;
    };
    const read = async (from: bigint, through: bigint) => {
      const ctx = new QueryContext(DEFAULT_QUERY_LIMITS);
      return await readSeries(fresh.parts, "t", from, through, ctx);
    };
    // The first day's segments, then both days': a merge of the first day's alone would
    // miss what the second day's segments list.
    const early = await read(T0 - 3600n * S, T0 + 1800n * S);
    expect(early).toEqual(await reference(T0 - 3600n * S, T0 + 1800n * S));
    const first = await read(T0 - 3600n * S, T0 + 7200n * S);
    expect(first).toEqual(await reference(T0 - 3600n * S, T0 + 7200n * S));
    const chunks = (series: readonly IndexedSeries[]) =>
      series.reduce((n, s) => n + s.chunks.length, 0);
    expect(chunks(first)).toBeGreaterThan(chunks(early));
    // Series listed by several segments are the merge's own objects, found again.
    const second = await read(T0 - 3600n * S, T0 + 7200n * S);
    expect(second).toHaveLength(first.length);
    second.forEach((s, i) => {
      expect(s).toBe(first[i]);
    });
  });
});
