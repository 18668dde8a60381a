import { parseLabels } from "@sieve/labels";
import { describe, expect, test } from "vitest";
import {
  VolumeAccumulator,
  VolumeCellsError,
  VolumeLimitError,
  bucketFactor,
  volumeBuckets,
  type VolumeSpec,
} from "./volume.js";

const S = 1_000_000_000n;
const MS = 1_000_000n;

const spec = (over: Partial<VolumeSpec> = {}): VolumeSpec => ({
  start: 1000n * S,
  end: 1100n * S,
  step: 0n,
  aggregateBy: "series",
  targetLabels: [],
  matcherNames: [],
  maxSeries: 1000,
  ...over,
});

describe("volumeBuckets: Loki's ForInterval, half-open at ns", () => {
  test.each<[string, bigint, bigint, bigint, [bigint, bigint, number][]]>([
    [
      "no step: one bucket, sampled at end",
      1000n * S,
      1100n * S,
      0n,
      [[1000n * S, 1100n * S, 1100]],
    ],
    [
      "aligned to the step since the epoch, first from start, last to end",
      1000n * S,
      1100n * S,
      30n * S,
      [
        [1000n * S, 1020n * S, 1019.999],
        [1020n * S, 1050n * S, 1049.999],
        [1050n * S, 1080n * S, 1079.999],
        [1080n * S, 1100n * S, 1100],
      ],
    ],
    [
      "a step past the range: one bucket",
      1000n * S,
      1100n * S,
      500n * S,
      [[1000n * S, 1100n * S, 1100]],
    ],
    [
      "an end on a step boundary",
      1000n * S,
      1060n * S,
      30n * S,
      [
        [1000n * S, 1020n * S, 1019.999],
        [1020n * S, 1050n * S, 1049.999],
        [1050n * S, 1060n * S, 1060],
      ],
    ],
  ])("%s", (_, start, end, step, want) => {
    expect(volumeBuckets(start, end, step).map((b) => [b.from, b.through, b.at])).toEqual(want);
  });

  test("buckets tile the range", () => {
    const bs = volumeBuckets(7n * S + 3n, 1000n * S + 5n, 7n * S);
    expect(bs[0]!.from).toBe(7n * S + 3n);
    expect(bs.at(-1)!.through).toBe(1000n * S + 5n);
    for (let i = 1; i < bs.length; i++) expect(bs[i]!.from).toBe(bs[i - 1]!.through);
  });
});

describe("bucketFactor: Loki's GetFactorOfTime", () => {
  const b = { from: 10n, through: 20n, at: 0 };
  test.each<[string, bigint, bigint, boolean, number]>([
    ["inside", 12n, 18n, false, 1],
    ["half on the left", 5n, 15n, false, 0.5],
    ["half on the right", 15n, 25n, false, 0.5],
    ["around", 0n, 40n, false, 0.25],
    ["outside", 30n, 40n, false, 0],
    ["an instant inside", 10n, 10n, false, 1],
    ["an instant at the exclusive end", 20n, 20n, false, 0],
    ["an instant at the last bucket's end", 20n, 20n, true, 1],
  ])("%s", (_, from, through, last, want) => {
    expect(bucketFactor(b, last, from, through)).toBe(want);
  });
});

const L = (s: string) => parseLabels(s);

describe("VolumeAccumulator: names, as Loki's ingester names them", () => {
  test("series: by the labels the matchers name; all labels when they name none", () => {
    const named = new VolumeAccumulator(spec({ matcherNames: ["app"] }));
    expect(named.namesOf(L('{app="api", pod="a"}'))).toEqual(['{app="api"}']);
    const all = new VolumeAccumulator(spec());
    expect(all.namesOf(L('{app="api", pod="a"}'))).toEqual(['{app="api", pod="a"}']);
  });

  test("series with target labels: named by them; a series lacking one does not count", () => {
    const acc = new VolumeAccumulator(
      spec({ targetLabels: ["pod", "app"], matcherNames: ["env"] }),
    );
    expect(acc.namesOf(L('{app="api", env="prod", pod="a"}'))).toEqual(['{app="api", pod="a"}']);
    expect(acc.namesOf(L('{app="api", env="prod"}'))).toBeUndefined();
  });

  test('a target label the matchers name is not required (Loki adds =~".+" for the others)', () => {
    const acc = new VolumeAccumulator(spec({ targetLabels: ["pod"], matcherNames: ["pod"] }));
    expect(acc.namesOf(L('{app="api"}'))).toEqual(["{}"]);
    expect(acc.namesOf(L('{app="api", pod="b"}'))).toEqual(['{pod="b"}']);
  });

  test("labels: every label of the series, or only the target labels", () => {
    const all = new VolumeAccumulator(spec({ aggregateBy: "labels", matcherNames: ["app"] }));
    expect(all.namesOf(L('{app="api", pod="a"}'))).toEqual(["app", "pod"]);
    const some = new VolumeAccumulator(spec({ aggregateBy: "labels", targetLabels: ["pod"] }));
    expect(some.namesOf(L('{app="api", pod="a"}'))).toEqual(["pod"]);
    expect(some.namesOf(L('{app="api"}'))).toBeUndefined();
  });
});

describe("VolumeAccumulator: bytes", () => {
  test("whole chunks in range count whole; a chunk half in range, half", () => {
    const acc = new VolumeAccumulator(spec());
    acc.addChunk(["a"], 1010n * S, 1020n * S, 1000);
    acc.addChunk(["a"], 1030n * S, 1030n * S, 7);
    acc.addChunk(["b"], 1090n * S, 1110n * S, 300);
    acc.addChunk(["c"], 1200n * S, 1300n * S, 5000);
    expect(acc.entries()).toEqual([
      { name: "a", bucket: 0, bytes: 1007 },
      { name: "b", bucket: 0, bytes: 150 },
    ]);
  });

  test("a chunk over several buckets is shared by time, its parts floored", () => {
    const acc = new VolumeAccumulator(spec({ step: 30n * S }));
    // 1010..1060 s: 10 s in [1000,1020), 30 s in [1020,1050), 10 s in [1050,1080).
    acc.addChunk(["a"], 1010n * S, 1060n * S, 1001);
    expect(acc.entries()).toEqual([
      { name: "a", bucket: 0, bytes: 200 },
      { name: "a", bucket: 1, bytes: 600 },
      { name: "a", bucket: 2, bytes: 200 },
    ]);
  });

  test("top: each bucket's largest `limit`, bytes descending then name", () => {
    const acc = new VolumeAccumulator(spec({ step: 50n * S }));
    acc.add("x", 0, 5);
    acc.add("b", 0, 9);
    acc.add("a", 0, 9);
    acc.add("x", 1, 100);
    acc.add("a", 1, 1);
    expect(acc.top(2)).toEqual([
      {
        name: "a",
        samples: [
          { at: 1049.999, bytes: 9 },
          { at: 1100, bytes: 1 },
        ],
      },
      { name: "b", samples: [{ at: 1049.999, bytes: 9 }] },
      { name: "x", samples: [{ at: 1100, bytes: 100 }] },
    ]);
    // A merged answer adds to what is there.
    acc.add("x", 1, 1);
    expect(acc.top(1)).toEqual([
      { name: "a", samples: [{ at: 1049.999, bytes: 9 }] },
      { name: "x", samples: [{ at: 1100, bytes: 101 }] },
    ]);
  });

  test("past maxSeries names: refused in Loki's words", () => {
    const acc = new VolumeAccumulator(spec({ maxSeries: 2 }));
    acc.addChunk(["a", "b"], 1010n * S, 1010n * S, 1);
    acc.add("a", 0, 1);
    expect(() => {
      acc.add("c", 0, 1);
    }).toThrow(VolumeLimitError);
    expect(() => {
      acc.add("c", 0, 1);
    }).toThrow("the query hit the max number of series limit (limit: 2 series)");
  });

  test("past maxCells (name, bucket) values: refused, the accumulator's memory bounded", () => {
    const acc = new VolumeAccumulator(spec({ step: 10n * S, maxCells: 3 }));
    acc.addChunk(["a"], 1000n * S, 1025n * S, 100);
    expect(acc.cells).toBe(3);
    acc.add("a", 0, 1);
    expect(() => {
      acc.add("b", 0, 1);
    }).toThrow(VolumeCellsError);
  });

  test("ms granularity of sample times: a bucket ends 1 ms before the next", () => {
    const bs = volumeBuckets(0n, 10n * S, 2n * S);
    expect(bs.map((b) => b.at)).toEqual([1.999, 3.999, 5.999, 7.999, 10]);
    expect(bs[0]!.through - MS).toBe(2n * S - MS);
  });
});
