import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkKey } from "@sieve/chunk";
import { crc32c } from "@sieve/kit";
import { FsObjectStore } from "@sieve/storage";
import { afterAll, describe, expect, it } from "vitest";
import { IndexError } from "./errors.js";
import type { IndexedSeries } from "./reader.js";
import fc from "fast-check";
import {
  daysOverlapping,
  indexSegment,
  listSegments,
  mergeIndexed,
  mergeSegments,
  readIndex,
  segmentsForFlush,
} from "./reader.js";
import {
  dayOf,
  dayString,
  decodeSegment,
  encodeSegment,
  newSegmentId,
  segmentDayPrefix,
  segmentKey,
  type IndexSegment,
  type SegmentChunk,
} from "./segment.js";

const DAY = 86_400_000_000_000n;
const D = 19_844; // 2024-05-01
const at = (day: number, hours: number): bigint =>
  BigInt(day) * DAY + BigInt(hours) * 3_600_000_000_000n;

function chunkAt(from: bigint, through: bigint, checksum = 1, prefixed = false): SegmentChunk {
  return { from, through, checksum, bytes: 1000, entries: 10, prefixed };
}

const sample: IndexSegment = {
  tenant: "team-a",
  day: D,
  series: [
    {
      fingerprint: 0xfeedn,
      labels: '{app="api", env="prod"}',
      bloom: { kind: "block", key: "team-a/blooms/x", offset: 8, length: 120 },
      chunks: [chunkAt(at(D, 1), at(D, 2), 7, true), chunkAt(at(D, 2), at(D, 3), 8, true)],
    },
    {
      fingerprint: 1n,
      labels: '{app="db"}',
      bloom: { kind: "missing", reason: "too_large" },
      chunks: [chunkAt(at(D, 4), at(D, 5), 0xffffffff)],
    },
    {
      fingerprint: 2n ** 64n - 1n,
      labels: '{app="ünïcode"}',
      bloom: {
        kind: "block",
        key: "team-a/blooms/y",
        offset: 1 << 30,
        length: 4,
        ngrams: { length: 4, skip: 1 },
      },
      chunks: [chunkAt(at(D, 6), at(D, 6))],
    },
    {
      fingerprint: 5n,
      labels: '{app="names-only"}',
      bloom: {
        kind: "block",
        key: "team-a/blooms/y",
        offset: 8,
        length: 40,
        metadataTokens: { keys: true, values: false },
      },
      chunks: [chunkAt(at(D, 7), at(D, 8))],
    },
    {
      fingerprint: 6n,
      labels: '{app="ngrams-only"}',
      bloom: {
        kind: "block",
        key: "team-a/blooms/y",
        offset: 48,
        length: 40,
        ngrams: { length: 4, skip: 1 },
        metadataTokens: { keys: false, values: false },
      },
      chunks: [chunkAt(at(D, 7), at(D, 8))],
    },
  ],
};

describe("index segments", () => {
  it("round-trip, series in fingerprint order", () => {
    const decoded = decodeSegment(encodeSegment(sample));
    expect(decoded.tenant).toBe("team-a");
    expect(decoded.day).toBe(D);
    expect(decoded.series.map((s) => s.fingerprint)).toEqual([1n, 5n, 6n, 0xfeedn, 2n ** 64n - 1n]);
    expect(decoded.series[3]).toEqual(sample.series[0]);
    expect(decoded.series[0]).toEqual(sample.series[1]);
    expect(decoded.series[4]).toEqual(sample.series[2]);
    // Blooms without some metadata tokens say so (bloom kind 3); the others are as before.
    expect(decoded.series[1]).toEqual(sample.series[3]);
    expect(decoded.series[2]).toEqual(sample.series[4]);
  });

  it("writes version 3 unless a series repeats; version 4 keeps each bloom of a repeated series", () => {
    expect(encodeSegment(sample)[4]).toBe(3);
    const first = sample.series[0]!;
    const second = {
      ...first,
      bloom: { kind: "block", key: "team-a/blooms/z", offset: 16, length: 9 } as const,
      chunks: [chunkAt(at(D, 6), at(D, 7), 9, false)],
    };
    const bytes = encodeSegment({ ...sample, series: [second, ...sample.series] });
    expect(bytes[4]).toBe(4);
    const decoded = decodeSegment(bytes).series.filter((s) => s.fingerprint === 0xfeedn);
    // Stable: the order the series were given in, each with its own bloom.
    expect(decoded).toEqual([second, first]);
    // Merged, the series' chunks keep the bloom of the listing each came from.
    const merged = mergeSegments("team-a", [decodeSegment(bytes)], at(D, 0), at(D, 24));
    const api = merged.find((s) => s.fingerprint === 0xfeedn)!;
    expect(api.chunks.map((c) => [c.ref.checksum, c.bloom])).toEqual([
      [7, first.bloom],
      [8, first.bloom],
      [9, second.bloom],
    ]);
    expect(() =>
      encodeSegment({ ...sample, series: [{ ...second, labels: '{app="other"}' }, first] }),
    ).toThrow(IndexError);
    // A version 3 segment may not repeat a series: change the version byte and fix the CRC.
    const v3 = bytes.slice();
    v3[4] = 3;
    new DataView(v3.buffer).setUint32(v3.length - 4, crc32c(v3.subarray(0, v3.length - 4)), true);
    expect(() => decodeSegment(v3)).toThrow(/out of order/);
  });

  it("writes a bloom with both metadata token kinds as before (kind 1 or 2), one without as kind 3", () => {
    const one = (bloom: IndexSegment["series"][number]["bloom"]) =>
      encodeSegment({ ...sample, series: [{ ...sample.series[0]!, bloom }] });
    const base = { kind: "block", key: "k", offset: 8, length: 4 } as const;
    const plain = one(base);
    expect(one({ ...base, metadataTokens: { keys: true, values: true } })).toEqual(plain);
    const names = one({ ...base, metadataTokens: { keys: true, values: false } });
    // kind 3 adds n-gram length 0, skip 0 and the flags byte (2: no name=value tokens).
    expect(names.length).toBe(plain.length + 3);
    expect(decodeSegment(names).series[0]!.bloom).toEqual({
      ...base,
      metadataTokens: { keys: true, values: false },
    });
    // How chunk tokens are keyed is the bloom record's to say: never written here (code
    // before that flag refuses a segment with it, where a record fails only its series).
    const keyed = { ...base, metadataTokens: { keys: true, values: true, checksumKeys: true } };
    expect(one(keyed)).toEqual(plain);
    const keyedNames = {
      ...base,
      metadataTokens: { keys: true, values: false, checksumKeys: true },
    };
    expect(one(keyedNames)).toEqual(names);
  });

  it("round-trips a chunk's line bytes (version 3) beside chunks without them", () => {
    const withLines: IndexSegment = {
      ...sample,
      series: [
        {
          ...sample.series[0]!,
          chunks: [
            { ...chunkAt(at(D, 1), at(D, 2), 7, true), lineBytes: 0 },
            { ...chunkAt(at(D, 2), at(D, 3), 8), lineBytes: 2 ** 32 - 1 },
            chunkAt(at(D, 3), at(D, 4), 9),
          ],
        },
      ],
    };
    const bytes = encodeSegment(withLines);
    expect(bytes[4]).toBe(3);
    // Each chunk with line bytes adds its u32.
    expect(bytes.length).toBe(
      encodeSegment({
        ...withLines,
        series: [
          {
            ...withLines.series[0]!,
            chunks: withLines.series[0]!.chunks.map((c) => ({
              from: c.from,
              through: c.through,
              checksum: c.checksum,
              bytes: c.bytes,
              entries: c.entries,
              prefixed: c.prefixed,
            })),
          },
        ],
      }).length + 8,
    );
    const chunks = decodeSegment(bytes).series[0]!.chunks;
    expect(chunks.map((c) => c.lineBytes)).toEqual([0, 2 ** 32 - 1, undefined]);
    expect(chunks[0]!.prefixed).toBe(true);
    expect(chunks[1]!.prefixed).toBe(false);
    expect(() =>
      encodeSegment({
        ...withLines,
        series: [{ ...withLines.series[0]!, chunks: [{ ...chunkAt(1n, 2n), lineBytes: 2 ** 32 }] }],
      }),
    ).toThrow(IndexError);
  });

  it("refuses line-bytes flags in a version 2 segment", () => {
    const bytes = Buffer.from(
      encodeSegment({
        ...sample,
        series: [{ ...sample.series[2]!, chunks: [chunkAt(at(D, 6), at(D, 6))] }],
      }),
    );
    bytes[4] = 2;
    // The last chunk's flags byte sits before the checksum; set bit 1 and re-checksum.
    bytes[bytes.length - 5] = 2;
    bytes.writeUInt32LE(crc32c(bytes.subarray(0, bytes.length - 4)), bytes.length - 4);
    expect(() => decodeSegment(bytes)).toThrow(/chunk flags 2/);
  });

  it("reads a version 1 segment, as written before blooms recorded line n-grams", () => {
    const v1 = Buffer.from(
      "53564958010000000100000074844d0000010000000a000000742f626c6f6f6d732f78010000000900000000" +
        "000000070000007b613d2262227d0100000000080000000000000028000000010000000000bcaf4f34cb1700" +
        "ca56eb4f34cb17070000006400000003000000006d53a1fd",
      "hex",
    );
    expect(v1[4]).toBe(1);
    const [series] = decodeSegment(v1).series;
    expect(series!.bloom).toEqual({ kind: "block", key: "t/blooms/x", offset: 8, length: 40 });
    expect(series!.chunks[0]!.checksum).toBe(7);
  });

  it.each<[string, IndexSegment]>([
    [
      "n-grams of length 0",
      {
        ...sample,
        series: [
          {
            ...sample.series[0]!,
            bloom: {
              kind: "block",
              key: "k",
              offset: 0,
              length: 1,
              ngrams: { length: 0, skip: 0 },
            },
          },
        ],
      },
    ],
    [
      "a repeated fingerprint with other labels",
      { ...sample, series: [sample.series[0]!, { ...sample.series[0]!, labels: "{}" }] },
    ],
    ["a series without chunks", { ...sample, series: [{ ...sample.series[0]!, chunks: [] }] }],
    [
      "through before from",
      { ...sample, series: [{ ...sample.series[0]!, chunks: [chunkAt(5n, 4n)] }] },
    ],
    ["a tenant with a slash", { ...sample, tenant: "a/b" }],
    ["an empty tenant", { ...sample, tenant: "" }],
    ["a negative day", { ...sample, day: -1 }],
  ])("refuses to encode %s", (_, segment) => {
    expect(() => encodeSegment(segment)).toThrow(IndexError);
  });

  it("rejects every single-byte corruption with an IndexError", () => {
    const bytes = encodeSegment(sample);
    for (let i = 0; i < bytes.length; i++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = bytes.slice();
        bad[i]! ^= flip;
        expect(() => decodeSegment(bad), `byte ${i} ^ ${flip}`).toThrow(IndexError);
      }
    }
  });

  it("rejects every truncation and every extension with an IndexError", () => {
    const bytes = encodeSegment(sample);
    for (let length = 0; length < bytes.length; length++) {
      expect(() => decodeSegment(bytes.subarray(0, length)), `${length} bytes`).toThrow(IndexError);
    }
    const longer = new Uint8Array(bytes.length + 4);
    longer.set(bytes);
    expect(() => decodeSegment(longer)).toThrow(IndexError);
  });
});

describe("segment keys", () => {
  it("sort by day, then by creation time", () => {
    const id1 = newSegmentId("ingester-0", 1_714_521_600_000, 1);
    const id2 = newSegmentId("ingester-0", 1_714_521_600_001, 0);
    expect(segmentKey("team-a", D, id1)).toBe(
      "team-a/index/2024-05-01/001714521600000-ingester-0-00000001",
    );
    expect(
      [segmentKey("t", D + 1, id1), segmentKey("t", D, id2), segmentKey("t", D, id1)].sort(),
    ).toEqual([segmentKey("t", D, id1), segmentKey("t", D, id2), segmentKey("t", D + 1, id1)]);
  });

  it.each([
    ["a/b", "x"],
    ["t", "../x"],
    ["t", ""],
  ])("refuses tenant %j id %j", (tenant, id) => {
    expect(() => segmentKey(tenant, D, id)).toThrow(IndexError);
  });

  it("names each day as a Date does, whatever days were named before", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -1000, max: 2_932_896 }), { maxLength: 40 }),
        (days) => {
          for (const day of [...days, ...days.reverse()]) {
            expect(dayString(day)).toBe(new Date(day * 86_400_000).toISOString().slice(0, 10));
          }
        },
      ),
    );
    expect(dayString(-1)).toBe("1969-12-31");
    expect(dayString(D)).toBe("2024-05-01");
  });

  it("refuses tenants of more than 256 UTF-8 bytes", () => {
    expect(segmentDayPrefix("é".repeat(128), D)).toBe(`${"é".repeat(128)}/index/2024-05-01/`);
    expect(() => segmentDayPrefix("é".repeat(129), D)).toThrow(IndexError);
  });

  it("maps timestamps to UTC days", () => {
    expect(dayOf(0n)).toBe(0);
    expect(dayOf(DAY - 1n)).toBe(0);
    expect(dayOf(DAY)).toBe(1);
    expect(dayOf(-1n)).toBe(-1);
    expect(daysOverlapping(at(D, 23), at(D + 2, 0))).toEqual([D, D + 1, D + 2]);
    expect(() => daysOverlapping(0n, 1000n * DAY)).toThrow(IndexError);
  });
});

describe("merging segments", () => {
  const series = (fingerprint: bigint, chunks: SegmentChunk[], block = true) => ({
    fingerprint,
    labels: `{fp="${fingerprint}"}`,
    bloom: block
      ? ({ kind: "block", key: "t/blooms/1", offset: 8, length: 100 } as const)
      : ({ kind: "missing", reason: "disabled" } as const),
    chunks,
  });

  it("splits a flush by day, lists a chunk across midnight once, and filters by time", () => {
    const across = chunkAt(at(D, 23), at(D + 1, 1), 3);
    const late = chunkAt(at(D + 1, 5), at(D + 1, 6), 4);
    const segments = segmentsForFlush("t", [
      series(5n, [across, late]),
      series(6n, [chunkAt(at(D, 1), at(D, 2), 5)]),
    ]);
    expect(segments.map((s) => [s.day, s.series.map((x) => x.chunks.length)])).toEqual([
      [D, [1, 1]],
      [D + 1, [2]],
    ]);
    const all = mergeSegments("t", segments, 0n, at(D + 2, 0));
    expect(all.map((s) => [s.fingerprint, s.chunks.map((c) => c.ref.checksum)])).toEqual([
      [5n, [3, 4]],
      [6n, [5]],
    ]);
    expect(all[0]!.chunks[0]!.key).toBe(
      chunkKey({
        tenant: "t",
        fingerprint: 5n,
        from: across.from,
        through: across.through,
        checksum: 3,
      }),
    );
    const tail = mergeSegments("t", segments, at(D + 1, 2), at(D + 1, 5));
    expect(tail.map((s) => [s.fingerprint, s.chunks.map((c) => c.ref.checksum)])).toEqual([
      [5n, [4]],
    ]);
  });

  it("prefers a listing with a bloom over one without, and refuses another tenant's segment", () => {
    const c = chunkAt(at(D, 1), at(D, 2), 9);
    const without = { tenant: "t", day: D, series: [series(5n, [c], false)] };
    const withBloom = { tenant: "t", day: D, series: [series(5n, [c], true)] };
    for (const order of [
      [without, withBloom],
      [withBloom, without],
    ]) {
      const merged = mergeSegments("t", order, 0n, at(D + 1, 0));
      expect(merged[0]!.chunks).toHaveLength(1);
      expect(merged[0]!.chunks[0]!.bloom.kind).toBe("block");
    }
    expect(() => mergeSegments("u", [without], 0n, at(D + 1, 0))).toThrow(IndexError);
  });

  it("merges indexed segments as a listing-by-listing reference does, reusing their objects", () => {
    // The reference: every listing in segment order, a chunk kept once (a listing with a
    // bloom block wins over one without, else the first), series and chunks sorted.
    const reference = (segments: IndexSegment[], from: bigint, through: bigint) => {
      type Kept = { c: SegmentChunk; bloom: string };
      const bySeries = new Map<bigint, { labels: string; chunks: Kept[] }>();
      for (const segment of segments) {
        for (const s of segment.series) {
          const bloom = s.bloom.kind === "block" ? s.bloom.key : "missing";
          for (const c of s.chunks) {
            if (c.through < from || c.from > through) continue;
            let entry = bySeries.get(s.fingerprint);
            if (entry === undefined)
              bySeries.set(s.fingerprint, (entry = { labels: s.labels, chunks: [] }));
            const same = entry.chunks.findIndex(
              (k) =>
                k.c.from === c.from && k.c.through === c.through && k.c.checksum === c.checksum,
            );
            if (same < 0) entry.chunks.push({ c, bloom });
            else if (entry.chunks[same]!.bloom === "missing" && bloom !== "missing") {
              entry.chunks[same] = { c, bloom };
            }
          }
        }
      }
      const order = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
      return [...bySeries]
        .sort(([a], [b]) => order(a, b))
        .map(([fp, { labels, chunks }]) => [
          fp,
          labels,
          chunks
            .sort(
              (x, y) =>
                order(x.c.from, y.c.from) ||
                order(x.c.through, y.c.through) ||
                x.c.checksum - y.c.checksum,
            )
            .map((k) => [k.c.from, k.c.through, k.c.checksum, k.bloom]),
        ]);
    };
    const chunk = fc
      .tuple(fc.integer({ min: 0, max: 47 }), fc.integer({ min: 0, max: 5 }), fc.nat(2))
      .map(([h, len, sum]) =>
        chunkAt(
          at(D, 0) + BigInt(h) * 1_800_000_000_000n,
          at(D, 0) + BigInt(h + len) * 1_800_000_000_000n,
          sum,
        ),
      );
    // A segment's series unordered and listed more than once now and then, as a segment
    // may list them (indexSegment puts them in order).
    const segmentOf = fc.array(
      fc.tuple(fc.bigInt({ min: 1n, max: 6n }), fc.array(chunk, { maxLength: 4 }), fc.boolean()),
      { maxLength: 7 },
    );
    fc.assert(
      fc.property(
        fc.array(segmentOf, { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 47 }),
        fc.integer({ min: 0, max: 47 }),
        (listings, a, b) => {
          const segments: IndexSegment[] = listings.map((listed, k) => ({
            tenant: "t",
            day: D,
            series: listed.map(([fp, chunks, block]) => ({
              ...series(fp, chunks, block),
              ...(block && {
                bloom: { kind: "block", key: `t/blooms/${k}`, offset: 8, length: 100 },
              }),
            })),
          }));
          const from = at(D, 0) + BigInt(Math.min(a, b)) * 1_800_000_000_000n;
          const through = at(D, 0) + BigInt(Math.max(a, b)) * 1_800_000_000_000n;
          const indexed = segments.map((s) => indexSegment("t", s));
          const merged = mergeIndexed(indexed, from, through);
          const shapeOf = (all: IndexedSeries[]) =>
            all.map((s) => [
              s.fingerprint,
              s.labels,
              s.chunks.map((c) => [
                c.ref.from,
                c.ref.through,
                c.ref.checksum,
                c.bloom.kind === "block" ? c.bloom.key : "missing",
              ]),
            ]);
          const shape = shapeOf(merged);
          expect(shape).toEqual(reference(segments, from, through));
          expect(shape).toEqual(shapeOf(mergeSegments("t", segments, from, through)));
          // Every chunk answered is an indexed segment's own object, and so is a series
          // of one segment whose chunks are all in range.
          const own = new Set(indexed.flat().flatMap((s) => s.chunks));
          for (const s of merged) for (const c of s.chunks) expect(own.has(c)).toBe(true);
          for (const s of merged) {
            const listings = indexed.flat().filter((x) => x.fingerprint === s.fingerprint);
            if (listings.length === 1 && listings[0]!.chunks.length === s.chunks.length) {
              expect(s).toBe(listings[0]);
            }
          }
        },
      ),
    );
  });

  it("indexes a segment that lists each series once as merge does (chunks ordered, each once)", () => {
    const chunk = fc
      .tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 2 }), fc.nat(2))
      .map(([h, len, sum]) => chunkAt(at(D, h), at(D, h + len), sum));
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.bigInt({ min: 1n, max: 50n }), { maxLength: 6 }),
        fc.array(fc.array(chunk, { maxLength: 6 }), { minLength: 6, maxLength: 6 }),
        fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
        (fps, chunks, blocks) => {
          const listed = [...fps]
            .sort((a, b) => (a < b ? -1 : 1))
            .map((fp, i) => series(fp, chunks[i]!, blocks[i]));
          const segment: IndexSegment = { tenant: "t", day: D, series: listed };
          // The first series listed again with no chunk: the segment is regrouped.
          const again = listed.slice(0, 1).map((s) => ({ ...s, chunks: [] }));
          const merged: IndexSegment = { ...segment, series: [...listed, ...again] };
          const shape = (all: IndexedSeries[]) =>
            all.map((s) => [
              s.fingerprint,
              s.labels,
              s.chunks.map((c) => [c.ref.from, c.ref.through, c.ref.checksum, c.bloom.kind]),
            ]);
          expect(shape(indexSegment("t", segment))).toEqual(shape(indexSegment("t", merged)));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("reading the index from a real store", () => {
  const root = mkdtempSync(join(tmpdir(), "sieve-index-"));
  const store = new FsObjectStore(root);
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it("lists the days of the range, decodes and merges; other tenants' and days' segments stay out", async () => {
    const mk = (tenant: string, day: number, fp: bigint, checksum: number): IndexSegment => ({
      tenant,
      day,
      series: [
        {
          fingerprint: fp,
          labels: "{}",
          bloom: { kind: "missing", reason: "disabled" },
          chunks: [chunkAt(at(day, 1), at(day, 2), checksum)],
        },
      ],
    });
    let seq = 0;
    const put = (s: IndexSegment) =>
      store.put(segmentKey(s.tenant, s.day, newSegmentId("w", 1000, seq++)), encodeSegment(s));
    await put(mk("t", D, 1n, 1));
    await put(mk("t", D, 1n, 2));
    await put(mk("t", D + 1, 2n, 3));
    await put(mk("t", D + 5, 3n, 4));
    await put(mk("tt", D, 4n, 5));
    expect(await listSegments(store, "t", at(D, 0), at(D + 1, 23))).toHaveLength(3);
    const merged = await readIndex(store, "t", at(D, 0), at(D + 1, 23));
    expect(merged.map((s) => [s.fingerprint, s.chunks.map((c) => c.ref.checksum)])).toEqual([
      [1n, [1, 2]],
      [2n, [3]],
    ]);
  });

  it("names the key of a damaged segment", async () => {
    const key = segmentKey("bad", D, "x");
    await store.put(key, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
    await expect(readIndex(store, "bad", at(D, 0), at(D, 1))).rejects.toThrow(
      /bad\/index\/2024-05-01\/x: .*not a Sieve object/,
    );
  });
});
