import {
  BLOOM_BLOCK_FOOTER_BYTES,
  decodeBloomBlockFooter,
  decodeBloomBlockIndex,
  decodeBloomRecord,
  IndexError,
} from "@sieve/index";
import type { BloomRecord, BloomRecordLocation } from "@sieve/index";

/** Bytes counted for each record of a cached block besides its bits: map entries, filter object. */
const RECORD_OVERHEAD_BYTES = 200;

/** Why one series' bloom cannot be cut from a block: the gateway fails it open (`corrupt_bloom`). */
export class BlockRecordError extends Error {
  override readonly name = "BlockRecordError";
}

/** Where a record is in its block, from the block's (checksummed) index. */
interface RecordEntry {
  readonly fingerprint: bigint;
  readonly length: number;
  /** Its decoded filter, or why it could not be decoded (damage is permanent). */
  decoded?: BloomRecord | IndexError;
}

/**
 * A whole bloom block in memory: its checked index and its bytes, each series' filter
 * decoded (checksum checked, bits copied) on the first request for it and kept. Once every
 * record has been decoded the bytes are dropped, so a block every query reads costs its
 * filters alone; a block only some series of which are asked about keeps its bytes and the
 * filters decoded so far. Decoding lazily spares a query about a few streams the work of
 * decoding every series of each block it touches. {@link bytes} says what it holds now.
 */
export class LoadedBlock {
  private raw: Uint8Array | undefined;
  private readonly records: Map<number, RecordEntry>;
  private decodedCount = 0;
  private decodedBytes = 0;

  private constructor(bytes: Uint8Array, records: Map<number, RecordEntry>) {
    this.raw = bytes;
    this.records = records;
  }

  /**
   * Checks a block's footer and index (magic, version, checksums, records tiling the body)
   * and keeps it. Throws an `IndexError` when the block is damaged; records are checked on
   * use, each by its own checksum, so one damaged record fails only its series.
   */
  static open(bytes: Uint8Array): LoadedBlock {
    const size = bytes.length;
    const footer = decodeBloomBlockFooter(
      bytes.subarray(Math.max(0, size - BLOOM_BLOCK_FOOTER_BYTES)),
      size,
    );
    const entries = decodeBloomBlockIndex(
      bytes.subarray(footer.indexOffset, footer.indexOffset + footer.indexLength),
      footer,
    );
    // Only where each record is and whose it is: the index's chunk lists are not needed.
    const records = new Map<number, RecordEntry>();
    // Each entry made with its `decoded` slot, empty: one object shape for all.
    for (const e of entries) {
      records.set(e.offset, { fingerprint: e.fingerprint, length: e.length, decoded: undefined });
    }
    return new LoadedBlock(bytes, records);
  }

  /** Records in the block. */
  get recordCount(): number {
    return this.records.size;
  }

  /** Bytes held: the block's bytes while some record is undecoded, filters, a fixed overhead a record. */
  get bytes(): number {
    return (this.raw?.length ?? 0) + this.decodedBytes + this.records.size * RECORD_OVERHEAD_BYTES;
  }

  /** Records decoded so far: a call that decodes one grows the block's {@link bytes}. */
  get decodedRecords(): number {
    return this.decodedCount;
  }

  /**
   * The bloom of `fingerprint` at `location` (the offset and length an index segment
   * stores), decoding it on first use. Throws a {@link BlockRecordError} when the location
   * names no record of the block, the record is another series', or its bytes are damaged.
   */
  record(location: BloomRecordLocation, fingerprint: bigint): BloomRecord {
    const entry = this.records.get(location.offset);
    if (entry === undefined || entry.length !== location.length) {
      throw new BlockRecordError(
        `no record at ${location.offset}+${location.length} in ${location.key}`,
      );
    }
    if (entry.fingerprint !== fingerprint) {
      throw new BlockRecordError(
        `the record at ${location.offset} in ${location.key} is series ${entry.fingerprint.toString(16)}'s, not ${fingerprint.toString(16)}'s`,
      );
    }
    const got = entry.decoded ?? this.decode(location.offset, entry);
    if (got instanceof IndexError) throw new BlockRecordError(got.message, { cause: got });
    return got;
  }

  /**
   * Decodes every record not decoded yet (a damaged one is remembered as such, and fails its
   * series at use); the block's bytes are dropped after. Answers how many it decoded.
   */
  decodeAll(): number {
    let count = 0;
    for (const [offset, entry] of this.records) {
      if (entry.decoded !== undefined) continue;
      this.decode(offset, entry);
      count++;
    }
    return count;
  }

  private decode(offset: number, entry: RecordEntry): BloomRecord | IndexError {
    // Present until every record is decoded, and this one is not yet.
    const raw = this.raw!;
    let got: BloomRecord | IndexError;
    try {
      got = decodeBloomRecord(raw.subarray(offset, offset + entry.length), entry.fingerprint);
      this.decodedBytes += got.filter.byteLength;
    } catch (error) {
      if (!(error instanceof IndexError)) throw error;
      got = error;
    }
    entry.decoded = got;
    if (++this.decodedCount === this.records.size) this.raw = undefined;
    return got;
  }
}
