import {
  decodeSegment,
  encodeSegment,
  mergeSegments,
  type IndexSegment,
  type SegmentChunk,
} from "@sieve/index";
import { describe, expect, it } from "vitest";
import { mergeDay } from "./merge.js";

const D = 19_844;
const H = 3_600_000_000_000n;
const at = (h: number): bigint => BigInt(D) * 24n * H + BigInt(h) * H;
const chunk = (h: number, checksum: number): SegmentChunk => ({
  from: at(h),
  through: at(h) + H - 1n,
  checksum,
  bytes: 100,
  entries: 10,
  prefixed: false,
  lineBytes: 500,
});
const block = (key: string, offset = 8) => ({ kind: "block", key, offset, length: 40 }) as const;

/** Three flushes of two series, one chunk listed twice (a replayed flush). */
const flushes: IndexSegment[] = [
  {
    tenant: "t",
    day: D,
    series: [
      { fingerprint: 1n, labels: '{app="a"}', bloom: block("t/blooms/x/1"), chunks: [chunk(0, 1)] },
      {
        fingerprint: 2n,
        labels: '{app="b"}',
        bloom: block("t/blooms/x/1", 48),
        chunks: [chunk(0, 2)],
      },
    ],
  },
  {
    tenant: "t",
    day: D,
    series: [
      {
        fingerprint: 1n,
        labels: '{app="a"}',
        bloom: block("t/blooms/x/2"),
        chunks: [chunk(1, 3), chunk(2, 4)],
      },
    ],
  },
  {
    tenant: "t",
    day: D,
    series: [
      {
        fingerprint: 1n,
        labels: '{app="a"}',
        bloom: { kind: "missing", reason: "too_large" },
        chunks: [chunk(2, 4)],
      },
      { fingerprint: 2n, labels: '{app="b"}', bloom: block("t/blooms/x/3"), chunks: [chunk(5, 5)] },
    ],
  },
];

describe("mergeDay", () => {
  it("keeps every chunk once, under the bloom it was listed with, and reads as the inputs read", () => {
    const merged = mergeDay("t", D, flushes, () => false, 1000);
    expect(merged.segments).toHaveLength(1);
    expect(merged.listingsIn).toBe(6);
    expect(merged.chunksOut).toBe(5);
    const decoded = decodeSegment(encodeSegment(merged.segments[0]!));
    const range = [at(0), at(24)] as const;
    expect(mergeSegments("t", [decoded], ...range)).toEqual(mergeSegments("t", flushes, ...range));
    // The bloom wins over the missing listing of the replayed chunk.
    const a = decoded.series.filter((s) => s.fingerprint === 1n);
    expect(a.map((s) => s.bloom)).toEqual([block("t/blooms/x/1"), block("t/blooms/x/2")]);
  });

  it("leaves out expired chunks and names their objects", () => {
    const merged = mergeDay(
      "t",
      D,
      flushes,
      (labels, c) => labels === '{app="a"}' && c.from < at(2),
      1000,
    );
    expect(merged.expired).toHaveLength(2);
    expect(merged.expired.every((k) => k.startsWith("t/chunks/0000000000000001/"))).toBe(true);
    const series = merged.segments[0]!.series;
    expect(
      series.filter((s) => s.fingerprint === 1n).flatMap((s) => s.chunks.map((c) => c.checksum)),
    ).toEqual([4]);
    const all = mergeDay("t", D, flushes, () => true, 1000);
    expect(all.segments).toEqual([]);
    expect(all.expired).toHaveLength(5);
  });

  it("splits by series past maxChunks, a series never cut in two", () => {
    const merged = mergeDay("t", D, flushes, () => false, 2);
    expect(merged.segments.map((s) => s.series.map((x) => x.fingerprint))).toEqual([
      [1n, 1n],
      [2n, 2n],
    ]);
  });
});
