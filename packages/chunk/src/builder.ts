import { isUtf8 } from "node:buffer";
import { ByteWriter, isInt64 } from "./bytes.js";
import { decodeBlockPayload } from "./block.js";
import type { BlockMeta } from "./block.js";
import { snappyCompress, snappyUncompress } from "./codec.js";
import { crc32c } from "@sieve/kit";
import { sameEntry } from "./entry.js";
import type { Entry, EntryWithBytes } from "./entry.js";
import { ChunkError } from "./errors.js";
import { StringIds } from "./intern.js";
import { symbolHash, writeSymbolFilter } from "./filter.js";
import { sortedDistinct, writeBlockSymbols } from "./symbols.js";
import { chunkChecksum } from "./ref.js";
import {
  CODEC_SNAPPY,
  CRC_BYTES,
  DEFAULT_BLOCK_TARGET_BYTES,
  HEADER_BYTES,
  MAGIC,
  MAX_FOOTER_BYTES,
  MAX_LINE_BYTES,
  MAX_SYMBOLS_RAW_BYTES,
  TRAILER_BYTES,
  VERSION,
} from "./format.js";

/** Options of {@link ChunkBuilder}. */
export interface ChunkBuilderOptions {
  /** Uncompressed bytes at which a block is cut; default 64 KiB, at most 4 MiB. */
  blockTargetBytes?: number;
}

/** An encoded chunk and the fields of its `ChunkRef`. */
export interface EncodedChunk {
  /** The chunk object, to be stored under `chunkKey(ref)`. */
  readonly bytes: Uint8Array;
  /** Earliest entry timestamp, ns, inclusive. */
  readonly from: bigint;
  /** Latest entry timestamp, ns, inclusive. */
  readonly through: bigint;
  /** CRC-32C of `bytes`, unsigned: the `checksum` of the chunk's ref and key. */
  readonly checksum: number;
  /** Number of entries. */
  readonly entryCount: number;
  /** Sum of the blocks' uncompressed payload bytes. */
  readonly uncompressedBytes: number;
  /** Sum of the entries' lines in UTF-8 bytes: the volume the index records (Loki's bytes). */
  readonly lineBytes: number;
}

/** Upper bound on an entry's encoded bytes beyond its strings: varints of delta, lengths, count. */
const ENTRY_OVERHEAD = 20;
/** Upper bound on one metadata pair's two symbol-reference varints. */
const PAIR_OVERHEAD = 10;
/**
 * Typical bytes beyond the line: a 3-4 byte delta (ms apart), a length and a count byte;
 * and 2 per pair (symbol ids under 128 or 16384). Measured within 1% of the real payload
 * on the bench's 200-byte lines with a trace_id, so blocks come out close to the target.
 */
const ENTRY_TYPICAL_OVERHEAD = 6;
const PAIR_TYPICAL_OVERHEAD = 2;
const MAX_BLOCK_TARGET_BYTES = 4 * 1024 * 1024;
/**
 * A block is also cut when the upper bound of its payload reaches this, so a block holds
 * at most this plus one entry (at most MAX_LINE_BYTES + overhead): under MAX_BLOCK_RAW_BYTES.
 */
const MAX_HEAD_UPPER_BYTES = 4 * 1024 * 1024;

interface SealedBlock {
  readonly data: Uint8Array;
  readonly crc: number;
  readonly meta: Omit<BlockMeta, "offset" | "length">;
  /** The block's timestamps in order, to find duplicate candidates without decoding. */
  readonly timestamps: BigInt64Array;
  /** The symbol ids its entries refer to, sorted, distinct. */
  readonly symbolIds: Uint32Array;
}

/**
 * Where every builder of the thread writes a block or a chunk's sections before they are
 * compressed (copied out) and the block's symbol references before they are sorted: cuts
 * and encodes run to completion, one at a time. One writer a builder held ~512 KiB each
 * (grown past the block target) outside V8's heap: 125 MiB per ingester thread of 250
 * streams.
 */
const scratch = { writer: new ByteWriter() };
/**
 * Bytes of the pages of staged open-block entries: the first page of a builder is small and
 * each next one twice the last, up to the largest (an entry past a page gets one of its own
 * size), so that a stream of a few lines holds a few lines, not 32 KiB.
 */
const FIRST_PAGE_BYTES = 1024;
const PAGE_BYTES = 32 * 1024;

/**
 * The source of an entry's line bytes ({@link EntryWithBytes}) when they are to be copied:
 * undefined for an entry without them, and for bytes that are not UTF-8, which take the
 * text's path and are written as its U+FFFD (a chunk holds UTF-8 only). Throws
 * `invalid_entry` for a range outside the source.
 */
function lineSource(entry: Entry): Buffer | undefined {
  const { source, lineStart, lineEnd } = entry as Partial<EntryWithBytes>;
  if (source === undefined) return undefined;
  if (!(lineStart! >= 0 && lineStart! <= lineEnd! && lineEnd! <= source.length)) {
    throw new ChunkError("invalid_entry", "line bytes outside their source");
  }
  return isUtf8(source.subarray(lineStart, lineEnd)) ? source : undefined;
}

/**
 * The head chunk of one stream: entries are appended in any order, cut into blocks of
 * about `blockTargetBytes` uncompressed (sorted by timestamp, snappy-compressed,
 * checksummed, their metadata strings interned in one symbol table), and encoded on
 * demand. Blocks may overlap in time when entries arrive out of order; readers merge.
 *
 * Exact duplicates (same timestamp, line and metadata, in order) are dropped anywhere in
 * the chunk, as Loki drops them: the open block is checked through a map by timestamp,
 * comparing the bytes stored; a sealed block only when its timestamp list holds the
 * timestamp, and then by decoding it (the last one decoded is cached), so in-order appends
 * never decode anything.
 *
 * Lines and metadata are stored as UTF-8: a lone UTF-16 surrogate becomes U+FFFD (so two
 * lines that differ only there are duplicates once stored, and in the open block already).
 */
export class ChunkBuilder {
  private readonly target: number;
  /**
   * The open block, held as bytes rather than entry objects: each entry's payload after its
   * timestamp (line length, line, pair count, symbol ids: exactly what the block will hold)
   * staged in pages, its timestamp in `headTs`. Lines then die young in the collector's
   * eyes instead of living in the old generation until the cut, and the cut copies bytes.
   */
  private headCount = 0;
  private headTs = new BigInt64Array(32);
  /** `headTs` as 32-bit halves (low at 2i, high at 2i+1): compared without making BigInts. */
  private headTs32 = new Int32Array(this.headTs.buffer);
  /** Entry i's staged bytes: pages[recPage[i]][recStart[i], recEnd[i]). */
  private recPage = new Uint32Array(32);
  private recStart = new Uint32Array(32);
  private recEnd = new Uint32Array(32);
  private readonly pages: Buffer[] = [];
  private page = -1;
  private pagePos = 0;
  /**
   * The open block's symbol ids, entry after entry (name, value per pair), interned as the
   * entries arrive: the cut lists a block's symbols from them.
   */
  private headIds = new Uint32Array(64);
  private headIdCount = 0;
  /** The last entry's ids in `headIds`: still there after a cut, until the next append. */
  private lastIdsStart = 0;
  private lastIdsEnd = 0;
  /** The open block's latest timestamp. */
  private headMaxTs: bigint | undefined;
  /**
   * The open block's entries by timestamp, built when an entry arrives older than the
   * latest (until then its entries are in time order, and equal ones sit at its end): an
   * open-addressing table of entry index + 1 (0: empty), placed by a hash of the
   * timestamp's halves; entries of one timestamp sit in the probe run from its slot. A
   * `Map` keyed by BigInt hashed each key anew: half of an ingester's appends on pushes
   * that arrive out of order.
   */
  private byTs: Int32Array | undefined;
  /** Estimated payload bytes of the open block (what a block is cut on). */
  private headBytes = 0;
  /** Upper bound on them, which keeps every block under MAX_BLOCK_RAW_BYTES. */
  private headUpperBytes = 0;
  private readonly blocks: SealedBlock[] = [];
  private sealedMaxTs: bigint | undefined;
  private sealedRawBytes = 0;
  private sealedDataBytes = 0;
  private readonly symbolIds = new StringIds();
  /** The strings by id (`symbolIds.strings`). */
  private readonly symbols = this.symbolIds.strings;
  private symbolBytes = 0;
  private count = 0;
  private lines = 0;
  private minTs: bigint | undefined;
  private maxTs: bigint | undefined;
  private decoded: { block: number; entries: Entry[] } | undefined;

  constructor(options: ChunkBuilderOptions = {}) {
    const target = options.blockTargetBytes ?? DEFAULT_BLOCK_TARGET_BYTES;
    if (!Number.isSafeInteger(target) || target < 1 || target > MAX_BLOCK_TARGET_BYTES) {
      throw new ChunkError(
        "invalid_options",
        `blockTargetBytes ${target} not in [1, ${MAX_BLOCK_TARGET_BYTES}]`,
      );
    }
    this.target = target;
  }

  /** Entries held (duplicates excluded). */
  get entryCount(): number {
    return this.count;
  }

  /** Earliest timestamp held, or undefined when empty. */
  get from(): bigint | undefined {
    return this.minTs;
  }

  /** Latest timestamp held, or undefined when empty. */
  get through(): bigint | undefined {
    return this.maxTs;
  }

  /** Number of blocks cut so far (the open block excluded). */
  get blockCount(): number {
    return this.blocks.length;
  }

  /** Sum of the held entries' lines in UTF-8 bytes (exact). */
  get lineBytes(): number {
    return this.lines;
  }

  /** Uncompressed bytes: exact for cut blocks, estimated for the open block. */
  get uncompressedBytes(): number {
    return this.sealedRawBytes + this.headBytes;
  }

  /**
   * Estimated size of the encoded chunk: cut blocks exactly, the open block at the
   * compression ratio of the cut ones (1 before the first cut), symbols uncompressed,
   * plus header, footer and trailer. The ingester compares it with its flush target.
   */
  get compressedBytesEstimate(): number {
    const ratio = this.sealedRawBytes > 0 ? this.sealedDataBytes / this.sealedRawBytes : 1;
    return (
      HEADER_BYTES +
      this.sealedDataBytes +
      this.blocks.length * (CRC_BYTES + 40) +
      Math.ceil(this.headBytes * ratio) +
      this.symbolBytes +
      // The symbol filter: ~8.5 bits a symbol (filter.ts).
      Math.ceil((this.symbols.length * 9) / 8) +
      2 * CRC_BYTES +
      TRAILER_BYTES +
      40
    );
  }

  /**
   * Adds an entry, its line copied from its bytes when it has them ({@link EntryWithBytes});
   * answers false when it is an exact duplicate of one already held (and drops it). Throws
   * `invalid_entry` for a timestamp outside int64, a non-string line or metadata, line
   * bytes outside their source, or an entry above MAX_LINE_BYTES; `too_large` when the
   * symbol table is full.
   */
  append(entry: Entry): boolean {
    const source = lineSource(entry);
    const bytes = this.validate(entry, source !== undefined);
    const ts = entry.timestamp;
    const md = entry.structuredMetadata;
    // Interned first (a duplicate adds no symbol: its strings are in the table already),
    // so that the entry's staged form exists to compare and to keep. The table's size is
    // known as entries arrive, and a string is hashed into one map once.
    const idStart = this.headIdCount;
    if (idStart + 2 * md.length > this.headIds.length) {
      this.headIds = grow(this.headIds, idStart + 2 * md.length);
    }
    for (const p of md) {
      this.headIds[this.headIdCount++] = this.intern(p.name);
      this.headIds[this.headIdCount++] = this.intern(p.value);
    }
    // Written in place past the page's last entry; kept by moving `pagePos` past it.
    const page = this.room(10 + bytes.line + 10 * md.length);
    const start = this.pagePos;
    let pos = putUvarint(page, start, bytes.line);
    if (source === undefined) pos += page.write(entry.line, pos, bytes.line, "utf8");
    else {
      const { lineStart, lineEnd } = entry as EntryWithBytes;
      pos += source.copy(page, pos, lineStart, lineEnd);
    }
    pos = putUvarint(page, pos, md.length);
    for (let j = idStart; j < this.headIdCount; j++) pos = putUvarint(page, pos, this.headIds[j]!);
    if (this.isDuplicate(entry, page, start, pos)) {
      this.headIdCount = idStart;
      return false;
    }
    const n = this.headCount;
    this.stage(n, start, pos);
    this.headTs[n] = ts;
    this.headCount = n + 1;
    if (this.byTs !== undefined) this.indexTs(n);
    if (this.headMaxTs === undefined || ts > this.headMaxTs) this.headMaxTs = ts;
    this.headBytes += bytes.estimate;
    this.headUpperBytes += bytes.upper;
    this.lastIdsStart = idStart;
    this.lastIdsEnd = this.headIdCount;
    this.count++;
    this.lines += bytes.line;
    if (this.minTs === undefined || ts < this.minTs) this.minTs = ts;
    if (this.maxTs === undefined || ts > this.maxTs) this.maxTs = ts;
    if (this.headBytes >= this.target || this.headUpperBytes >= MAX_HEAD_UPPER_BYTES) this.cut();
    return true;
  }

  /** Builds `byTs` with at least `slots` slots (a power of two) over the open block's entries. */
  private buildByTs(slots: number): void {
    let size = 64;
    while (size < slots) size *= 2;
    this.byTs = new Int32Array(size);
    for (let i = 0; i < this.headCount; i++) this.indexTs(i);
  }

  /** Places open-block entry i in `byTs` (grown to stay at most half full). */
  private indexTs(i: number): void {
    const byTs = this.byTs!;
    if (2 * (i + 1) > byTs.length) {
      this.buildByTs(2 * byTs.length); // places entries [0, headCount), i among them
      return;
    }
    const mask = byTs.length - 1;
    let slot = tsSlot(this.headTs32[2 * i]!, this.headTs32[2 * i + 1]!) & mask;
    while (byTs[slot] !== 0) slot = (slot + 1) & mask;
    byTs[slot] = i + 1;
  }

  /** The page to stage the next entry in, with room for `bytes` at `pagePos`. */
  private room(bytes: number): Buffer {
    if (this.page < 0 || this.pagePos + bytes > this.pages[this.page]!.length) {
      this.page++;
      this.pagePos = 0;
      if (this.page === this.pages.length || this.pages[this.page]!.length < bytes) {
        const last = this.page === 0 ? FIRST_PAGE_BYTES / 2 : this.pages[this.page - 1]!.length;
        const size = Math.min(PAGE_BYTES, 2 * last);
        // Not from the shared pool: a page kept must not keep an 8 KiB pool slab of others.
        this.pages[this.page] = Buffer.allocUnsafeSlow(Math.max(size, bytes));
      }
    }
    return this.pages[this.page]!;
  }

  /** Records entry n as staged at [start, end) of the current page. */
  private stage(n: number, start: number, end: number): void {
    if (n >= this.headTs.length) {
      const grownTs = new BigInt64Array(2 * this.headTs.length);
      grownTs.set(this.headTs);
      this.headTs = grownTs;
      this.headTs32 = new Int32Array(grownTs.buffer);
      this.recPage = grow(this.recPage, n + 1);
      this.recStart = grow(this.recStart, n + 1);
      this.recEnd = grow(this.recEnd, n + 1);
    }
    this.recPage[n] = this.page;
    this.recStart[n] = start;
    this.recEnd[n] = end;
    this.pagePos = end;
  }

  /** Whether open-block entry i's staged bytes are `buf[start, end)`. */
  private sameStaged(i: number, buf: Buffer, start: number, end: number): boolean {
    const from = this.recStart[i]!;
    const to = this.recEnd[i]!;
    return (
      to - from === end - start &&
      buf.compare(this.pages[this.recPage[i]!]!, from, to, start, end) === 0
    );
  }

  /**
   * The symbol ids of the last entry appended (name, value for each of its pairs; a
   * duplicate dropped is not appended), valid until the next append, a cut in between
   * included: what lets a bloom builder tell repeated metadata apart
   * without hashing its strings again. Ids index {@link symbolList}.
   */
  get lastEntryIds(): Uint32Array {
    return this.headIds.subarray(this.lastIdsStart, this.lastIdsEnd);
  }

  /** The symbol table so far, by id (see {@link lastEntryIds}); only grows until encoded. */
  get symbolList(): readonly string[] {
    return this.symbols;
  }

  /** Cuts the open block now (the builder does it at the target size and on encode). */
  cut(): void {
    const n = this.headCount;
    if (n === 0) return;
    // In time order unless an older entry arrived (which built `byTs`): then sorted by
    // timestamp, equal timestamps in append order.
    const headTs = this.headTs;
    const order =
      this.byTs === undefined
        ? undefined
        : Array.from({ length: n }, (_, i) => i).sort((a, b) => {
            const ta = headTs[a]!;
            const tb = headTs[b]!;
            return ta < tb ? -1 : ta > tb ? 1 : a - b;
          });
    const w = scratch.writer;
    w.reset();
    const minTs = headTs[order === undefined ? 0 : order[0]!]!;
    let prev = minTs;
    const timestamps = new BigInt64Array(n);
    w.varint64(minTs);
    for (let i = 0; i < n; i++) {
      const k = order === undefined ? i : order[i]!;
      const ts = headTs[k]!;
      timestamps[i] = ts;
      if (i > 0) w.uvarint64(ts - prev);
      prev = ts;
      const start = this.recStart[k]!;
      const end = this.recEnd[k]!;
      w.ensure(end - start);
      this.pages[this.recPage[k]!]!.copy(w.buf, w.pos, start, end);
      w.pos += end - start;
    }
    const rawLength = w.pos;
    const data = snappyCompress(w.buf.subarray(0, rawLength));
    this.blocks.push({
      data,
      crc: crc32c(data),
      meta: { rawLength, minTs, maxTs: prev, entries: n },
      timestamps,
      symbolIds: sortedDistinct(this.headIds.slice(0, this.headIdCount)),
    });
    if (this.sealedMaxTs === undefined || prev > this.sealedMaxTs) this.sealedMaxTs = prev;
    this.sealedRawBytes += rawLength;
    this.sealedDataBytes += data.byteLength;
    this.headCount = 0;
    this.page = -1;
    this.pagePos = 0;
    this.headIdCount = 0;
    this.byTs = undefined;
    this.headMaxTs = undefined;
    this.headBytes = 0;
    this.headUpperBytes = 0;
  }

  /**
   * Cuts the open block and encodes the chunk. The builder stays usable: appending more
   * and encoding again gives a chunk holding everything. Throws `empty_chunk` when empty.
   */
  encode(): EncodedChunk {
    this.cut();
    if (this.blocks.length === 0 || this.minTs === undefined || this.maxTs === undefined) {
      throw new ChunkError("empty_chunk");
    }
    const w = scratch.writer;
    w.reset();
    w.uvarint(this.symbols.length);
    const hashes = new Uint32Array(this.symbols.length);
    for (let i = 0; i < this.symbols.length; i++) {
      w.string(this.symbols[i]!);
      hashes[i] = symbolHash(w.buf.subarray(w.pos - Buffer.byteLength(this.symbols[i]!), w.pos));
    }
    const symbolsRaw = w.pos;
    const symbols = snappyCompress(w.buf.subarray(0, symbolsRaw));
    w.reset();
    writeBlockSymbols(
      w,
      this.blocks.map((b) => b.symbolIds),
    );
    const blockSymbolsRaw = w.pos;
    const blockSymbols = snappyCompress(w.buf.subarray(0, blockSymbolsRaw));
    w.reset();
    writeSymbolFilter(w, hashes);
    // A view of the scratch writer, copied into the chunk below before anything reuses it.
    const filter = w.buf.subarray(0, w.pos);

    let offset = HEADER_BYTES;
    const footer = new ByteWriter(64 + this.blocks.length * 40);
    const blocksEnd = this.blocks.reduce((n, b) => n + b.data.byteLength + CRC_BYTES, offset);
    footer.uvarint(blocksEnd);
    footer.uvarint(symbols.byteLength);
    footer.uvarint(symbolsRaw);
    footer.uvarint(this.symbols.length);
    footer.uvarint(this.blocks.length);
    for (const b of this.blocks) {
      footer.uvarint(offset);
      footer.uvarint(b.data.byteLength);
      footer.uvarint(b.meta.rawLength);
      footer.varint64(b.meta.minTs);
      footer.uvarint64(b.meta.maxTs - b.meta.minTs);
      footer.uvarint(b.meta.entries);
      offset += b.data.byteLength + CRC_BYTES;
    }
    footer.uvarint(blockSymbols.byteLength);
    footer.uvarint(blockSymbolsRaw);
    footer.uvarint(filter.byteLength);
    if (footer.pos > MAX_FOOTER_BYTES) throw new ChunkError("too_large", "footer: too many blocks");

    const total =
      blocksEnd +
      symbols.byteLength +
      blockSymbols.byteLength +
      filter.byteLength +
      3 * CRC_BYTES +
      footer.pos +
      TRAILER_BYTES;
    const out = Buffer.allocUnsafe(total);
    out.set(MAGIC, 0);
    out[4] = VERSION;
    out[5] = CODEC_SNAPPY;
    out[6] = 0;
    out[7] = 0;
    let pos = HEADER_BYTES;
    for (const b of this.blocks) {
      out.set(b.data, pos);
      pos += b.data.byteLength;
      out.writeUInt32LE(b.crc, pos);
      pos += CRC_BYTES;
    }
    out.set(symbols, pos);
    pos += symbols.byteLength;
    out.writeUInt32LE(crc32c(symbols), pos);
    pos += CRC_BYTES;
    out.set(blockSymbols, pos);
    pos += blockSymbols.byteLength;
    out.writeUInt32LE(crc32c(blockSymbols), pos);
    pos += CRC_BYTES;
    out.set(filter, pos);
    pos += filter.byteLength;
    out.writeUInt32LE(crc32c(filter), pos);
    pos += CRC_BYTES;
    const footerBytes = footer.buf.subarray(0, footer.pos);
    out.set(footerBytes, pos);
    pos += footer.pos;
    out.writeUInt32LE(footer.pos, pos);
    out.writeUInt32LE(crc32c(footerBytes), pos + 4);
    const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    return {
      bytes,
      from: this.minTs,
      through: this.maxTs,
      checksum: chunkChecksum(bytes),
      entryCount: this.count,
      uncompressedBytes: this.sealedRawBytes,
      lineBytes: this.lines,
    };
  }

  /** Checks an entry's types and sizes, and room for its metadata; answers its encoded size. */
  private validate(
    entry: Entry,
    withBytes: boolean,
  ): { estimate: number; upper: number; line: number } {
    const { timestamp, structuredMetadata: md } = entry;
    if (typeof timestamp !== "bigint" || !isInt64(timestamp)) {
      throw new ChunkError(
        "invalid_entry",
        `timestamp must be a signed 64-bit bigint, got ${String(timestamp)}`,
      );
    }
    let lineBytes: number;
    if (withBytes) {
      const { lineStart, lineEnd } = entry as EntryWithBytes;
      lineBytes = lineEnd - lineStart;
    } else {
      const { line } = entry;
      if (typeof line !== "string") throw new ChunkError("invalid_entry", "line must be a string");
      lineBytes = Buffer.byteLength(line, "utf8");
    }
    if (!Array.isArray(md))
      throw new ChunkError("invalid_entry", "structuredMetadata must be an array");
    let bytes = ENTRY_OVERHEAD + lineBytes;
    // An upper bound on the symbol bytes it may add (3 UTF-8 bytes a UTF-16 unit): only an
    // entry that could fill the table has its strings looked up.
    let symbols = 0;
    for (const pair of md as readonly unknown[]) {
      const p = pair as { name?: unknown; value?: unknown };
      if (
        typeof pair !== "object" ||
        pair === null ||
        typeof p.name !== "string" ||
        typeof p.value !== "string"
      ) {
        throw new ChunkError("invalid_entry", "metadata pairs must be {name, value} strings");
      }
      bytes += PAIR_OVERHEAD;
      symbols += 3 * (p.name.length + p.value.length) + 10;
    }
    if (bytes - ENTRY_OVERHEAD > MAX_LINE_BYTES) {
      throw new ChunkError(
        "invalid_entry",
        `entry of ${bytes - ENTRY_OVERHEAD} bytes exceeds ${MAX_LINE_BYTES}`,
      );
    }
    if (this.symbolBytes + symbols > MAX_SYMBOLS_RAW_BYTES) {
      const added = new Set<string>();
      for (const p of entry.structuredMetadata) {
        for (const s of [p.name, p.value]) if (this.symbolIds.idOf(s) < 0) added.add(s);
      }
      let exact = 0;
      for (const s of added) exact += Buffer.byteLength(s, "utf8") + 5;
      if (this.symbolBytes + exact > MAX_SYMBOLS_RAW_BYTES) {
        throw new ChunkError("too_large", "symbol table is full: flush this chunk");
      }
    }
    const estimate = ENTRY_TYPICAL_OVERHEAD + lineBytes + md.length * PAIR_TYPICAL_OVERHEAD;
    return { estimate, upper: bytes, line: lineBytes };
  }

  /** Whether `entry`, staged as `buf[start, end)`, is held already. */
  private isDuplicate(entry: Entry, buf: Buffer, start: number, end: number): boolean {
    const ts = entry.timestamp;
    if (this.headMaxTs === undefined || ts > this.headMaxTs) {
      // Newer than the open block: nothing there to duplicate.
    } else if (this.byTs === undefined && ts === this.headMaxTs) {
      // Compared as stored (UTF-8), as the entries will read.
      for (let i = this.headCount - 1; i >= 0 && this.headTs[i] === ts; i--) {
        if (this.sameStaged(i, buf, start, end)) return true;
      }
    } else {
      if (this.byTs === undefined) this.buildByTs(4 * this.headCount);
      const byTs = this.byTs!;
      const mask = byTs.length - 1;
      tsScratch[0] = ts;
      const lo = tsHalves[0]!;
      const hi = tsHalves[1]!;
      const halves = this.headTs32;
      for (let slot = tsSlot(lo, hi) & mask; ; slot = (slot + 1) & mask) {
        const i = byTs[slot]! - 1;
        if (i < 0) break;
        if (halves[2 * i] === lo && halves[2 * i + 1] === hi && this.sameStaged(i, buf, start, end))
          return true;
      }
    }
    // Fast path: an entry newer than every cut block cannot duplicate one of them.
    if (this.sealedMaxTs === undefined || ts > this.sealedMaxTs) return false;
    for (let b = 0; b < this.blocks.length; b++) {
      const block = this.blocks[b]!;
      if (ts < block.meta.minTs || ts > block.meta.maxTs) continue;
      let i = lowerBound(block.timestamps, ts);
      if (i >= block.timestamps.length || block.timestamps[i] !== ts) continue;
      const entries = this.decodedBlock(b);
      for (; i < entries.length && entries[i]!.timestamp === ts; i++) {
        if (sameEntry(entries[i]!, entry)) return true;
      }
    }
    return false;
  }

  private decodedBlock(b: number): Entry[] {
    if (this.decoded?.block === b) return this.decoded.entries;
    const block = this.blocks[b]!;
    const meta: BlockMeta = { ...block.meta, offset: 0, length: block.data.byteLength };
    const raw = snappyUncompress(block.data, meta.rawLength, `block ${b}`);
    const entries = decodeBlockPayload(raw, meta, this.symbolAt, this.symbols.length, `block ${b}`);
    this.decoded = { block: b, entries };
    return entries;
  }

  private readonly symbolAt = (i: number): string => this.symbols[i]!;

  private intern(s: string): number {
    const before = this.symbols.length;
    const id = this.symbolIds.intern(s);
    if (this.symbols.length !== before) this.symbolBytes += Buffer.byteLength(s, "utf8") + 5;
    return id;
  }
}

/** A timestamp split into its 32-bit halves (low first) without BigInt arithmetic. */
const tsScratch = new BigInt64Array(1);
const tsHalves = new Int32Array(tsScratch.buffer);

/** Where a timestamp's halves start probing (mixed: nanosecond timestamps share low bits). */
function tsSlot(lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  return h;
}

/** Writes `v` (a non-negative safe integer) as an unsigned varint at `pos`; answers the end. */
function putUvarint(buf: Buffer, pos: number, v: number): number {
  while (v >= 0x80) {
    buf[pos++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  buf[pos++] = v;
  return pos;
}

/** A copy of `a` with room for at least `n` values (doubling). */
function grow(a: Uint32Array<ArrayBuffer>, n: number): Uint32Array<ArrayBuffer> {
  const grown = new Uint32Array(Math.max(2 * a.length, n));
  grown.set(a);
  return grown;
}

/** First index of `sorted` whose value is >= `v`. */
function lowerBound(sorted: BigInt64Array, v: bigint): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Builds and encodes a chunk from `entries` in one call (duplicates dropped). */
export function encodeChunk(entries: Iterable<Entry>, options?: ChunkBuilderOptions): EncodedChunk {
  const builder = new ChunkBuilder(options);
  for (const e of entries) builder.append(e);
  return builder.encode();
}
