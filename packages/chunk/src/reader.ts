import { ByteReader, isInt64 } from "./bytes.js";
import { MIN_ENTRY_BYTES, decodeBlockPayload } from "./block.js";
import type { BlockMeta, EntryTest } from "./block.js";
import { snappyUncompress } from "./codec.js";
import { crc32c } from "@sieve/kit";
import type { Entry } from "./entry.js";
import { ChunkError } from "./errors.js";
import { BlockSymbols, SymbolTable } from "./symbols.js";
import { chunkChecksum } from "./ref.js";
import {
  CODEC_SNAPPY,
  CRC_BYTES,
  HEADER_BYTES,
  MAGIC,
  MAX_BLOCK_RAW_BYTES,
  MAX_FOOTER_BYTES,
  MAX_SYMBOLS_RAW_BYTES,
  TRAILER_BYTES,
  VERSION,
  VERSION_1,
  VERSION_2,
} from "./format.js";
import { SymbolFilter } from "./filter.js";

/** What {@link ChunkReader.entries} reads. */
export interface ReadOptions {
  /** Only entries at or after this timestamp, ns. */
  from?: bigint;
  /** Only entries before this timestamp, ns (exclusive, as a query's end). */
  through?: bigint;
  /** `forward` (oldest first, the default) or `backward` (newest first). */
  direction?: "forward" | "backward";
  /** Only the blocks this accepts (by index) are read: e.g. {@link ChunkReader.blockMayHold}. */
  blocks?: (block: number) => boolean;
  /** Only the entries this accepts (by their metadata's symbol ids) are decoded. */
  keep?: EntryTest;
}

/** Distinct strings whose symbol ids a reader remembers before it forgets them all. */
const MAX_REMEMBERED_IDS = 1024;

/** A chunk decoded whole by {@link decodeChunk}. */
export interface DecodedChunk {
  /** Every entry, oldest first; equal timestamps in the order they were appended. */
  readonly entries: Entry[];
  readonly from: bigint;
  readonly through: bigint;
}

/**
 * Reads an encoded chunk (versions 1 to 3). The constructor checks the header, the
 * footer (its checksum, every declared offset, length and count against the object's size
 * and the format's limits), and the checksums and sizes of the symbol sections; their
 * layout is checked when first used (see {@link SymbolTable} and {@link BlockSymbols}: a
 * chunk kept by false positive is searched, not walked), a symbol decoded when first used,
 * and blocks checked (CRC-32C, snappy, payload) when read, so a querier that reads only the
 * blocks overlapping its range, or only those that may hold its needle, decompresses only
 * those. Every failure is a {@link ChunkError}; {@link check} makes them all now.
 *
 * It may hold the chunk's tail alone (the footer and the symbol sections, as a store's
 * `getTail` reads them; {@link tailLength} says how much that is): it answers everything but
 * the blocks' entries, and {@link missing} names the byte ranges of the blocks it lacks,
 * which {@link addBlocks} takes once read. A needle query reads a chunk kept by false
 * positive no further than its tail.
 */
export class ChunkReader {
  /** The blocks, in the order they were cut. */
  readonly blocks: readonly BlockMeta[];
  /** Interned metadata names and values. */
  private readonly symbols: SymbolTable;
  /** The symbols each block refers to; undefined for version 1, which does not record them. */
  private readonly blockSymbols: BlockSymbols | undefined;
  /** The symbol filter (version 3): a value it refuses is not searched for. */
  private readonly filter: SymbolFilter | undefined;
  /** `symbolIds` answers, remembered (a cached reader answers many queries: bounded). */
  private readonly idsOf = new Map<string, number[]>();
  /** Earliest timestamp in the chunk, ns. */
  readonly from: bigint;
  /** Latest timestamp in the chunk, ns (inclusive). */
  readonly through: bigint;
  /** Number of entries. */
  readonly entryCount: number;
  /** The encoded chunk's size, bytes (what it holds of it may be its tail alone). */
  readonly byteLength: number;
  /**
   * What the reader holds, in bytes: what it has of the chunk and its decompressed symbol
   * sections (what a cache of readers weighs it by); it grows as blocks are added.
   */
  get retainedBytes(): number {
    return this.retained;
  }
  private retained: number;
  /** The chunk's last bytes: the whole chunk, or its tail from {@link base} on. */
  private readonly bytes: Uint8Array;
  /** Where {@link bytes} starts in the chunk. */
  private readonly base: number;
  /** The bytes of the blocks before {@link base} that {@link addBlocks} added, by block. */
  private readonly added: (Uint8Array | undefined)[];

  /**
   * Reads `bytes`, the chunk whole or (when `size`, the chunk's size, is larger) its last
   * `bytes.byteLength` bytes, which must hold at least {@link tailLength} of them.
   */
  constructor(bytes: Uint8Array, size = bytes.byteLength) {
    const base = size - bytes.byteLength;
    if (!Number.isSafeInteger(size) || base < 0) {
      throw new RangeError(`${bytes.byteLength} bytes is more than a ${size}-byte chunk`);
    }
    this.bytes = bytes;
    this.base = base;
    this.byteLength = size;
    if (size < HEADER_BYTES + TRAILER_BYTES) {
      throw new ChunkError("truncated", `${size} bytes is shorter than header and trailer`);
    }
    // A tail has no header: its version is the footer's shape (below).
    let version: number | undefined;
    if (base === 0) {
      for (let i = 0; i < MAGIC.length; i++) {
        if (bytes[i] !== MAGIC[i]) throw new ChunkError("bad_magic");
      }
      version = bytes[4];
      if (version !== VERSION && version !== VERSION_2 && version !== VERSION_1)
        throw new ChunkError("unsupported_version", `version ${version}`);
      if (bytes[5] !== CODEC_SNAPPY) throw new ChunkError("unsupported_codec", `codec ${bytes[5]}`);
      if (bytes[6] !== 0 || bytes[7] !== 0)
        throw new ChunkError("corrupt", "reserved header bytes are not zero");
    } else if (bytes.byteLength < TRAILER_BYTES) {
      throw new ChunkError("truncated", `a tail of ${bytes.byteLength} bytes has no trailer`);
    }

    const footer = readFooter(bytes, size, base, version);
    if (footer.symbolsOffset < base) throw short(bytes.byteLength, size - footer.symbolsOffset);
    const { blocks, symbolsOffset, symbolsEnd, symbolCount } = footer;
    const blockCount = blocks.length;
    this.blocks = blocks;
    this.from = footer.from;
    this.through = footer.through;
    this.entryCount = footer.entryCount;
    const raw = this.section(
      symbolsOffset,
      footer.symbolsLength,
      footer.symbolsRaw,
      "symbol table",
    );
    this.symbols = new SymbolTable(raw, symbolCount);
    let retained = bytes.byteLength + raw.byteLength;
    if (footer.version !== VERSION_1) {
      const where = "block symbols";
      const raw = this.section(
        symbolsEnd,
        footer.blockSymbolsLength,
        footer.blockSymbolsRaw,
        where,
      );
      this.blockSymbols = new BlockSymbols(raw, blockCount, symbolCount);
      retained += raw.byteLength;
    }
    if (footer.filter !== undefined) this.filter = filterAt(bytes, base, footer.filter);
    this.retained = retained;
    this.added = new Array<Uint8Array | undefined>(blockCount);
  }

  /**
   * How many of a chunk's last bytes a reader needs (its footer and symbol sections),
   * judged from `tail`, the last bytes of the `size`-byte chunk: at most `size`, and more
   * than `tail` holds when it is too short (read that many and ask again: the first answer
   * may know only the footer's length). Unchecked: the reader checks what it is given.
   */
  static tailLength(tail: Uint8Array, size: number): number {
    const n = tail.byteLength;
    if (n < TRAILER_BYTES || size <= n) return size;
    const footer = new ByteReader(tail, "trailer", "truncated", n - TRAILER_BYTES).u32le();
    const footerBytes = footer + TRAILER_BYTES;
    if (footerBytes > n) return Math.min(size, footerBytes);
    // The footer starts with the symbol table's offset.
    let symbolsOffset = 0;
    try {
      symbolsOffset = new ByteReader(tail, "footer", "corrupt", n - footerBytes).uvarint(size);
    } catch {
      return size; // damaged: the reader, given it whole, says how
    }
    return size - symbolsOffset;
  }

  /**
   * How many of a chunk's last bytes {@link symbolFilter} needs (trailer, footer and, in
   * version 3, the symbol filter; an older chunk's whole {@link tailLength}), judged from
   * `tail` as {@link tailLength} judges. Unchecked.
   */
  static filterLength(tail: Uint8Array, size: number): number {
    const n = tail.byteLength;
    if (n < TRAILER_BYTES || size <= n) return size;
    const footerBytes =
      new ByteReader(tail, "trailer", "truncated", n - TRAILER_BYTES).u32le() + TRAILER_BYTES;
    if (footerBytes > n) return Math.min(size, footerBytes);
    try {
      const footer = readFooter(tail, size, size - n, undefined, false);
      return footer.filter === undefined
        ? size - footer.symbolsOffset
        : size - footer.filter.offset;
    } catch {
      return size; // damaged: the reader, given it whole, says how
    }
  }

  /**
   * The symbol filter of the `size`-byte chunk whose last bytes are `tail` (at least
   * {@link filterLength} of them), its footer and filter checked; undefined for a chunk
   * older than version 3, which has none.
   */
  static symbolFilter(tail: Uint8Array, size: number): SymbolFilter | undefined {
    const base = size - tail.byteLength;
    if (!Number.isSafeInteger(size) || base < 0) {
      throw new RangeError(`${tail.byteLength} bytes is more than a ${size}-byte chunk`);
    }
    if (tail.byteLength < TRAILER_BYTES || size < HEADER_BYTES + TRAILER_BYTES) {
      throw new ChunkError("truncated", `a tail of ${tail.byteLength} bytes has no trailer`);
    }
    const footer = readFooter(tail, size, base, undefined, false);
    return footer.filter === undefined ? undefined : filterAt(tail, base, footer.filter);
  }

  /**
   * The byte ranges of the chunk, one per run of adjacent blocks, that hold the blocks
   * `wanted` accepts and the reader lacks: what {@link addBlocks} needs.
   */
  missing(wanted: (block: number) => boolean): { offset: number; length: number }[] {
    const out: { offset: number; length: number }[] = [];
    for (let i = 0; i < this.blocks.length; i++) {
      const b = this.blocks[i]!;
      if (b.offset >= this.base || this.added[i] !== undefined || !wanted(i)) continue;
      const end = b.offset + b.length + CRC_BYTES;
      const last = out[out.length - 1];
      if (last !== undefined && last.offset + last.length === b.offset)
        last.length = end - last.offset;
      else out.push({ offset: b.offset, length: end - b.offset });
    }
    return out;
  }

  /**
   * Takes `data`, the chunk's bytes from `offset` on: every block it holds whole that the
   * reader lacked is read from it from now on (checked when read, as any block).
   */
  addBlocks(offset: number, data: Uint8Array): void {
    const end = offset + data.byteLength;
    for (let i = 0; i < this.blocks.length; i++) {
      const b = this.blocks[i]!;
      const blockEnd = b.offset + b.length + CRC_BYTES;
      if (b.offset >= this.base || this.added[i] !== undefined) continue;
      if (b.offset < offset || blockEnd > end) continue;
      this.added[i] = data.subarray(b.offset - offset, blockEnd - offset);
      this.retained += b.length + CRC_BYTES;
    }
  }

  /** Number of distinct metadata names and values in the chunk. */
  get symbolCount(): number {
    return this.symbols.count;
  }

  /**
   * The ids `s` has in the symbol table (none when the chunk does not hold it), found by
   * its bytes: what an {@link EntryTest} compares an entry's metadata with.
   */
  symbolIds(s: string): readonly number[] {
    let ids = this.idsOf.get(s);
    if (ids === undefined) {
      ids = this.filter?.mayHold(s) === false ? [] : this.symbols.idsOf(s);
      if (this.idsOf.size >= MAX_REMEMBERED_IDS) this.idsOf.clear();
      this.idsOf.set(s, ids);
    }
    return ids;
  }

  /**
   * Whether block `b` may hold an entry with `s` as a metadata name or value: false when
   * the chunk holds no such symbol, or (version 2) the block's entries never refer to it.
   */
  blockMayHold(b: number, s: string): boolean {
    const ids = this.symbolIds(s);
    const index = this.blockSymbols;
    if (index === undefined) return ids.length > 0;
    for (const id of ids) if (index.has(b, id)) return true;
    return false;
  }

  /**
   * Decodes block `i` (checksum, decompression, payload), entries in timestamp order; only
   * those `keep` accepts when given.
   */
  block(i: number, keep?: EntryTest): Entry[] {
    const meta = this.blocks[i];
    if (meta === undefined) throw new RangeError(`no block ${i}`);
    const where = `block ${i}`;
    let raw: Uint8Array;
    if (meta.offset >= this.base)
      raw = this.section(meta.offset, meta.length, meta.rawLength, where);
    else {
      const added = this.added[i];
      if (added === undefined) throw new RangeError(`block ${i} is not read (see missing)`);
      raw = checked(added, 0, meta.length, meta.rawLength, where);
    }
    return decodeBlockPayload(raw, meta, this.symbolAt, this.symbols.count, where, keep);
  }

  /**
   * Entries in timestamp order (equal timestamps in append order; backward is the exact
   * reverse), optionally only those in [from, through). Blocks that do not overlap the
   * range are not decompressed. Overlapping blocks (entries that arrived out of order)
   * are decoded together and merged; others one at a time.
   */
  *entries(options: ReadOptions = {}): Generator<Entry, void, undefined> {
    const lo = options.from;
    const hi = options.through;
    const backward = options.direction === "backward";
    const wanted = options.blocks;
    const keep = options.keep;
    const selected: number[] = [];
    for (let i = 0; i < this.blocks.length; i++) {
      const b = this.blocks[i]!;
      if (
        (lo === undefined || b.maxTs >= lo) &&
        (hi === undefined || b.minTs < hi) &&
        (wanted === undefined || wanted(i))
      )
        selected.push(i);
    }
    // Clusters of blocks whose time ranges overlap, in time order.
    selected.sort((a, b) => {
      const x = this.blocks[a]!.minTs;
      const y = this.blocks[b]!.minTs;
      return x < y ? -1 : x > y ? 1 : a - b;
    });
    const clusters: number[][] = [];
    let end: bigint | undefined;
    for (const i of selected) {
      const b = this.blocks[i]!;
      const last = clusters[clusters.length - 1];
      if (last !== undefined && end !== undefined && b.minTs <= end) {
        last.push(i);
        if (b.maxTs > end) end = b.maxTs;
      } else {
        clusters.push([i]);
        end = b.maxTs;
      }
    }
    if (backward) clusters.reverse();
    for (const cluster of clusters) {
      let entries: Entry[];
      if (cluster.length === 1) {
        entries = this.block(cluster[0]!, keep);
      } else {
        // Concatenated in cut order, then a stable sort: equal timestamps stay in append
        // order, because earlier blocks hold earlier appends.
        cluster.sort((a, b) => a - b);
        entries = cluster.flatMap((i) => this.block(i, keep));
        entries.sort((a, b) =>
          a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0,
        );
      }
      if (backward) {
        for (let j = entries.length - 1; j >= 0; j--) {
          const e = entries[j]!;
          if ((lo === undefined || e.timestamp >= lo) && (hi === undefined || e.timestamp < hi))
            yield e;
        }
      } else {
        for (const e of entries) {
          if ((lo === undefined || e.timestamp >= lo) && (hi === undefined || e.timestamp < hi))
            yield e;
        }
      }
    }
  }

  /** Checks what is otherwise checked at first use: the symbol table and the block symbols. */
  check(): void {
    this.symbols.check();
    this.blockSymbols?.decode();
    this.filter?.check();
  }

  private readonly symbolAt = (i: number): string => this.symbols.get(i);

  /** The section at `offset` (in the bytes the reader was made with), checked and decompressed. */
  private section(offset: number, length: number, rawLength: number, where: string): Uint8Array {
    return checked(this.bytes, offset - this.base, length, rawLength, where);
  }
}

/** Checks the CRC-32C of `bytes`' section at `at` and decompresses it to exactly `rawLength` bytes. */
function checked(
  bytes: Uint8Array,
  at: number,
  length: number,
  rawLength: number,
  where: string,
): Uint8Array {
  const data = bytes.subarray(at, at + length);
  const stored = new ByteReader(bytes, where, "corrupt", at + length).u32le();
  if (crc32c(data) !== stored) throw new ChunkError("bad_checksum", where);
  return snappyUncompress(data, rawLength, where);
}

/** A chunk's footer, checked: its blocks and where its sections are. */
interface Footer {
  readonly version: number;
  readonly blocks: BlockMeta[];
  readonly from: bigint;
  readonly through: bigint;
  readonly entryCount: number;
  readonly symbolsOffset: number;
  readonly symbolsLength: number;
  readonly symbolsRaw: number;
  readonly symbolCount: number;
  /** Where the symbol table (and its CRC) ends: the block symbols start. */
  readonly symbolsEnd: number;
  readonly blockSymbolsLength: number;
  readonly blockSymbolsRaw: number;
  /** Version 3: the symbol filter's section (its CRC follows it). */
  readonly filter: { readonly offset: number; readonly length: number } | undefined;
}

/**
 * Reads and checks the trailer and footer of the `size`-byte chunk whose bytes from
 * `base` on are `bytes`: the footer's checksum, every declared offset, length and count
 * against the object's size and the format's limits. `version` is the header's, when
 * `bytes` holds it; a tail's is the footer's shape (version 1 ends after the block
 * records; version 3 says how long its symbol filter is after the block symbols').
 * Without `withBlocks`, the block records are stepped over and `blocks` is empty (what
 * reads a chunk's end needs none of them).
 */
function readFooter(
  bytes: Uint8Array,
  size: number,
  base: number,
  version: number | undefined,
  withBlocks = true,
): Footer {
  const trailer = new ByteReader(bytes, "trailer", "truncated", size - TRAILER_BYTES - base);
  const footerLength = trailer.u32le();
  const footerCrc = trailer.u32le();
  const footerEnd = size - TRAILER_BYTES;
  if (footerLength > MAX_FOOTER_BYTES)
    throw new ChunkError("too_large", `footer of ${footerLength} bytes`);
  if (footerLength > footerEnd - HEADER_BYTES) {
    throw new ChunkError("truncated", `footer of ${footerLength} bytes in a ${size}-byte chunk`);
  }
  const footerStart = footerEnd - footerLength;
  if (footerStart < base) throw short(bytes.byteLength, size - footerStart);
  if (crc32c(bytes.subarray(footerStart - base, footerEnd - base)) !== footerCrc) {
    throw new ChunkError("bad_checksum", "footer");
  }

  const f = new ByteReader(bytes, "footer", "corrupt", footerStart - base, footerEnd - base);
  const symbolsOffset = f.uvarint(footerStart);
  const symbolsLength = f.uvarint(footerStart);
  const symbolsRaw = f.uvarint(MAX_SYMBOLS_RAW_BYTES);
  const symbolCount = f.uvarint(symbolsRaw);
  const symbolsEnd = symbolsOffset + symbolsLength + CRC_BYTES;
  if (symbolsEnd > footerStart) f.fail("symbol table runs into the footer");
  // Each block record takes at least 6 bytes: checked before the array is allocated.
  const blockCount = f.uvarint(Math.floor(f.remaining / 6));
  if (blockCount === 0) f.fail("no blocks");
  const blocks: BlockMeta[] = new Array<BlockMeta>(withBlocks ? blockCount : 0);
  let expected = HEADER_BYTES;
  let entryCount = 0;
  let from = 0n;
  let through = 0n;
  // A reader of the end alone steps over the block records: their values are checked by
  // the reader that reads blocks.
  if (!withBlocks) {
    for (let i = 0; i < 6 * blockCount; i++) f.skipVarint();
    expected = symbolsOffset;
  }
  for (let i = 0; withBlocks && i < blockCount; i++) {
    const offset = f.uvarint(footerStart);
    const length = f.uvarint(footerStart);
    const rawLength = f.uvarint(MAX_BLOCK_RAW_BYTES);
    const minTs = f.varint64();
    const maxTs = minTs + f.uvarint64();
    const entries = f.uvarint(Math.floor(rawLength / MIN_ENTRY_BYTES));
    if (offset !== expected) f.fail(`block ${i} at ${offset}, expected ${expected}`);
    if (length === 0 || entries === 0) f.fail(`block ${i} is empty`);
    if (!isInt64(maxTs)) f.fail(`block ${i} maximum timestamp overflows int64`);
    expected = offset + length + CRC_BYTES;
    if (expected > symbolsOffset) f.fail(`block ${i} runs into the symbol table`);
    blocks[i] = { offset, length, rawLength, minTs, maxTs, entries };
    entryCount += entries;
    if (i === 0 || minTs < from) from = minTs;
    if (i === 0 || maxTs > through) through = maxTs;
  }
  if (expected !== symbolsOffset) f.fail("blocks do not end where the symbol table starts");
  if (version === undefined) {
    if (f.remaining === 0 && symbolsEnd === footerStart) version = VERSION_1;
  }
  let blockSymbolsLength = 0;
  let blockSymbolsRaw = 0;
  let filter: Footer["filter"];
  if (version === VERSION_1) {
    if (symbolsEnd !== footerStart) f.fail("symbol table does not end where the footer starts");
  } else {
    blockSymbolsLength = f.uvarint(footerStart);
    blockSymbolsRaw = f.uvarint(MAX_SYMBOLS_RAW_BYTES);
    version ??= f.remaining === 0 ? VERSION_2 : VERSION;
    let sectionsEnd = symbolsEnd + blockSymbolsLength + CRC_BYTES;
    if (version === VERSION) {
      const length = f.uvarint(footerStart);
      filter = { offset: sectionsEnd, length };
      sectionsEnd += length + CRC_BYTES;
    }
    if (sectionsEnd !== footerStart) {
      f.fail(
        version === VERSION
          ? "symbol filter does not end where the footer starts"
          : "block symbols do not end where the footer starts",
      );
    }
  }
  f.expectEnd();
  return {
    version,
    blocks,
    from,
    through,
    entryCount,
    symbolsOffset,
    symbolsLength,
    symbolsRaw,
    symbolCount,
    symbolsEnd,
    blockSymbolsLength,
    blockSymbolsRaw,
    filter,
  };
}

/** The symbol filter at `at` in the chunk (whose bytes from `base` on are `bytes`), checked. */
function filterAt(
  bytes: Uint8Array,
  base: number,
  at: { readonly offset: number; readonly length: number },
): SymbolFilter {
  const where = "symbol filter";
  if (at.offset < base) throw short(bytes.byteLength, bytes.byteLength + base - at.offset);
  const start = at.offset - base;
  const data = bytes.subarray(start, start + at.length);
  const stored = new ByteReader(bytes, where, "corrupt", start + at.length).u32le();
  if (crc32c(data) !== stored) throw new ChunkError("bad_checksum", where);
  return new SymbolFilter(data, where);
}

/** A tail that does not hold what a reader needs. */
function short(held: number, needed: number): ChunkError {
  return new ChunkError(
    "truncated",
    `a tail of ${held} bytes, the reader needs the last ${needed}`,
  );
}

/**
 * Decodes and checks a whole chunk: every block, every checksum, and, when given, the
 * object against `expectedChecksum` (the ref's: its {@link chunkChecksum}, or the CRC-32C
 * of the whole object for a chunk written before that).
 */
export function decodeChunk(bytes: Uint8Array, expectedChecksum?: number): DecodedChunk {
  if (
    expectedChecksum !== undefined &&
    chunkChecksum(bytes) !== expectedChecksum >>> 0 &&
    crc32c(bytes) !== expectedChecksum >>> 0
  ) {
    throw new ChunkError("bad_checksum", "object does not match its ref's checksum");
  }
  const reader = new ChunkReader(bytes);
  reader.check();
  return { entries: [...reader.entries()], from: reader.from, through: reader.through };
}
