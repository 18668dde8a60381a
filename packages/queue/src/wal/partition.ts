/**
 * One partition of the write-ahead log: a directory of segment files named by the offset
 * of their first record, the last of which is open for appends. Appends are group
 * committed: every append that arrives while a write+fsync is in flight is written by
 * the next one, so a busy partition costs one fsync per round, not one per caller.
 */
import { open, readdir, rename, rm, stat } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { deferred } from "../deferred.js";
import { QueueError } from "../errors.js";
import { fsyncDir, readFully, writeFully } from "./files.js";
import {
  decodeSegmentHeader,
  encodeFrame,
  encodeSegmentHeader,
  frameBytes,
  SEGMENT_HEADER_BYTES,
} from "./format.js";
import { readFrames } from "./frames.js";

/** A segment file. `bytes` is its durable size (for the active segment it grows). */
export interface Segment {
  readonly baseOffset: number;
  readonly path: string;
  bytes: number;
}

/** A record to append to one partition. */
export interface PartitionItem {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/** Counters shared by the partitions of one log, for tests and metrics. */
export interface WalStats {
  /** fdatasync calls made for appends. */
  syncs: number;
  /** Calls of `PartitionLog.append` (one per partition touched by a writer append). */
  appends: number;
  records: number;
  /** Bytes written to segments by appends (frames, not segment headers). */
  bytes: number;
  /** Bytes cut from torn or corrupt segment tails by recovery. */
  truncatedBytes: number;
  segmentsDeleted: number;
}

/** Settings of a partition log. */
export interface PartitionOptions {
  readonly segmentBytes: number;
  readonly readChunkBytes: number;
  /**
   * An active segment whose records are all released and that holds at least this many
   * bytes is sealed and deleted ({@link PartitionLog.release}).
   */
  readonly retireBytes: number;
}

interface Pending {
  readonly items: readonly PartitionItem[];
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

const SEGMENT_NAME = /^(\d{20})\.wal$/;

function segmentName(baseOffset: number): string {
  return `${String(baseOffset).padStart(20, "0")}.wal`;
}

/** An append-only, segmented, checksummed log of one partition. */
export class PartitionLog {
  /** Offset the next appended record gets; every record below it is durable. */
  nextOffset: number;
  private readonly segments: Segment[];
  private active: FileHandle;
  private pending: Pending[] = [];
  private flushing: Promise<void> | undefined;
  private failure: QueueError | undefined;
  private closed = false;
  /** Every record below this is released (committed): its segments may go. */
  private released = 0;
  /** A {@link release} asked the flush loop to retire the active segment. */
  private retireWanted = false;
  private retired = deferred();
  private changed = deferred();

  private constructor(
    readonly partition: number,
    readonly dir: string,
    private readonly options: PartitionOptions,
    private readonly stats: WalStats,
    segments: Segment[],
    active: FileHandle,
    nextOffset: number,
  ) {
    this.segments = segments;
    this.active = active;
    this.nextOffset = nextOffset;
  }

  /**
   * Opens (creating if needed) the partition in `dir`, recovering it: leftover temporary
   * files are removed, every segment header is checked, and the last segment is scanned
   * and cut at the first torn or damaged frame. `firstOffset` is where an empty
   * partition starts.
   */
  static async open(
    partition: number,
    dir: string,
    firstOffset: number,
    options: PartitionOptions,
    stats: WalStats,
  ): Promise<PartitionLog> {
    const names = await readdir(dir);
    for (const name of names) {
      if (name.endsWith(".tmp")) await rm(join(dir, name), { force: true });
    }
    const segments: Segment[] = [];
    for (const name of names.sort()) {
      const match = SEGMENT_NAME.exec(name);
      if (match === null) continue;
      const path = join(dir, name);
      const baseOffset = Number(match[1]);
      await checkHeader(path, baseOffset);
      segments.push({ baseOffset, path, bytes: (await stat(path)).size });
    }
    if (segments.length === 0) {
      segments.push(await createSegment(dir, firstOffset));
    }
    const last = segments[segments.length - 1]!;
    const active = await open(last.path, "r+");
    try {
      const nextOffset = await recoverTail(active, last, options, stats);
      return new PartitionLog(partition, dir, options, stats, segments, active, nextOffset);
    } catch (error) {
      await active.close();
      throw error;
    }
  }

  /** Offset of the oldest record still on disk. */
  get firstOffset(): number {
    return this.segments[0]!.baseOffset;
  }

  /** Number of segment files. */
  get segmentCount(): number {
    return this.segments.length;
  }

  /**
   * Appends `items` in order; resolves once they are durable. Concurrent calls share
   * one write and one fdatasync.
   */
  append(items: readonly PartitionItem[]): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new QueueError("closed"));
    return new Promise((resolve, reject) => {
      this.pending.push({ items, resolve, reject });
      this.flushing ??= this.flushLoop();
    });
  }

  /**
   * Writes pending appends, one write and fsync a round; a wanted retirement runs here too,
   * between rounds, so that sealing the active segment never races a write into it.
   */
  private async flushLoop(): Promise<void> {
    // Let every append made in the current tick join the first write.
    await Promise.resolve();
    while (this.pending.length > 0 || this.retireWanted) {
      if (this.pending.length === 0) {
        this.retireWanted = false;
        await this.retire();
        continue;
      }
      const batch = this.pending;
      this.pending = [];
      try {
        await this.write(batch);
        for (const p of batch) p.resolve();
      } catch (error) {
        for (const p of batch) p.reject(error);
      }
    }
    this.flushing = undefined;
  }

  private async write(batch: readonly Pending[]): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    let total = 0;
    let count = 0;
    for (const p of batch) {
      for (const item of p.items) total += frameBytes(item.key.length, item.value.length);
      count += p.items.length;
    }
    let segment = this.segments[this.segments.length - 1]!;
    if (segment.bytes > SEGMENT_HEADER_BYTES && segment.bytes + total > this.options.segmentBytes) {
      segment = await this.roll();
    }
    const buf = Buffer.allocUnsafe(total);
    let at = 0;
    let offset = this.nextOffset;
    for (const p of batch) {
      for (const item of p.items) at = encodeFrame(buf, at, offset++, item.key, item.value);
    }
    try {
      await writeFully(this.active, buf, segment.bytes);
      await this.active.datasync();
    } catch (error) {
      await this.undoWrite(segment, error);
    }
    this.stats.syncs++;
    this.stats.appends += batch.length;
    this.stats.records += count;
    this.stats.bytes += total;
    segment.bytes += total;
    this.nextOffset += count;
    this.changed.resolve();
    this.changed = deferred();
  }

  /**
   * After a failed write or fsync the tail holds unknown bytes: cut the file back to its
   * last durable size. If even that fails the partition refuses all further appends
   * (recovery on the next open cuts the tail), since after a failed fsync the page cache
   * cannot be trusted (PostgreSQL's "fsyncgate", 2018).
   */
  private async undoWrite(segment: Segment, cause: unknown): Promise<never> {
    const error = new QueueError("write_failed", `partition ${this.partition}`, { cause });
    try {
      await this.active.truncate(segment.bytes);
      await this.active.datasync();
    } catch {
      this.failure = error;
    }
    throw error;
  }

  /** Seals the active segment and starts a new one at `nextOffset`. */
  private async roll(): Promise<Segment> {
    let segment: Segment;
    try {
      segment = await createSegment(this.dir, this.nextOffset);
    } catch (cause) {
      throw new QueueError("write_failed", `partition ${this.partition}: new segment`, { cause });
    }
    const active = await open(segment.path, "r+");
    const old = this.active;
    this.active = active;
    this.segments.push(segment);
    await old.close();
    return segment;
  }

  /** Resolves once `nextOffset` exceeds `offset` (or at once if it does). */
  async waitBeyond(offset: number): Promise<void> {
    while (this.nextOffset <= offset && !this.closed) await this.changed.promise;
  }

  /** The segment holding `offset`, or undefined when `offset` was deleted. */
  segmentFor(offset: number): Segment | undefined {
    let found: Segment | undefined;
    for (const segment of this.segments) {
      if (segment.baseOffset > offset) break;
      found = segment;
    }
    return found;
  }

  /** The segment after `segment`, even when `segment` itself has been deleted. */
  segmentAfter(segment: Segment): Segment | undefined {
    return this.segments.find((s) => s.baseOffset > segment.baseOffset);
  }

  /** Offset just past the last record of `segment`. */
  endOffsetOf(segment: Segment): number {
    return this.segmentAfter(segment)?.baseOffset ?? this.nextOffset;
  }

  /** Opens a segment for reading. */
  openForRead(segment: Segment): Promise<FileHandle> {
    return open(segment.path, "r");
  }

  /**
   * Every record below `offset` is committed: deletes the sealed segments that hold only
   * such records, and when every record of the log is committed and the active segment
   * holds `retireBytes` or more, seals it and deletes it too (the next append starts a new
   * one at the same offset), so that a caught-up log keeps next to nothing on disk. The
   * caller has made the commit durable first: a crash at any point leaves either the old
   * segments (deleted by the next release) or none, never a committed record's absence
   * to be noticed, since nothing below the commit is read again.
   */
  async release(offset: number): Promise<void> {
    this.released = Math.max(this.released, offset);
    await this.deleteBelow(this.released);
    const active = this.segments[this.segments.length - 1]!;
    if (
      this.closed ||
      this.released < this.nextOffset ||
      active.bytes - SEGMENT_HEADER_BYTES < this.options.retireBytes
    ) {
      return;
    }
    this.retireWanted = true;
    const done = this.retired.promise;
    this.flushing ??= this.flushLoop();
    await done;
  }

  /** Seals the active segment if still wholly released, then deletes what is released. */
  private async retire(): Promise<void> {
    try {
      const active = this.segments[this.segments.length - 1]!;
      if (this.released >= this.nextOffset && active.bytes > SEGMENT_HEADER_BYTES) {
        await this.roll();
        await this.deleteBelow(this.released);
      }
    } catch {
      // Only a missed saving of disk: the next release tries again.
    } finally {
      this.retired.resolve();
      this.retired = deferred();
    }
  }

  /** Deletes every segment whose records are all below `offset`; never the active one. */
  private async deleteBelow(offset: number): Promise<number> {
    const doomed: Segment[] = [];
    while (this.segments.length > 1 && this.segments[1]!.baseOffset <= offset) {
      doomed.push(this.segments.shift()!);
    }
    if (doomed.length === 0) return 0;
    for (const segment of doomed) await rm(segment.path, { force: true });
    await fsyncDir(this.dir);
    this.stats.segmentsDeleted += doomed.length;
    return doomed.length;
  }

  /** Waits for in-flight appends, refuses new ones and closes the active segment. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.flushing;
    this.changed.resolve();
    await this.active.close();
  }
}

async function checkHeader(path: string, baseOffset: number): Promise<void> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(SEGMENT_HEADER_BYTES);
    await readFully(fh, buf, SEGMENT_HEADER_BYTES, 0);
    const header = decodeSegmentHeader(buf);
    if (!header.ok) throw new QueueError(header.code, `segment header of ${path}`);
    if (header.baseOffset !== baseOffset) {
      throw new QueueError("corrupt", `${path} starts at offset ${header.baseOffset}`);
    }
  } finally {
    await fh.close();
  }
}

/**
 * Creates a segment atomically: the header is written and fsynced under a temporary name
 * that is then renamed, so a segment file never exists without a whole header.
 */
async function createSegment(dir: string, baseOffset: number): Promise<Segment> {
  const path = join(dir, segmentName(baseOffset));
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, "w");
  try {
    await writeFully(fh, encodeSegmentHeader(baseOffset), 0);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
  await fsyncDir(dir);
  return { baseOffset, path, bytes: SEGMENT_HEADER_BYTES };
}

/**
 * Scans the last segment and cuts it after its last whole, valid frame. Anything after
 * that frame was never acknowledged: appends resolve only after fdatasync, and a crash
 * during a write leaves at most that write's frames torn at the end of the file.
 */
async function recoverTail(
  fh: FileHandle,
  segment: Segment,
  options: PartitionOptions,
  stats: WalStats,
): Promise<number> {
  let position = SEGMENT_HEADER_BYTES;
  let nextOffset = segment.baseOffset;
  for (;;) {
    const result = await readFrames(fh, position, segment.bytes, nextOffset, {
      chunkBytes: options.readChunkBytes,
      maxRecords: Number.POSITIVE_INFINITY,
      maxBytes: Number.POSITIVE_INFINITY,
      offsetLimit: Number.POSITIVE_INFINITY,
    });
    position = result.position;
    nextOffset = result.nextOffset;
    if (result.stop === "more" || result.stop === "limit") continue;
    break;
  }
  if (position < segment.bytes) {
    stats.truncatedBytes += segment.bytes - position;
    await fh.truncate(position);
    await fh.datasync();
    segment.bytes = position;
  }
  return nextOffset;
}
