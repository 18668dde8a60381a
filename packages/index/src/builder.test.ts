import { serializeFilter } from "@sieve/bloom";
import { ChunkBuilder } from "@sieve/chunk";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bloomMayContain,
  chunkMayContain,
  chunkMayContainToken,
  seriesMayContain,
  type TestableFilter,
} from "./bloomtest.js";
import { SeriesBloomBuilder, type CoveredChunk, type SeriesBloom } from "./builder.js";
import { IndexError } from "./errors.js";
import { lineNgrams, type ChunkIdentity, type MetadataPair } from "./tokens.js";

function okBloom(bloom: SeriesBloom | undefined): Extract<SeriesBloom, { status: "ok" }> {
  if (bloom?.status !== "ok")
    throw new Error(`expected a bloom, got ${JSON.stringify(bloom?.status)}`);
  return bloom;
}

function okFilter(bloom: SeriesBloom | undefined): TestableFilter {
  return okBloom(bloom).filter;
}

const chunk = (i: number): ChunkIdentity => ({
  from: BigInt(i) * 1000n,
  through: BigInt(i) * 1000n + 999n,
  checksum: (i * 2654435761) >>> 0,
});

/** A chunk's entries: each entry's metadata pairs. */
const arbChunk = fc.array(
  fc.array(
    fc.record({
      name: fc.constantFrom("trace_id", "pod", "user"),
      value: fc.string({ maxLength: 6 }),
    }),
    { maxLength: 3 },
  ),
  { minLength: 1, maxLength: 12 },
);

describe("SeriesBloomBuilder", () => {
  it("has no false negatives at series and chunk level, for any chunks and flush grouping", () => {
    fc.assert(
      fc.property(
        fc.array(arbChunk, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 40 }),
        fc.constantFrom("ribbon" as const, "exact" as const, "scalable" as const),
        (chunks, chunksPerFlush, maxChunkTokens, layout) => {
          const builder = new SeriesBloomBuilder({ maxChunkTokens, cacheSize: 3, layout });
          const blooms: { bloom: SeriesBloom; entries: MetadataPair[][][] }[] = [];
          let group: MetadataPair[][][] = [];
          chunks.forEach((entries, i) => {
            for (const metadata of entries) builder.add(metadata);
            builder.cut(chunk(i));
            group.push(entries);
            if (group.length === chunksPerFlush || i === chunks.length - 1) {
              blooms.push({ bloom: builder.finish()!, entries: group });
              group = [];
            }
          });
          for (const { bloom, entries } of blooms) {
            expect(bloom.chunks).toHaveLength(entries.length);
            const asked = bloom.status === "ok" ? bloom : undefined;
            entries.forEach((chunkEntries, j) => {
              const covered: CoveredChunk = bloom.chunks[j]!;
              for (const { name, value } of chunkEntries.flat()) {
                expect(bloomMayContain(asked, name, value)).toBe(true);
                expect(chunkMayContain(asked, covered, name, value)).toBe(true);
              }
            });
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("makes the same blooms from a chunk builder's symbol ids as from the strings", () => {
    fc.assert(
      fc.property(
        fc.array(arbChunk, { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 0, max: 40 }),
        fc.constantFrom("ribbon" as const, "exact" as const, "scalable" as const),
        fc.boolean(),
        (chunks, chunksPerFlush, maxChunkTokens, layout, keysOnly) => {
          const options = {
            maxChunkTokens,
            cacheSize: 3,
            layout,
            ...(keysOnly && { metadataTokens: { keys: true, values: false } }),
          };
          const byStrings = new SeriesBloomBuilder(options);
          const byIds = new SeriesBloomBuilder(options);
          const out: [string, string][] = [];
          const bytes = (b: SeriesBloom | undefined): string =>
            b?.status === "ok"
              ? Buffer.from(serializeFilter(b.filter)).toString("hex")
              : JSON.stringify(b?.status);
          chunks.forEach((entries, i) => {
            const head = new ChunkBuilder({ blockTargetBytes: 64 });
            entries.forEach((metadata, k) => {
              byStrings.add(metadata);
              // Distinct timestamps: nothing is dropped as a duplicate.
              head.append({ timestamp: BigInt(k), line: "", structuredMetadata: metadata });
              byIds.addInterned(head.lastEntryIds, head.symbolList);
            });
            byStrings.cut(chunk(i));
            byIds.cut(chunk(i));
            if ((i + 1) % chunksPerFlush === 0 || i === chunks.length - 1) {
              out.push([bytes(byStrings.finish()), bytes(byIds.finish())]);
            }
          });
          for (const [a, b] of out) expect(b).toBe(a);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("prefixes chunks only in blooms of two chunks or more", () => {
    const builder = new SeriesBloomBuilder();
    builder.add([{ name: "trace_id", value: "a" }]);
    builder.cut(chunk(1));
    const single = builder.finish()!;
    expect(single.chunks.map((c) => c.prefixed)).toEqual([false]);
    builder.add([{ name: "trace_id", value: "b" }]);
    builder.cut(chunk(2));
    builder.add([{ name: "trace_id", value: "c" }]);
    builder.cut(chunk(3));
    const double = builder.finish()!;
    expect(double.chunks.map((c) => c.prefixed)).toEqual([true, true]);
    const bloom = okBloom(double);
    // Each chunk passes for its own value; the other chunk's value is a (likely) miss.
    expect(chunkMayContain(bloom, double.chunks[0]!, "trace_id", "b")).toBe(true);
    expect(chunkMayContain(bloom, double.chunks[1]!, "trace_id", "c")).toBe(true);
    expect(chunkMayContain(bloom, double.chunks[0]!, "trace_id", "c")).toBe(false);
    expect(chunkMayContain(bloom, double.chunks[1]!, "trace_id", "b")).toBe(false);
    expect(seriesMayContain(bloom.filter, "trace_id", "a")).toBe(false);
    expect(builder.finish()).toBeUndefined();
  });

  it("hashes a repeated token once per chunk", () => {
    const builder = new SeriesBloomBuilder();
    for (let i = 0; i < 1000; i++) builder.add([{ name: "trace_id", value: String(i % 10) }]);
    expect(builder.stats.tokens).toBe(2000);
    expect(builder.stats.hashed).toBe(11);
  });

  it("carries the open head chunk's tokens into the next bloom", () => {
    const builder = new SeriesBloomBuilder();
    builder.add([{ name: "a", value: "1" }]);
    builder.cut(chunk(1));
    builder.add([{ name: "b", value: "2" }]);
    okFilter(builder.finish());
    builder.cut(chunk(2));
    expect(seriesMayContain(okFilter(builder.finish()), "b", "2")).toBe(true);
  });

  it("reports a head that outgrew its token set and then lost its bloom as incomplete", () => {
    const builder = new SeriesBloomBuilder({ maxChunkTokens: 2 });
    builder.add([{ name: "a", value: "1" }]);
    builder.cut(chunk(1));
    for (let i = 0; i < 5; i++) builder.add([{ name: "b", value: String(i) }]);
    okFilter(builder.finish());
    builder.cut(chunk(2));
    const next = builder.finish()!;
    expect(next).toMatchObject({ status: "missing", reason: "incomplete" });
    expect(next.chunks.map((c) => c.prefixed)).toEqual([false]);
  });

  it("drops a bloom past maxBloomBytes and records it as missing, then starts afresh", () => {
    const builder = new SeriesBloomBuilder({ maxBloomBytes: 4096, maxChunkTokens: 10 });
    for (let i = 0; i < 20_000; i++) builder.add([{ name: "trace_id", value: String(i) }]);
    builder.cut(chunk(1));
    expect(builder.finish()).toMatchObject({ status: "missing", reason: "too_large" });
    builder.add([{ name: "trace_id", value: "x" }]);
    builder.cut(chunk(2));
    expect(seriesMayContain(okFilter(builder.finish()), "trace_id", "x")).toBe(true);
  });

  it.each(["ribbon", "exact"] as const)(
    "drops a %s bloom built at finish past maxBloomBytes too",
    (layout) => {
      // 20,001 tokens: 18.9 KB as a ribbon filter, 24 KB as a Bloom filter.
      const builder = new SeriesBloomBuilder({ maxBloomBytes: 1 << 20, layout });
      for (let i = 0; i < 20_000; i++) builder.add([{ name: "trace_id", value: String(i) }]);
      builder.cut(chunk(1));
      const small = new SeriesBloomBuilder({ maxBloomBytes: 18_000, layout });
      for (let i = 0; i < 20_000; i++) small.add([{ name: "trace_id", value: String(i) }]);
      small.cut(chunk(1));
      expect(builder.finish()?.status).toBe("ok");
      expect(small.finish()).toMatchObject({ status: "missing", reason: "too_large" });
    },
  );

  it("indexes line n-grams, chunk-prefixed, when enabled", () => {
    const ngrams = { length: 4, skip: 0 };
    const builder = new SeriesBloomBuilder({ ngrams });
    builder.add([], "GET /api/users 200");
    builder.cut(chunk(1));
    builder.add([], "POST /login 401");
    builder.cut(chunk(2));
    const bloom = okBloom(builder.finish());
    for (const gram of lineNgrams("GET /api/users 200", ngrams)) {
      expect(chunkMayContainToken(bloom, bloom.chunks[0]!, gram)).toBe(true);
    }
    for (const gram of lineNgrams("POST /login 401", ngrams)) {
      expect(chunkMayContainToken(bloom, bloom.chunks[1]!, gram)).toBe(true);
    }
    expect(chunkMayContainToken(bloom, bloom.chunks[0]!, "logi")).toBe(false);
    expect(chunkMayContainToken(bloom, bloom.chunks[1]!, "/api")).toBe(false);
  });

  it("keeps the false-positive rate near fp at series and chunk level", () => {
    const builder = new SeriesBloomBuilder();
    const perChunk = 2000;
    for (let c = 0; c < 4; c++) {
      for (let i = 0; i < perChunk; i++) builder.add([{ name: "trace_id", value: `c${c}-${i}` }]);
      builder.cut(chunk(c));
    }
    const bloom = okBloom(builder.finish());
    const { filter } = bloom;
    const trials = 20_000;
    let series = 0;
    let chunkLevel = 0;
    for (let i = 0; i < trials; i++) {
      if (seriesMayContain(filter, "trace_id", `absent-${i}`)) series++;
      // A value present in chunk 1 tested against chunk 0: only a false positive passes.
      if (chunkMayContain(bloom, bloom.chunks[0]!, "trace_id", `c1-${i % perChunk}-${i}`))
        chunkLevel++;
    }
    let crossChunk = 0;
    for (let i = 0; i < perChunk; i++) {
      if (chunkMayContain(bloom, bloom.chunks[0]!, "trace_id", `c1-${i}`)) crossChunk++;
    }
    // fp 0.01 at the bloom's capacity; allow for sampling noise (σ ≈ 0.0007 at 20,000 trials).
    expect(series / trials).toBeLessThan(0.013);
    expect(chunkLevel / trials).toBeLessThan(0.013);
    expect(crossChunk / perChunk).toBeLessThan(0.02);
  });

  it("writes a bloom well under the scalable filter's size", () => {
    const builder = new SeriesBloomBuilder();
    for (let i = 0; i < 100; i++) builder.add([{ name: "trace_id", value: `t${i}` }]);
    builder.cut(chunk(1));
    // 101 tokens at 9.6 bits each, in 7 slices of whole words, plus the 20-byte envelope.
    const bloom = builder.finish();
    if (bloom?.status !== "ok") throw new Error("expected a bloom");
    expect(serializeFilter(bloom.filter).length).toBeLessThan(200);
  });

  it("writes a ribbon filter by default, a Bloom filter of exact size or the scalable filter as is when asked", () => {
    const built = ([undefined, "ribbon", "exact", "scalable"] as const).map((layout) => {
      const builder = new SeriesBloomBuilder(layout === undefined ? {} : { layout });
      for (let i = 0; i < 1000; i++) builder.add([{ name: "trace_id", value: `t${i}` }]);
      builder.cut(chunk(1));
      const bloom = builder.finish();
      if (bloom?.status !== "ok") throw new Error("expected a bloom");
      return [bloom.filter.constructor.name, serializeFilter(bloom.filter).length] as const;
    });
    expect(built.map(([name]) => name)).toEqual([
      "RibbonFilter",
      "RibbonFilter",
      "PartitionedBloomFilter",
      "ScalableBloomFilter",
    ]);
    const [, ribbon, exact, scalable] = built.map(([, size]) => size);
    // 1,001 tokens at fp 0.01: 7 bits a slot, 8% spare slots, against 9.6 bits a token.
    expect(ribbon! / exact!).toBeLessThan(0.82);
    // The scalable filter's first slice is sized for 1,024 tokens whatever arrives, at fp·(1−r).
    expect(scalable! / exact!).toBeGreaterThan(1.2);
  });

  it("writes a Bloom filter where a ribbon filter would be bigger: a few tokens, or a rate below 2^-16", () => {
    const names = [
      [3, 0.01],
      [1000, 0.000001],
    ].map(([tokens, fp]) => {
      const builder = new SeriesBloomBuilder({ filter: { fp: fp! } });
      for (let i = 0; i < tokens!; i++) builder.add([{ name: "trace_id", value: `t${i}` }]);
      builder.cut(chunk(1));
      return okFilter(builder.finish()).constructor.name;
    });
    expect(names).toEqual(["PartitionedBloomFilter", "PartitionedBloomFilter"]);
  });

  it("writes only the metadata tokens and chunk prefixes asked for, and says which", () => {
    const build = (options: ConstructorParameters<typeof SeriesBloomBuilder>[0]) => {
      const builder = new SeriesBloomBuilder(options);
      for (const c of [1, 2]) {
        for (let i = 0; i < 50; i++) builder.add([{ name: `n${i}`, value: `v${c}-${i}` }]);
        builder.cut(chunk(c));
      }
      const bloom = builder.finish();
      if (bloom?.status !== "ok") throw new Error("expected a bloom");
      return bloom;
    };
    // Tokens of the first chunk, keyed as its chunk test asks when the bloom keys it.
    const present = (bloom: ReturnType<typeof build>, token: (i: number) => string) =>
      Array.from({ length: 50 }, (_, i) =>
        chunkMayContainToken(bloom, bloom.chunks[0]!, token(i)),
      ).filter(Boolean).length;
    const all = build({});
    expect(all.metadataTokens).toEqual({ keys: true, values: true, checksumKeys: true });
    expect(all.chunks.map((c) => c.prefixed)).toEqual([true, true]);
    const valuesOnly = build({ metadataTokens: { keys: false, values: true }, prefixed: false });
    expect(valuesOnly.metadataTokens).toEqual({ keys: false, values: true, checksumKeys: true });
    expect(valuesOnly.chunks.map((c) => c.prefixed)).toEqual([false, false]);
    expect(present(valuesOnly, (i) => `n${i}=v1-${i}`)).toBe(50);
    expect(present(valuesOnly, (i) => `n${i}`)).toBeLessThan(5); // false positives only
    const keysOnly = build({ metadataTokens: { keys: true, values: false } });
    expect(present(keysOnly, (i) => `n${i}`)).toBe(50);
    expect(present(keysOnly, (i) => `n${i}=v1-${i}`)).toBeLessThan(5);
  });

  it.each([
    { maxBloomBytes: 0 },
    { maxChunkTokens: -1 },
    { cacheSize: 0 },
    { ngrams: { length: 0, skip: 0 } },
  ])("rejects %j", (options) => {
    expect(() => new SeriesBloomBuilder(options)).toThrow(IndexError);
  });
});
