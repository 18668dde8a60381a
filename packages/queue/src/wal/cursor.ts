/**
 * A consumer's read position in one partition: the segment it is in, an open handle on
 * it and the byte position of the next frame. Reads go no further than the records
 * already durable (`PartitionLog.nextOffset`), and at most one chunk at a time.
 */
import type { FileHandle } from "node:fs/promises";
import { QueueError } from "../errors.js";
import type { ConsumedRecord } from "../queue.js";
import { SEGMENT_HEADER_BYTES } from "./format.js";
import { readFrames } from "./frames.js";
import type { PartitionLog, Segment } from "./partition.js";

/** Limits of one batch read. */
export interface CursorLimits {
  readonly readChunkBytes: number;
  readonly maxBatchRecords: number;
  readonly maxBatchBytes: number;
}

/** Reads one partition forward from an offset. */
export class PartitionCursor {
  private constructor(
    private readonly log: PartitionLog,
    private readonly limits: CursorLimits,
    private segment: Segment,
    private fh: FileHandle,
    private position: number,
    /** Offset of the next record this cursor returns. */
    public nextOffset: number,
  ) {}

  /** A cursor whose first record is `offset` (which may equal the log's end). */
  static async open(
    log: PartitionLog,
    offset: number,
    limits: CursorLimits,
  ): Promise<PartitionCursor> {
    const segment = log.segmentFor(offset);
    if (segment === undefined || offset > log.nextOffset) {
      throw new QueueError(
        "invalid_offset",
        `partition ${log.partition} holds offsets ${log.firstOffset}..${log.nextOffset}, asked for ${offset}`,
      );
    }
    const fh = await log.openForRead(segment);
    const cursor = new PartitionCursor(
      log,
      limits,
      segment,
      fh,
      SEGMENT_HEADER_BYTES,
      segment.baseOffset,
    );
    try {
      // Skip to `offset` a chunk at a time, dropping what is read.
      while (cursor.nextOffset < offset) await cursor.read(offset);
    } catch (error) {
      await fh.close();
      throw error;
    }
    return cursor;
  }

  /**
   * The next records, up to the batch limits and below `offsetLimit`; empty when the
   * cursor is at the end of what is durable.
   */
  async read(offsetLimit = Number.POSITIVE_INFINITY): Promise<ConsumedRecord[]> {
    for (;;) {
      if (this.nextOffset >= this.log.nextOffset || this.nextOffset >= offsetLimit) return [];
      const endOffset = this.log.endOffsetOf(this.segment);
      if (this.nextOffset >= endOffset) {
        await this.advanceSegment();
        continue;
      }
      const result = await readFrames(this.fh, this.position, this.segment.bytes, this.nextOffset, {
        chunkBytes: this.limits.readChunkBytes,
        maxRecords: this.limits.maxBatchRecords,
        maxBytes: this.limits.maxBatchBytes,
        offsetLimit: Math.min(endOffset, offsetLimit),
      });
      if (
        result.stop === "bad" ||
        result.stop === "torn" ||
        (result.stop === "eof" && result.records.length === 0)
      ) {
        throw new QueueError(
          "corrupt",
          `partition ${this.log.partition}, ${this.segment.path} at byte ${result.position} (offset ${result.nextOffset}): ${result.reason ?? result.stop}`,
        );
      }
      this.position = result.position;
      this.nextOffset = result.nextOffset;
      if (result.records.length > 0) {
        const partition = this.log.partition;
        return result.records.map((r) => ({
          partition,
          offset: r.offset,
          key: r.key,
          value: r.value,
        }));
      }
    }
  }

  private async advanceSegment(): Promise<void> {
    const next = this.log.segmentAfter(this.segment);
    if (next === undefined || next.baseOffset !== this.nextOffset) {
      throw new QueueError(
        "corrupt",
        `partition ${this.log.partition}: no segment starts at offset ${this.nextOffset}`,
      );
    }
    const fh = await this.log.openForRead(next);
    await this.fh.close();
    this.fh = fh;
    this.segment = next;
    this.position = SEGMENT_HEADER_BYTES;
  }

  /** Releases the open segment. */
  close(): Promise<void> {
    return this.fh.close();
  }
}
