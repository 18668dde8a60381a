import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ScalableBloomFilter } from "@sieve/bloom";
import { FsObjectStore, type ObjectStore } from "@sieve/storage";
import { afterAll, describe, expect, it } from "vitest";
import { crc32c } from "@sieve/kit";
import {
  BloomBlockReader,
  decodeBloomBlock,
  decodeBloomRecord,
  encodeBloomBlock,
  readSeriesBloom,
  type BloomBlockInput,
  type BloomBlockStore,
} from "./bloomblock.js";
import { bloomMayContain, seriesMayContain } from "./bloomtest.js";
import { SeriesBloomBuilder } from "./builder.js";
import { IndexError } from "./errors.js";
import { ALL_METADATA_TOKENS } from "./tokens.js";

function seriesInput(fingerprint: bigint, values: readonly string[], chunks = 1): BloomBlockInput {
  const builder = new SeriesBloomBuilder();
  values.forEach((value, i) => {
    builder.add([{ name: "trace_id", value }]);
    if (
      i % Math.ceil(values.length / chunks) === Math.ceil(values.length / chunks) - 1 ||
      i === values.length - 1
    ) {
      builder.cut({ from: BigInt(i), through: BigInt(i) + 10n, checksum: i });
    }
  });
  const bloom = builder.finish()!;
  if (bloom.status !== "ok") throw new Error("expected a bloom");
  return {
    fingerprint,
    filter: bloom.filter,
    chunks: bloom.chunks,
    metadataTokens: bloom.metadataTokens,
  };
}

const small = [
  seriesInput(7n, ["a"]),
  seriesInput(3n, ["b", "c"], 2),
  seriesInput(2n ** 64n - 1n, ["d"]),
];

describe("bloom blocks", () => {
  it("round-trip: entries in fingerprint order, every filter answering as before", () => {
    const inputs = [
      ...small,
      seriesInput(
        42n,
        Array.from({ length: 500 }, (_, i) => `v${i}`),
        3,
      ),
    ];
    const { bytes, entries } = encodeBloomBlock(inputs);
    const decoded = decodeBloomBlock(bytes);
    expect(decoded.entries).toEqual(entries);
    expect(entries.map((e) => e.fingerprint)).toEqual([3n, 7n, 42n, 2n ** 64n - 1n]);
    expect(entries.find((e) => e.fingerprint === 3n)!.chunks.map((c) => c.prefixed)).toEqual([
      true,
      true,
    ]);
    // Series 42's bloom covers 3 chunks, all prefixed: asked chunk by chunk.
    const b42 = { ...decoded.records[2]!, chunks: decoded.entries[2]!.chunks };
    for (let i = 0; i < 500; i++) expect(bloomMayContain(b42, "trace_id", `v${i}`)).toBe(true);
    const b3 = { ...decoded.records[0]!, chunks: decoded.entries[0]!.chunks };
    expect(bloomMayContain(b3, "trace_id", "b")).toBe(true);
    expect(decoded.records.map((r) => r.ngrams)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("records each series' line n-gram settings beside its filter", () => {
    const inputs = [
      { ...small[0]!, ngrams: { length: 4, skip: 1 } },
      small[1]!,
      { ...small[2]!, ngrams: { length: 64, skip: 0 } },
    ];
    const { bytes, entries } = encodeBloomBlock(inputs);
    expect(decodeBloomBlock(bytes).records.map((r) => r.ngrams)).toEqual([
      undefined,
      { length: 4, skip: 1 },
      { length: 64, skip: 0 },
    ]);
    const at = entries[1]!;
    const record = bytes.subarray(at.offset, at.offset + at.length);
    expect(Array.from(record.subarray(record.length - 8, record.length - 4))).toEqual([4, 1, 4, 0]);
    expect(() => encodeBloomBlock([{ ...small[0]!, ngrams: { length: 0, skip: 0 } }])).toThrow(
      IndexError,
    );
  });

  it("records which metadata tokens each series' filter holds; unknown flag bits are corrupt", () => {
    const inputs = [
      { ...small[0]!, metadataTokens: { keys: false, values: true } },
      small[1]!,
      {
        ...small[2]!,
        metadataTokens: { keys: false, values: false },
        ngrams: { length: 4, skip: 0 },
      },
    ];
    const { bytes, entries } = encodeBloomBlock(inputs);
    expect(decodeBloomBlock(bytes).records.map((r) => r.metadataTokens)).toEqual([
      { keys: true, values: true, checksumKeys: true },
      { keys: false, values: true },
      { keys: false, values: false },
    ]);
    const at = entries[2]!;
    const record = bytes.subarray(at.offset, at.offset + at.length);
    expect(Array.from(record.subarray(record.length - 8, record.length - 4))).toEqual([4, 0, 3, 0]);
    // A flag nobody defined, with its checksum fixed up: refused, not read as "all tokens".
    const bad = Uint8Array.from(record);
    const settings = bad.subarray(bad.length - 8, bad.length - 4);
    settings[2] = 8;
    new DataView(bad.buffer).setUint32(bad.length - 4, crc32c(settings), true);
    expect(() => decodeBloomRecord(bad, at.fingerprint)).toThrow("reserved record bits");
  });

  it("reads a version 1 block (records without n-gram settings), as written before version 2", () => {
    // One series (5), one chunk, trace_id=t1: encoded by the version 1 code.
    const v1 = Buffer.from(
      "53564242010000000500000000000000300000005356424601020000200000000700000080080000000040" +
        "080200010010100000000080010410000002200000cce80d8e010000000500000000000000080000000000" +
        "00003c0000000100000001000000000000000200000000000000030000000044000000000000003100000008" +
        "d2a1cd0100000053564242726f5ee2",
      "hex",
    );
    expect(v1[4]).toBe(1);
    const decoded = decodeBloomBlock(v1);
    expect(decoded.entries.map((e) => e.fingerprint)).toEqual([5n]);
    expect(decoded.records[0]!.ngrams).toBeUndefined();
    expect(seriesMayContain(decoded.records[0]!.filter, "trace_id", "t1")).toBe(true);
    expect(seriesMayContain(decoded.records[0]!.filter, "trace_id", "t2")).toBe(false);
  });

  it("encodes an empty block", () => {
    expect(decodeBloomBlock(encodeBloomBlock([]).bytes)).toEqual({ entries: [], records: [] });
  });

  it("rejects the same series twice", () => {
    expect(() => encodeBloomBlock([small[0]!, small[0]!])).toThrow(IndexError);
  });

  it("rejects every single-byte corruption with an IndexError", () => {
    const { bytes } = encodeBloomBlock(small);
    for (let i = 0; i < bytes.length; i++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = bytes.slice();
        bad[i]! ^= flip;
        expect(() => decodeBloomBlock(bad), `byte ${i} ^ ${flip}`).toThrow(IndexError);
      }
    }
  });

  it("rejects every truncation and every extension with an IndexError", () => {
    const { bytes } = encodeBloomBlock(small);
    for (let length = 0; length < bytes.length; length++) {
      expect(() => decodeBloomBlock(bytes.subarray(0, length)), `${length} bytes`).toThrow(
        IndexError,
      );
    }
    const longer = new Uint8Array(bytes.length + 1);
    longer.set(bytes);
    expect(() => decodeBloomBlock(longer)).toThrow(IndexError);
  });
});

describe("reading blooms by range from a real store", () => {
  const root = mkdtempSync(join(tmpdir(), "sieve-index-"));
  const store = new FsObjectStore(root);
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  /** The real store, counting its requests. */
  function counting(inner: ObjectStore): BloomBlockStore & { ranges: number; heads: number } {
    const counted = {
      ranges: 0,
      heads: 0,
      getRange(key: string, offset: number, length: number) {
        counted.ranges++;
        return inner.getRange(key, offset, length);
      },
      head(key: string) {
        counted.heads++;
        return inner.head(key);
      },
    };
    return counted;
  }

  it("opens with one range request when the index fits the tail, then one a series", async () => {
    const { bytes, entries } = encodeBloomBlock(small);
    await store.put("t/blooms/a", bytes);
    const source = counting(store);
    const reader = await BloomBlockReader.open(source, "t/blooms/a", bytes.length);
    expect(source.ranges).toBe(1);
    expect(reader.entries).toEqual(entries);
    const result = await reader.read(3n);
    expect(source.ranges).toBe(2);
    const chunks = entries.find((e) => e.fingerprint === 3n)!.chunks;
    expect(result.status === "ok" && bloomMayContain({ ...result, chunks }, "trace_id", "c")).toBe(
      true,
    );
    expect(await reader.read(99n)).toEqual({ status: "absent" });
  });

  it("reads the index with a second request when the tail is too short, and asks the size", async () => {
    const inputs = Array.from({ length: 50 }, (_, i) => seriesInput(BigInt(i), [`x${i}`]));
    const { bytes } = encodeBloomBlock(inputs);
    await store.put("t/blooms/b", bytes);
    const source = counting(store);
    const reader = await BloomBlockReader.open(source, "t/blooms/b", undefined, 64);
    expect([source.heads, source.ranges]).toEqual([1, 2]);
    expect(reader.entries).toHaveLength(50);
    for (let i = 0; i < 50; i++) {
      const result = await reader.read(BigInt(i));
      expect(result.status === "ok" && seriesMayContain(result.filter, "trace_id", `x${i}`)).toBe(
        true,
      );
    }
  });

  it("reports a damaged, misplaced or short record as corrupt instead of throwing", async () => {
    const { bytes, entries } = encodeBloomBlock(small);
    const at = entries[1]!;
    const damaged = bytes.slice();
    damaged[at.offset + at.length - 10]! ^= 1;
    await store.put("t/blooms/c", damaged);
    const location = { key: "t/blooms/c", offset: at.offset, length: at.length };
    const bad = await readSeriesBloom(store, location, at.fingerprint);
    expect(bad.status === "corrupt" && bad.error.code).toBe("corrupt");
    const wrong = await readSeriesBloom(store, { ...location, key: "t/blooms/a" }, 3n);
    expect(wrong.status === "corrupt" && wrong.error.code).toBe("wrong_series");
    const short = await readSeriesBloom(
      store,
      { key: "t/blooms/a", offset: bytes.length - 5, length: 40 },
      3n,
    );
    expect(short.status === "corrupt" && short.error.code).toBe("truncated");
  });

  it("serialises a scalable filter too (a chunk whose tokens overflowed)", () => {
    const filter = new ScalableBloomFilter();
    filter.add("trace_id=z");
    const { bytes } = encodeBloomBlock([
      { fingerprint: 1n, filter, chunks: [], metadataTokens: ALL_METADATA_TOKENS },
    ]);
    expect(decodeBloomBlock(bytes).records[0]!.filter).toBeInstanceOf(ScalableBloomFilter);
  });
});
