/*
 * Bloom block, version 2: many series' blooms in one object, written at flush. All
 * integers little-endian; docs/formats.md ("Bloom blocks") is the same layout for readers
 * outside this code.
 *
 *   header   u32 magic "SVBB", u8 version = 2, 3 reserved zero bytes
 *   records  one a series, in ascending fingerprint order, back to back from offset 8:
 *              u64 fingerprint, u32 filter length, filter (a serialised @sieve/bloom
 *              filter: its own magic, version and CRC-32C), then the line n-grams the
 *              filter holds: u8 length (0: none), u8 skip, u8 metadata token flags (bit 0:
 *              no `name` tokens, bit 1: no `name=value` tokens, bit 2: chunk tokens keyed
 *              by checksum, tokens.ts; 0 before the choices existed), u8 zero, u32 CRC-32C
 *              of those 4 bytes. Version 1 records end at
 *              the filter (no n-grams, both token kinds); a record's
 *              length tells the two apart, so one read by range needs no header.
 *   index    u32 series count, then per series, ascending fingerprint:
 *              u64 fingerprint, u64 record offset, u32 record length, u32 chunk count,
 *              then per chunk: i64 from, i64 through, u32 checksum, u8 flags (bit 0: the
 *              chunk's prefixed tokens are in the bloom; other bits zero)
 *   footer   28 bytes: u64 index offset, u32 index length, u32 CRC-32C of the index,
 *              u8 version = 2, 3 reserved zero bytes, u32 magic "SVBB",
 *              u32 CRC-32C of the footer's first 24 bytes
 *
 * Records tile [8, index offset) exactly and the index ends where the footer starts, so
 * every byte belongs to a checked field. A reader fetches the footer and index with one
 * range request (the object's last bytes) and then one record per series; a segment
 * stores each record's offset and length, so a gateway can skip the index altogether.
 */
import { BloomError, deserializeFilter, serializeFilter, type AnyFilter } from "@sieve/bloom";
import { crc32c } from "@sieve/kit";
import { Reader, Writer } from "./binary.js";
import type { CoveredChunk } from "./builder.js";
import { IndexError } from "./errors.js";
import {
  ALL_METADATA_TOKENS,
  checkNgramOptions,
  metadataTokenFlags,
  metadataTokensOf,
  type MetadataTokens,
  type NgramOptions,
} from "./tokens.js";

/** "SVBB" read as a little-endian u32. */
const MAGIC = 0x42425653;
/** The bloom-block version this code writes; it also reads version 1. */
export const BLOOM_BLOCK_VERSION = 2;
/** Versions this code reads. */
const READABLE = new Set([1, BLOOM_BLOCK_VERSION]);
const HEADER_BYTES = 8;
/** Bytes of the fixed footer at the end of every block. */
export const BLOOM_BLOCK_FOOTER_BYTES = 28;
const RECORD_HEADER_BYTES = 12;
/** The n-gram settings and their checksum after a version 2 record's filter. */
const RECORD_TRAILER_BYTES = 8;
/** The smallest serialised filter: envelope and checksum around nothing. */
const MIN_FILTER_BYTES = 12;
const INDEX_ENTRY_BYTES = 24;
const CHUNK_BYTES = 21;

/** One series to write into a block: its bloom and the chunks the bloom covers. */
export interface BloomBlockInput {
  readonly fingerprint: bigint;
  readonly filter: AnyFilter;
  readonly chunks: readonly CoveredChunk[];
  /** The line n-grams the filter holds; none when absent. */
  readonly ngrams?: NgramOptions | undefined;
  /**
   * The metadata tokens it holds and how its chunk tokens are keyed: the builder's own
   * (`SeriesBloom`), always passed on (a filter keyed by checksum recorded as prefixed would
   * answer "no" for what it holds).
   */
  readonly metadataTokens: MetadataTokens;
}

/** One series' record, decoded: its filter and the tokens it holds. */
export interface BloomRecord {
  readonly filter: AnyFilter;
  /** Undefined: no line n-grams (a version 1 record, or n-grams off when it was built). */
  readonly ngrams: NgramOptions | undefined;
  /** Which metadata tokens (both in a version 1 record). */
  readonly metadataTokens: MetadataTokens;
}

/** Where one series' bloom is inside a block, and which chunks it covers. */
export interface BloomBlockEntry {
  readonly fingerprint: bigint;
  /** Offset of the series' record (fingerprint, length, filter) in the block. */
  readonly offset: number;
  /** Bytes of the record. */
  readonly length: number;
  readonly chunks: readonly CoveredChunk[];
}

/** An encoded block and the entries of its index, for the index segment written next. */
export interface EncodedBloomBlock {
  readonly bytes: Uint8Array;
  readonly entries: readonly BloomBlockEntry[];
}

/** Encodes the blooms of distinct series into one block (sorted by fingerprint here). */
export function encodeBloomBlock(series: readonly BloomBlockInput[]): EncodedBloomBlock {
  const sorted = [...series].sort((a, b) =>
    a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0,
  );
  const out = new Writer();
  out.u32(MAGIC);
  out.u8(BLOOM_BLOCK_VERSION);
  out.u8(0);
  out.u16(0);
  const entries: BloomBlockEntry[] = [];
  let previous: bigint | undefined;
  for (const { fingerprint, filter, chunks, ngrams, metadataTokens } of sorted) {
    if (previous === fingerprint) {
      throw new IndexError(
        "invalid_argument",
        `series ${fingerprint.toString(16)} twice in one block`,
      );
    }
    if (fingerprint < 0n || fingerprint >= 1n << 64n) {
      throw new IndexError("invalid_argument", `fingerprint ${fingerprint} is not a u64`);
    }
    previous = fingerprint;
    const bytes = serializeFilter(filter);
    const offset = out.length;
    out.u64(fingerprint);
    out.u32(bytes.length);
    out.bytes(bytes);
    if (ngrams !== undefined) checkNgramOptions(ngrams);
    const flags = metadataTokenFlags(metadataTokens);
    const settings = Uint8Array.of(ngrams?.length ?? 0, ngrams?.skip ?? 0, flags, 0);
    out.bytes(settings);
    out.u32(crc32c(settings));
    entries.push({ fingerprint, offset, length: out.length - offset, chunks });
  }
  const indexOffset = out.length;
  out.u32(entries.length);
  for (const entry of entries) {
    out.u64(entry.fingerprint);
    out.offset(entry.offset);
    out.u32(entry.length);
    out.u32(entry.chunks.length);
    for (const chunk of entry.chunks) {
      out.i64(chunk.from);
      out.i64(chunk.through);
      out.u32(chunk.checksum >>> 0);
      out.u8(chunk.prefixed ? 1 : 0);
    }
  }
  const indexLength = out.length - indexOffset;
  const body = out.finish();
  const footer = new Writer();
  footer.offset(indexOffset);
  footer.u32(indexLength);
  footer.u32(crc32c(body.subarray(indexOffset)));
  footer.u8(BLOOM_BLOCK_VERSION);
  footer.u8(0);
  footer.u16(0);
  footer.u32(MAGIC);
  footer.checksum();
  const tail = footer.finish();
  const bytes = new Uint8Array(body.length + tail.length);
  bytes.set(body);
  bytes.set(tail, body.length);
  return { bytes, entries };
}

/** Where a block's index is, read from its footer. */
export interface BloomBlockFooter {
  readonly indexOffset: number;
  readonly indexLength: number;
  readonly indexChecksum: number;
}

/**
 * Reads the footer from the last {@link BLOOM_BLOCK_FOOTER_BYTES} of a block of `size`
 * bytes, and checks that the index it points to fits between the header and the footer.
 */
export function decodeBloomBlockFooter(footer: Uint8Array, size: number): BloomBlockFooter {
  if (size < HEADER_BYTES + 4 + BLOOM_BLOCK_FOOTER_BYTES) {
    throw new IndexError("truncated", `a bloom block of ${size} bytes`);
  }
  if (footer.length !== BLOOM_BLOCK_FOOTER_BYTES) {
    throw new IndexError("truncated", `footer of ${footer.length} bytes`);
  }
  const r = new Reader(footer);
  const indexOffset = r.offset("index offset");
  const indexLength = r.u32("index length");
  const indexChecksum = r.u32("index checksum");
  const version = r.u8("version");
  const reserved = r.u8("reserved") | r.u16("reserved");
  const magic = r.u32("magic");
  const stored = r.u32("footer checksum");
  if (magic !== MAGIC) throw new IndexError("bad_magic", "bloom block footer");
  if (!READABLE.has(version)) {
    throw new IndexError(
      "unsupported_version",
      `bloom block ${version}, this code reads 1 and ${BLOOM_BLOCK_VERSION}`,
    );
  }
  if (crc32c(footer.subarray(0, 24)) !== stored)
    throw new IndexError("bad_checksum", "bloom block footer");
  if (reserved !== 0) throw new IndexError("corrupt", "reserved footer bytes");
  if (indexOffset < HEADER_BYTES || indexOffset + indexLength !== size - BLOOM_BLOCK_FOOTER_BYTES) {
    throw new IndexError(
      "corrupt",
      `index at ${indexOffset}+${indexLength} in a block of ${size} bytes`,
    );
  }
  return { indexOffset, indexLength, indexChecksum };
}

/**
 * Decodes a block's index (the bytes at the footer's offset and length) and checks that
 * the records it lists tile [8, index offset) in ascending fingerprint order.
 */
export function decodeBloomBlockIndex(
  index: Uint8Array,
  footer: BloomBlockFooter,
): BloomBlockEntry[] {
  if (index.length !== footer.indexLength) throw new IndexError("truncated", "bloom block index");
  if (crc32c(index) !== footer.indexChecksum)
    throw new IndexError("bad_checksum", "bloom block index");
  const r = new Reader(index);
  const count = r.u32("series count");
  if (count > r.left / INDEX_ENTRY_BYTES)
    throw new IndexError("corrupt", `${count} series in ${index.length} bytes`);
  const entries: BloomBlockEntry[] = [];
  let expected = HEADER_BYTES;
  let previous = -1n;
  for (let i = 0; i < count; i++) {
    const fingerprint = r.u64("fingerprint");
    const offset = r.offset("record offset");
    const length = r.u32("record length");
    const chunkCount = r.u32("chunk count");
    if (fingerprint <= previous) throw new IndexError("corrupt", `series ${i} out of order`);
    if (offset !== expected)
      throw new IndexError("corrupt", `record ${i} at ${offset}, expected ${expected}`);
    if (length < RECORD_HEADER_BYTES + MIN_FILTER_BYTES)
      throw new IndexError("corrupt", `record ${i} of ${length} bytes`);
    if (chunkCount > r.left / CHUNK_BYTES)
      throw new IndexError("corrupt", `${chunkCount} chunks in record ${i}`);
    const chunks: CoveredChunk[] = [];
    for (let j = 0; j < chunkCount; j++) {
      const from = r.i64("chunk from");
      const through = r.i64("chunk through");
      const checksum = r.u32("chunk checksum");
      const flags = r.u8("chunk flags");
      if (flags > 1) throw new IndexError("corrupt", `chunk flags ${flags}`);
      if (through < from)
        throw new IndexError("corrupt", `chunk through ${through} before from ${from}`);
      chunks.push({ from, through, checksum, prefixed: flags === 1 });
    }
    entries.push({ fingerprint, offset, length, chunks });
    previous = fingerprint;
    expected = offset + length;
  }
  if (r.left !== 0) throw new IndexError("corrupt", `${r.left} bytes after the index`);
  if (expected !== footer.indexOffset) {
    throw new IndexError(
      "corrupt",
      `records end at ${expected}, index starts at ${footer.indexOffset}`,
    );
  }
  return entries;
}

/**
 * Decodes one series' record (the bytes at the entry's offset and length) into its filter
 * and n-gram settings, checking that it belongs to `fingerprint` (`wrong_series`
 * otherwise). A damaged filter is `corrupt`, its `cause` the {@link BloomError}.
 */
export function decodeBloomRecord(record: Uint8Array, fingerprint: bigint): BloomRecord {
  const r = new Reader(record);
  const stored = r.u64("record fingerprint");
  const length = r.u32("filter length");
  if (stored !== fingerprint) {
    throw new IndexError(
      "wrong_series",
      `record of ${stored.toString(16)}, wanted ${fingerprint.toString(16)}`,
    );
  }
  const trailer = r.left - length;
  if (trailer !== 0 && trailer !== RECORD_TRAILER_BYTES)
    throw new IndexError(
      length > r.left ? "truncated" : "corrupt",
      `filter of ${length} bytes, ${r.left} in the record`,
    );
  let filter: AnyFilter;
  try {
    filter = deserializeFilter(r.bytesView(length, "filter"));
  } catch (error) {
    if (!(error instanceof BloomError)) throw error;
    const wrapped = new IndexError("corrupt", error.message);
    wrapped.cause = error;
    throw wrapped;
  }
  if (trailer === 0) return { filter, ngrams: undefined, metadataTokens: ALL_METADATA_TOKENS };
  const settings = r.bytesView(4, "n-gram settings");
  if (r.u32("n-gram settings checksum") !== crc32c(settings))
    throw new IndexError("bad_checksum", "n-gram settings");
  const [ngramLength, skip, flags, reserved] = settings as unknown as [
    number,
    number,
    number,
    number,
  ];
  const metadataTokens = metadataTokensOf(flags);
  if (metadataTokens === undefined || reserved !== 0) {
    throw new IndexError("corrupt", "reserved record bits");
  }
  if (ngramLength === 0) {
    if (skip !== 0) throw new IndexError("corrupt", `n-gram skip ${skip} without a length`);
    return { filter, ngrams: undefined, metadataTokens };
  }
  const ngrams = { length: ngramLength, skip };
  try {
    checkNgramOptions(ngrams);
  } catch {
    throw new IndexError("corrupt", `n-gram length ${ngramLength}, skip ${skip}`);
  }
  return { filter, ngrams, metadataTokens };
}

/** A whole decoded block. */
export interface DecodedBloomBlock {
  readonly entries: readonly BloomBlockEntry[];
  /** The records, in the order of `entries`. */
  readonly records: readonly BloomRecord[];
}

/** Decodes and checks a whole block: header, footer, index and every record. */
export function decodeBloomBlock(bytes: Uint8Array): DecodedBloomBlock {
  const header = new Reader(bytes);
  if (bytes.length < HEADER_BYTES)
    throw new IndexError("truncated", `a bloom block of ${bytes.length} bytes`);
  if (header.u32("magic") !== MAGIC) throw new IndexError("bad_magic", "bloom block header");
  const version = header.u8("version");
  if (!READABLE.has(version)) {
    throw new IndexError(
      "unsupported_version",
      `bloom block ${version}, this code reads 1 and ${BLOOM_BLOCK_VERSION}`,
    );
  }
  if ((header.u8("reserved") | header.u16("reserved")) !== 0)
    throw new IndexError("corrupt", "reserved header bytes");
  const footer = decodeBloomBlockFooter(
    bytes.subarray(Math.max(0, bytes.length - BLOOM_BLOCK_FOOTER_BYTES)),
    bytes.length,
  );
  const index = bytes.subarray(footer.indexOffset, footer.indexOffset + footer.indexLength);
  const entries = decodeBloomBlockIndex(index, footer);
  const records = entries.map((e) =>
    decodeBloomRecord(bytes.subarray(e.offset, e.offset + e.length), e.fingerprint),
  );
  return { entries, records };
}

/** What reading blooms needs of an object store (`@sieve/storage`'s `ObjectStore` fits). */
export interface BloomBlockStore {
  /** `length` bytes from `offset` (fewer when the object ends first). */
  getRange(key: string, offset: number, length: number): Promise<Uint8Array>;
  /** The object's size. */
  head(key: string): Promise<{ readonly size: number }>;
}

/** Where one series' bloom record is: a segment's `BloomLocation` of kind `block` fits. */
export interface BloomRecordLocation {
  readonly key: string;
  readonly offset: number;
  readonly length: number;
}

/** What reading one series' bloom found. The gateway treats everything but `ok` as "may match". */
export type SeriesBloomResult =
  | ({ readonly status: "ok" } & BloomRecord)
  /** The block has no bloom for the series. */
  | { readonly status: "absent" }
  /** The bytes were damaged; `error` says how. */
  | { readonly status: "corrupt"; readonly error: IndexError };

/**
 * Reads one series' bloom with one range request, at the record's location (an index
 * segment stores it). Damage is reported, not thrown; errors of the store propagate.
 */
export async function readSeriesBloom(
  store: BloomBlockStore,
  location: BloomRecordLocation,
  fingerprint: bigint,
): Promise<SeriesBloomResult> {
  const record = await store.getRange(location.key, location.offset, location.length);
  try {
    if (record.length !== location.length) {
      throw new IndexError("truncated", `read ${record.length} of ${location.length} bytes`);
    }
    return { status: "ok", ...decodeBloomRecord(record, fingerprint) };
  } catch (error) {
    if (error instanceof IndexError) return { status: "corrupt", error };
    throw error;
  }
}

/** How many of a block's last bytes {@link BloomBlockReader.open} fetches at first (64 KiB). */
export const DEFAULT_TAIL_BYTES = 65536;

/**
 * A block read by range: {@link open} fetches the footer and index (one range request when
 * they fit in the last `tailBytes`, two otherwise), {@link read} one series' record.
 */
export class BloomBlockReader {
  private readonly byFingerprint: Map<bigint, BloomBlockEntry>;

  private constructor(
    private readonly store: BloomBlockStore,
    /** The block's object key. */
    readonly key: string,
    /** The index's entries, ascending fingerprint. */
    readonly entries: readonly BloomBlockEntry[],
  ) {
    this.byFingerprint = new Map(entries.map((e) => [e.fingerprint, e]));
  }

  /**
   * Opens the block at `key`; `size` saves a `head` request when the caller knows it.
   * Damage throws an {@link IndexError}.
   */
  static async open(
    store: BloomBlockStore,
    key: string,
    size?: number,
    tailBytes = DEFAULT_TAIL_BYTES,
  ): Promise<BloomBlockReader> {
    const total = size ?? (await store.head(key)).size;
    if (!(Number.isSafeInteger(total) && total >= 0))
      throw new IndexError("invalid_argument", `size ${total}`);
    const tailLength = Math.min(total, Math.max(BLOOM_BLOCK_FOOTER_BYTES, tailBytes));
    const tailStart = total - tailLength;
    const tail = await store.getRange(key, tailStart, tailLength);
    if (tail.length !== tailLength)
      throw new IndexError("truncated", `read ${tail.length} of ${tailLength} bytes`);
    const footer = decodeBloomBlockFooter(
      tail.subarray(tail.length - BLOOM_BLOCK_FOOTER_BYTES),
      total,
    );
    const { indexOffset, indexLength } = footer;
    const index =
      indexOffset >= tailStart
        ? tail.subarray(indexOffset - tailStart, indexOffset - tailStart + indexLength)
        : await store.getRange(key, indexOffset, indexLength);
    return new BloomBlockReader(store, key, decodeBloomBlockIndex(index, footer));
  }

  /** The entry of `fingerprint`, if the block has its bloom. */
  entry(fingerprint: bigint): BloomBlockEntry | undefined {
    return this.byFingerprint.get(fingerprint);
  }

  /** Reads one series' bloom with one range request. */
  async read(fingerprint: bigint): Promise<SeriesBloomResult> {
    const entry = this.byFingerprint.get(fingerprint);
    if (entry === undefined) return { status: "absent" };
    return readSeriesBloom(
      this.store,
      { key: this.key, offset: entry.offset, length: entry.length },
      fingerprint,
    );
  }
}
