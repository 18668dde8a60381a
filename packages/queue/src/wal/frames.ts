/**
 * Reads frames from a segment file a chunk at a time, so that neither recovery nor a
 * consumer ever holds more than one chunk (or one record, when a record is larger than a
 * chunk) of a segment in memory.
 */
import type { FileHandle } from "node:fs/promises";
import { decodeFrame, MAX_BODY_BYTES } from "./format.js";
import { readFully } from "./files.js";

/** One record as read from a segment. Key and value are views into a fresh read buffer. */
export interface FrameRecord {
  readonly offset: number;
  readonly key: Buffer;
  readonly value: Buffer;
}

/** Why {@link readFrames} stopped. */
export type FramesStop =
  /** The chunk was used up; call again from `position`. */
  | "more"
  /** `maxRecords`, `maxBytes` or `offsetLimit` reached. */
  | "limit"
  /** `position` is `fileEnd`: every frame up to it was whole and valid. */
  | "eof"
  /** A frame starts at `position` but the file ends inside it. */
  | "torn"
  /** The frame at `position` is damaged (`reason` says how). */
  | "bad";

/** What one {@link readFrames} call returns. */
export interface FramesResult {
  readonly records: FrameRecord[];
  /** Byte position after the last frame returned. */
  readonly position: number;
  /** Offset the next frame must carry. */
  readonly nextOffset: number;
  readonly stop: FramesStop;
  readonly reason?: string;
}

/** Limits of one {@link readFrames} call. */
export interface ReadFramesLimits {
  readonly chunkBytes: number;
  readonly maxRecords: number;
  /** Stops once the records returned hold at least this many key+value bytes. */
  readonly maxBytes: number;
  /** Stops before a frame with this offset. */
  readonly offsetLimit: number;
}

/**
 * Reads the frames in `[position, fileEnd)` of `fh` starting with offset `nextOffset`,
 * with one read of at most `chunkBytes` (or one read of a whole frame larger than that).
 */
export async function readFrames(
  fh: FileHandle,
  position: number,
  fileEnd: number,
  nextOffset: number,
  limits: ReadFramesLimits,
): Promise<FramesResult> {
  const records: FrameRecord[] = [];
  if (nextOffset >= limits.offsetLimit) return { records, position, nextOffset, stop: "limit" };
  if (position >= fileEnd) return { records, position, nextOffset, stop: "eof" };

  let length = Math.min(limits.chunkBytes, fileEnd - position);
  let buf = Buffer.allocUnsafe(length);
  length = await readFully(fh, buf, length, position);
  let at = 0;
  let bytes = 0;
  for (;;) {
    if (
      nextOffset >= limits.offsetLimit ||
      records.length >= limits.maxRecords ||
      bytes >= limits.maxBytes
    ) {
      return { records, position: position + at, nextOffset, stop: "limit" };
    }
    if (position + at >= fileEnd) {
      return { records, position: position + at, nextOffset, stop: "eof" };
    }
    const frame = decodeFrame(buf, at, length, nextOffset);
    switch (frame.kind) {
      case "record":
        records.push({ offset: frame.offset, key: frame.key, value: frame.value });
        bytes += frame.key.length + frame.value.length;
        nextOffset++;
        at = frame.end;
        break;
      case "bad":
        return { records, position: position + at, nextOffset, stop: "bad", reason: frame.reason };
      case "short": {
        // The next call starts at this frame with a fresh chunk.
        if (at > 0) return { records, position: position + at, nextOffset, stop: "more" };
        // A frame at `position` that does not fit: either the file ends inside it, or it
        // is larger than a chunk and is read whole (decodeFrame has checked its length
        // against MAX_BODY_BYTES, so this allocation is bounded).
        const needed = Math.min(frame.needed, 8 + MAX_BODY_BYTES);
        if (length < buf.length || position + needed > fileEnd || needed <= length) {
          return { records, position, nextOffset, stop: "torn" };
        }
        buf = Buffer.allocUnsafe(needed);
        length = await readFully(fh, buf, needed, position);
        if (length < needed) return { records, position, nextOffset, stop: "torn" };
        break;
      }
    }
  }
}
