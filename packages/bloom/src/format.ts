/*
 * The binary format of every filter (version 1). All integers little-endian.
 *
 *   offset  size  field
 *   0       4     magic "SVBF"
 *   4       1     version = 1
 *   5       1     type: 1 classic, 2 partitioned, 3 scalable, 4 counting, 5 ribbon
 *   6       2     reserved, 0
 *   8       …     body, by type (below)
 *   end-4   4     CRC-32C (Castagnoli) of every byte before it
 *
 *   classic      u32 bits, u8 hashes, 3 reserved; then bits/8 bytes of bit array
 *   partitioned  u32 sliceBits, u8 hashes, 3 reserved; then hashes·sliceBits/8 bytes
 *   counting     u32 counters, u8 hashes, 3 reserved; then counters/2 bytes (low nibble first)
 *   scalable     f64 fp, f64 tighteningRatio, f64 growth, f64 fillRatio, f64 maxBytes
 *                (+Infinity when unbounded), u32 initialCapacity, u32 filter count; then each
 *                filter, oldest first, as a partitioned body (without header or checksum)
 *   ribbon       u32 slots m (a multiple of 8), u8 fingerprint bits r, 3 reserved; u32 seed;
 *                then r columns of m/8 bytes: column j holds bit j of each slot's value,
 *                slot i at bit (i mod 8) of the column's byte i/8
 *
 * Bit arrays are 32-bit words in little-endian order: bit p of the filter is bit (p mod 8)
 * of byte p/8. Decoding reads the shape, checks that the length is exactly what the shape
 * implies (before allocating anything), then the checksum, then builds the filter.
 * docs/formats.md describes the same layout for readers outside this code.
 */
import { crc32c } from "@sieve/kit";
import { BloomFilter } from "./classic.js";
import { CountingBloomFilter } from "./counting.js";
import { BloomError } from "./errors.js";
import { PartitionedBloomFilter } from "./partitioned.js";
import { RibbonFilter } from "./ribbon.js";
import { ScalableBloomFilter } from "./scalable.js";

/** Any filter the format can hold. */
export type AnyFilter =
  BloomFilter | PartitionedBloomFilter | ScalableBloomFilter | CountingBloomFilter | RibbonFilter;

/** "SVBF" read as a little-endian u32. */
const MAGIC = 0x46425653;
/** The only version this code writes and reads. */
export const FORMAT_VERSION = 1;
const HEADER = 8;
const TRAILER = 4;
const SHAPE = 8;
const SCALABLE_PARAMS = 48;

const TYPE = { classic: 1, partitioned: 2, scalable: 3, counting: 4, ribbon: 5 } as const;
/** A ribbon body's seed, after its shape. */
const SEED = 4;

/** Serialises any filter to its version-1 bytes. */
export function serializeFilter(filter: AnyFilter): Uint8Array {
  if (filter instanceof BloomFilter) {
    return envelope(TYPE.classic, [shape(filter.bits, filter.hashes), bytesOf(filter.words)]);
  }
  if (filter instanceof PartitionedBloomFilter) {
    return envelope(TYPE.partitioned, partitionedBody(filter));
  }
  if (filter instanceof CountingBloomFilter) {
    return envelope(TYPE.counting, [shape(filter.counters, filter.hashes), filter.nibbles]);
  }
  if (filter instanceof RibbonFilter) {
    const seed = new Uint8Array(SEED);
    new DataView(seed.buffer).setUint32(0, filter.seed, true);
    return envelope(TYPE.ribbon, [shape(filter.slots, filter.bits), seed, filter.values]);
  }
  const p = filter.parameters;
  const params = new DataView(new ArrayBuffer(SCALABLE_PARAMS));
  params.setFloat64(0, p.fp, true);
  params.setFloat64(8, p.tighteningRatio, true);
  params.setFloat64(16, p.growth, true);
  params.setFloat64(24, p.fillRatio, true);
  params.setFloat64(32, p.maxBytes, true);
  params.setUint32(40, p.initialCapacity, true);
  params.setUint32(44, filter.filters.length, true);
  const parts: Uint8Array[] = [new Uint8Array(params.buffer)];
  for (const inner of filter.filters) parts.push(...partitionedBody(inner));
  return envelope(TYPE.scalable, parts);
}

/**
 * Reads bytes written by {@link serializeFilter}. Throws a {@link BloomError} (truncated,
 * bad_magic, unsupported_version, unknown_type, bad_checksum, corrupt) rather than return
 * a filter built from anything but exactly what was written.
 */
export function deserializeFilter(bytes: Uint8Array): AnyFilter {
  if (bytes.length < HEADER + TRAILER) throw new BloomError("truncated", `${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) throw new BloomError("bad_magic");
  const version = view.getUint8(4);
  if (version !== FORMAT_VERSION) {
    throw new BloomError("unsupported_version", `${version}, this code reads ${FORMAT_VERSION}`);
  }
  if (view.getUint16(6, true) !== 0) throw new BloomError("corrupt", "reserved header bytes");
  const type = view.getUint8(5);
  const layout = measure(view, type);
  const end = bytes.length - TRAILER;
  if (layout.end > end)
    throw new BloomError("truncated", `${bytes.length} bytes, need ${layout.end + TRAILER}`);
  if (layout.end < end) throw new BloomError("corrupt", `${end - layout.end} trailing bytes`);
  const stored = view.getUint32(end, true);
  const actual = crc32c(bytes.subarray(0, end));
  if (stored !== actual) throw new BloomError("bad_checksum");
  try {
    return build(bytes, view, type, layout);
  } catch (error) {
    if (error instanceof BloomError && error.code === "invalid_parameters") {
      throw new BloomError("corrupt", error.message);
    }
    throw error;
  }
}

/** Where the parts of a body are; computed from the shape alone, before any allocation. */
interface Layout {
  /** Offset of each shape record (one, or one per filter of a scalable chain). */
  shapes: number[];
  /** Offset just past the body. */
  end: number;
}

function measure(view: DataView, type: number): Layout {
  const need = (offset: number, length: number): void => {
    if (offset + length > view.byteLength - TRAILER) {
      throw new BloomError("truncated", `need ${offset + length + TRAILER} bytes`);
    }
  };
  const shapeAt = (offset: number, dataBytes: (size: number, hashes: number) => number): number => {
    need(offset, SHAPE);
    if (view.getUint8(offset + 5) !== 0 || view.getUint16(offset + 6, true) !== 0) {
      throw new BloomError("corrupt", "reserved shape bytes");
    }
    return offset + SHAPE + dataBytes(view.getUint32(offset, true), view.getUint8(offset + 4));
  };
  switch (type) {
    case TYPE.classic:
      return { shapes: [HEADER], end: shapeAt(HEADER, (bits) => Math.ceil(bits / 8)) };
    case TYPE.counting:
      return { shapes: [HEADER], end: shapeAt(HEADER, (counters) => Math.ceil(counters / 2)) };
    case TYPE.partitioned:
      return { shapes: [HEADER], end: shapeAt(HEADER, partitionedBytes) };
    case TYPE.ribbon:
      return {
        shapes: [HEADER],
        end: shapeAt(HEADER, (slots, bits) => SEED + Math.ceil((slots * bits) / 8)),
      };
    case TYPE.scalable: {
      need(HEADER, SCALABLE_PARAMS);
      const count = view.getUint32(HEADER + 44, true);
      const shapes: number[] = [];
      let offset = HEADER + SCALABLE_PARAMS;
      for (let i = 0; i < count; i++) {
        shapes.push(offset);
        offset = shapeAt(offset, partitionedBytes);
      }
      if (count === 0) throw new BloomError("corrupt", "a scalable filter without filters");
      return { shapes, end: offset };
    }
    default:
      throw new BloomError("unknown_type", String(type));
  }
}

function build(bytes: Uint8Array, view: DataView, type: number, layout: Layout): AnyFilter {
  const first = layout.shapes[0]!;
  switch (type) {
    case TYPE.classic: {
      const bits = view.getUint32(first, true);
      return new BloomFilter(
        { bits, hashes: view.getUint8(first + 4) },
        wordsAt(bytes, first + SHAPE, bits / 32),
      );
    }
    case TYPE.counting: {
      const counters = view.getUint32(first, true);
      const nibbles = bytes.slice(first + SHAPE, first + SHAPE + Math.ceil(counters / 2));
      return new CountingBloomFilter({ counters, hashes: view.getUint8(first + 4) }, nibbles);
    }
    case TYPE.partitioned:
      return partitionedAt(bytes, view, first);
    case TYPE.ribbon: {
      const slots = view.getUint32(first, true);
      const bits = view.getUint8(first + 4);
      const seed = view.getUint32(first + SHAPE, true);
      if (bits < 1 || bits > 16) throw new BloomError("corrupt", `fingerprint bits ${bits}`);
      const at = first + SHAPE + SEED;
      return new RibbonFilter({ slots, bits, seed }, bytes.subarray(at, layout.end));
    }
    default: {
      const options = {
        fp: view.getFloat64(HEADER, true),
        tighteningRatio: view.getFloat64(HEADER + 8, true),
        growth: view.getFloat64(HEADER + 16, true),
        fillRatio: view.getFloat64(HEADER + 24, true),
        maxBytes: view.getFloat64(HEADER + 32, true),
        initialCapacity: view.getUint32(HEADER + 40, true),
      };
      const filters = layout.shapes.map((offset) => partitionedAt(bytes, view, offset));
      return new ScalableBloomFilter(options, filters);
    }
  }
}

function partitionedAt(bytes: Uint8Array, view: DataView, offset: number): PartitionedBloomFilter {
  const sliceBits = view.getUint32(offset, true);
  const hashes = view.getUint8(offset + 4);
  if (sliceBits % 32 !== 0) throw new BloomError("corrupt", `slice bits ${sliceBits}`);
  const words = wordsAt(bytes, offset + SHAPE, (hashes * sliceBits) / 32);
  return new PartitionedBloomFilter({ hashes, sliceBits }, words);
}

function partitionedBytes(sliceBits: number, hashes: number): number {
  return Math.ceil((sliceBits * hashes) / 8);
}

function partitionedBody(filter: PartitionedBloomFilter): Uint8Array[] {
  return [shape(filter.sliceBits, filter.hashes), bytesOf(filter.words)];
}

/** Copies `count` little-endian words; a copy, so the filter never aliases the input. */
function wordsAt(bytes: Uint8Array, offset: number, count: number): Uint32Array {
  if (!Number.isInteger(count)) throw new BloomError("corrupt", "bit count is not whole words");
  const words = new Uint32Array(count);
  new Uint8Array(words.buffer).set(bytes.subarray(offset, offset + count * 4));
  return words;
}

function bytesOf(words: Uint32Array): Uint8Array {
  return new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
}

function shape(size: number, hashes: number): Uint8Array {
  const out = new Uint8Array(SHAPE);
  const view = new DataView(out.buffer);
  view.setUint32(0, size, true);
  view.setUint8(4, hashes);
  return out;
}

function envelope(type: number, parts: readonly Uint8Array[]): Uint8Array {
  let length = HEADER + TRAILER;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint8(4, FORMAT_VERSION);
  view.setUint8(5, type);
  let offset = HEADER;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  view.setUint32(offset, crc32c(out.subarray(0, offset)), true);
  return out;
}
