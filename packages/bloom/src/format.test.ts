import { describe, expect, it } from "vitest";
import { BloomFilter } from "./classic.js";
import { CountingBloomFilter } from "./counting.js";
import { BloomError, type BloomErrorCode } from "./errors.js";
import { deserializeFilter, serializeFilter, type AnyFilter } from "./format.js";
import { PartitionedBloomFilter } from "./partitioned.js";
import { RibbonFilter } from "./ribbon.js";
import { ScalableBloomFilter } from "./scalable.js";
import { traceIds } from "./testkeys.test-helper.js";

const keys = traceIds(300, 51);
const probes = traceIds(2000, 52);

/** Small filters of every type, so that every byte of each can be corrupted in turn. */
function samples(): [string, AnyFilter][] {
  const classic = new BloomFilter({ bits: 256, hashes: 4 });
  const partitioned = new PartitionedBloomFilter({ hashes: 3, sliceBits: 64 });
  const counting = new CountingBloomFilter({ counters: 64, hashes: 3 });
  const scalable = new ScalableBloomFilter({ initialCapacity: 4, growth: 2 });
  for (const key of keys.slice(0, 20)) {
    classic.add(key);
    partitioned.add(key);
    counting.add(key);
  }
  scalable.addMany(keys.slice(0, 150));
  if (scalable.filters.length < 3) throw new Error("the scalable sample should have grown");
  return [
    ["classic", classic],
    ["partitioned", partitioned],
    ["counting", counting],
    ["scalable", scalable],
    ["ribbon", RibbonFilter.fromKeys(keys.slice(0, 20), 0.01)],
  ];
}

function answers(filter: AnyFilter, sample: readonly string[]): boolean[] {
  return sample.map((k) => filter.test(k));
}

function codeOf(action: () => unknown): BloomErrorCode | "accepted" {
  try {
    action();
    return "accepted";
  } catch (error) {
    if (error instanceof BloomError) return error.code;
    throw error;
  }
}

describe("filter format", () => {
  it.each(samples())("round-trips a %s filter: same answers, same bytes", (_name, filter) => {
    const bytes = serializeFilter(filter);
    const copy = deserializeFilter(bytes);
    expect(copy.constructor).toBe(filter.constructor);
    expect(answers(copy, [...keys, ...probes])).toEqual(answers(filter, [...keys, ...probes]));
    expect(serializeFilter(copy)).toEqual(bytes);
  });

  it("round-trips large filters of every type", () => {
    const filters: Exclude<AnyFilter, RibbonFilter>[] = [
      BloomFilter.forCapacity(50_000, 0.01),
      PartitionedBloomFilter.forCapacity(50_000, 0.01),
      CountingBloomFilter.forCapacity(50_000, 0.01),
      new ScalableBloomFilter(),
    ];
    const many = traceIds(50_000, 53);
    for (const filter of filters) {
      for (const key of many) filter.add(key);
      const copy = deserializeFilter(serializeFilter(filter));
      expect(answers(copy, many).every(Boolean)).toBe(true);
      expect(answers(copy, probes)).toEqual(answers(filter, probes));
    }
    const ribbon = RibbonFilter.fromKeys(traceIds(50_000, 53), 0.01);
    const copy = deserializeFilter(serializeFilter(ribbon));
    expect(answers(copy, many).every(Boolean)).toBe(true);
    expect(answers(copy, probes)).toEqual(answers(ribbon, probes));
  });

  it("keeps a scalable filter's parameters, growth state included", () => {
    const filter = new ScalableBloomFilter({ initialCapacity: 10, fp: 0.001, maxBytes: 1e6 });
    filter.addMany(keys);
    const copy = deserializeFilter(serializeFilter(filter)) as ScalableBloomFilter;
    expect(copy.parameters).toEqual(filter.parameters);
    expect(copy.filters.map((f) => f.fillRatio())).toEqual(
      filter.filters.map((f) => f.fillRatio()),
    );
    const unbounded = deserializeFilter(
      serializeFilter(new ScalableBloomFilter()),
    ) as ScalableBloomFilter;
    expect(unbounded.parameters.maxBytes).toBe(Infinity);
  });

  it.each(samples())("rejects every single-byte corruption of a %s filter", (_name, filter) => {
    const bytes = serializeFilter(filter);
    for (let at = 0; at < bytes.length; at++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = bytes.slice();
        bad[at] = bad[at]! ^ flip;
        expect(
          codeOf(() => deserializeFilter(bad)),
          `byte ${at} ^ ${flip}`,
        ).not.toBe("accepted");
      }
    }
  });

  it.each(samples())(
    "rejects every truncation of a %s filter, and trailing bytes",
    (_name, filter) => {
      const bytes = serializeFilter(filter);
      for (let length = 0; length < bytes.length; length++) {
        expect(
          codeOf(() => deserializeFilter(bytes.subarray(0, length))),
          `length ${length}`,
        ).not.toBe("accepted");
      }
      const longer = new Uint8Array(bytes.length + 1);
      longer.set(bytes);
      expect(codeOf(() => deserializeFilter(longer))).not.toBe("accepted");
    },
  );

  it("names what is wrong", () => {
    const bytes = serializeFilter(new BloomFilter({ bits: 64, hashes: 2 }));
    const withByte = (at: number, value: number): Uint8Array => {
      const copy = bytes.slice();
      copy[at] = value;
      return copy;
    };
    expect(codeOf(() => deserializeFilter(bytes.subarray(0, 5)))).toBe("truncated");
    expect(codeOf(() => deserializeFilter(bytes.subarray(0, bytes.length - 1)))).toBe("truncated");
    expect(codeOf(() => deserializeFilter(withByte(0, 0)))).toBe("bad_magic");
    expect(codeOf(() => deserializeFilter(withByte(4, 2)))).toBe("unsupported_version");
    expect(codeOf(() => deserializeFilter(withByte(5, 9)))).toBe("unknown_type");
    expect(codeOf(() => deserializeFilter(withByte(20, bytes[20]! ^ 1)))).toBe("bad_checksum");
    expect(() => deserializeFilter(withByte(4, 2))).toThrow(
      "unsupported bloom filter format version: 2, this code reads 1",
    );
  });

  it("refuses a shape that claims more bytes than it has, before allocating", () => {
    const bytes = serializeFilter(new BloomFilter({ bits: 64, hashes: 2 }));
    const huge = bytes.slice();
    new DataView(huge.buffer).setUint32(8, 2 ** 32 - 32, true);
    expect(codeOf(() => deserializeFilter(huge))).toBe("truncated");
  });
});
