import { ChunkBuilder, ChunkReader } from "@sieve/chunk";
import type { EncodedChunk, Entry, ReadOptions } from "@sieve/chunk";
import { chunkFilters, type BloomTest } from "@sieve/logql";

/**
 * Why a chunk was flushed: shared by code, metrics (`reason` label) and logs, as Loki's
 * flush reasons are.
 */
export const FLUSH_REASONS = {
  full: "the head reached its target compressed size",
  idle: "no entry arrived for chunkIdleMs",
  max_age: "the head is older than chunkMaxAgeMs",
  forced: "POST /flush",
  shutdown: "graceful shutdown",
  revoked: "the queue partition was taken away",
  memory: "the process's heads passed memoryBudgetBytes: the largest were cut early",
} as const;

/** A key of {@link FLUSH_REASONS}. */
export type FlushReason = keyof typeof FLUSH_REASONS;

/** A time range and order to read entries in: [from, through), as a query's. */
export interface EntryRange {
  readonly from: bigint;
  readonly through: bigint;
  readonly direction: "forward" | "backward";
  /** At most this many entries (the first in `direction`); 0 = all. */
  readonly limit: number;
  /**
   * The query's metadata test and the stream's labels: encoded chunks skip the blocks and
   * entries that cannot pass it (logql's `chunkFilters`); entries not yet encoded are all
   * read.
   */
  readonly filter?: { readonly test: BloomTest; readonly labels: Readonly<Record<string, string>> };
}

/** How to read `range` from `reader`: its bounds, and the blocks and entries its filter keeps. */
export function readOptions(reader: ChunkReader, range: EntryRange): ReadOptions {
  const f = range.filter;
  const filters = f === undefined ? undefined : chunkFilters(reader, f.test, f.labels);
  return {
    from: range.from,
    through: range.through,
    direction: range.direction,
    ...(filters !== undefined && { blocks: filters.block, keep: filters.entry }),
  };
}

const byTs = (a: Entry, b: Entry): number =>
  a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0;

/** Entries of `entries` in the range, sorted (stable) in its direction, at most its limit. */
export function selectEntries(entries: Entry[], range: EntryRange): Entry[] {
  const kept = entries.filter((e) => e.timestamp >= range.from && e.timestamp < range.through);
  kept.sort(byTs);
  if (range.direction === "backward") kept.reverse();
  return range.limit > 0 && kept.length > range.limit ? kept.slice(0, range.limit) : kept;
}

/** Reads up to the range's limit from an encoded chunk, in the range's direction. */
function readEncoded(bytes: Uint8Array, range: EntryRange): Entry[] {
  const out: Entry[] = [];
  const reader = new ChunkReader(bytes);
  if (reader.through < range.from || reader.from >= range.through) return out;
  for (const e of reader.entries(readOptions(reader, range))) {
    out.push(e);
    if (range.limit > 0 && out.length >= range.limit) break;
  }
  return out;
}

/**
 * The open head chunk of one stream: the chunk builder, the queue offsets of the records
 * whose entries it holds, and its age. Queries read it through an encoded snapshot plus
 * the entries appended since: `ChunkBuilder.encode()` cuts the open block, so a snapshot is
 * taken only when a query needs one and the last is out of date because a block was cut
 * since (at most one extra block cut per natural cut, however often queries come).
 */
export class Head {
  readonly builder: ChunkBuilder;
  /** Lowest and highest queue offsets of records with entries in this head. */
  firstOffset = -1;
  lastOffset = -1;
  readonly createdMs: number;
  lastAppendMs: number;
  private snapshot: Uint8Array | undefined;
  /** Entries appended since the snapshot, while no block was cut (only kept with a snapshot). */
  private recent: Entry[] = [];

  constructor(blockTargetBytes: number, nowMs: number) {
    this.builder = new ChunkBuilder({ blockTargetBytes });
    this.createdMs = nowMs;
    this.lastAppendMs = nowMs;
  }

  /** Entries held. */
  get entryCount(): number {
    return this.builder.entryCount;
  }

  /**
   * Appends an entry of the record at `offset`; false for an exact duplicate (dropped).
   * Throws the builder's `ChunkError` for an invalid entry or a full symbol table.
   */
  append(entry: Entry, offset: number, nowMs: number): boolean {
    const blocks = this.builder.blockCount;
    if (!this.builder.append(entry)) return false;
    if (this.firstOffset < 0) this.firstOffset = offset;
    if (offset > this.lastOffset) this.lastOffset = offset;
    this.lastAppendMs = nowMs;
    if (this.snapshot !== undefined) {
      if (this.builder.blockCount !== blocks) {
        this.snapshot = undefined;
        this.recent = [];
      } else {
        // A plain copy: an entry read from a record is a view of the record's bytes.
        this.recent.push({
          timestamp: entry.timestamp,
          line: entry.line,
          structuredMetadata: entry.structuredMetadata,
        });
      }
    }
    return true;
  }

  /** The entries in `range` (see {@link EntryRange}). */
  read(range: EntryRange): Entry[] {
    if (this.builder.entryCount === 0) return [];
    const from = this.builder.from!;
    const through = this.builder.through!;
    if (through < range.from || from >= range.through) return [];
    if (this.snapshot === undefined) {
      this.snapshot = this.builder.encode().bytes;
      this.recent = [];
    }
    if (this.recent.length === 0) return readEncoded(this.snapshot, range);
    // Read forward and whole, then append the recent entries: a stable sort then keeps equal
    // timestamps in append order. Bounded by the head's size (chunkTargetBytes).
    const all = readEncoded(this.snapshot, { ...range, direction: "forward", limit: 0 });
    return selectEntries(all.concat(this.recent), range);
  }

  /** Encodes the chunk for flushing; the head is done after this. */
  encode(): EncodedChunk {
    this.snapshot = undefined;
    this.recent = [];
    return this.builder.encode();
  }
}
