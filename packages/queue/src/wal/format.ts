/**
 * The write-ahead log's on-disk grammar (docs/formats.md, "Write-ahead log", version 1).
 * Decoding here only turns bytes into values or says why it cannot; deciding what a bad
 * frame means (a torn tail to cut, or corruption to report) is the caller's business.
 *
 *   segment  = header frame*
 *   header   = "SVWL" u8:version u8[3]:0 u64:baseOffset u32:crc32c(header[0..16))
 *   frame    = u32:crc32c(frame[4..8+len)) u32:len u64:offset u16:keyLength key value
 *              (len = 10 + keyLength + valueLength; value takes the rest of the body)
 *   offsets  = "SVWO" u8:version u8[3]:0 u32:partitions u64[partitions]:committed
 *              u32:crc32c(everything before)
 * All integers little-endian.
 */
import { crc32c as unsignedCrc32c } from "@sieve/kit";

/** Format version written and the only one read. */
export const WAL_VERSION = 1;
/** Bytes of a segment header. */
export const SEGMENT_HEADER_BYTES = 20;
/** Bytes of a frame before the key: crc, length, offset, key length. */
export const FRAME_HEADER_BYTES = 18;
/** Bytes of a body that are not key or value: offset and key length. */
const BODY_FIXED_BYTES = 10;
/** Longest key a frame can carry (u16 length). */
export const MAX_KEY_BYTES = 0xffff;
/**
 * Hard ceiling on a frame's body, whatever the configured record limit: a length field
 * above it is damage, and a reader never allocates more than this for one record.
 */
export const MAX_BODY_BYTES = 256 * 1024 * 1024;

const SEGMENT_MAGIC = 0x4c575653; // "SVWL" read as u32 LE
const OFFSETS_MAGIC = 0x4f575653; // "SVWO" read as u32 LE
const TWO_32 = 2 ** 32;

/**
 * CRC-32C (Castagnoli) of `bytes` as a signed 32-bit integer: the WAL reads and writes its
 * checksums with `readInt32LE`/`writeInt32LE` (same bytes as unsigned; format unchanged).
 */
export function crc32c(bytes: Uint8Array): number {
  return unsignedCrc32c(bytes) | 0;
}

function readU64(buf: Buffer, at: number): number | undefined {
  const lo = buf.readUInt32LE(at);
  const hi = buf.readUInt32LE(at + 4);
  // Offsets stay below 2^53 so they are exact JavaScript numbers.
  if (hi >= 0x200000) return undefined;
  return hi * TWO_32 + lo;
}

function writeU64(buf: Buffer, at: number, value: number): void {
  buf.writeUInt32LE(value % TWO_32, at);
  buf.writeUInt32LE(Math.floor(value / TWO_32), at + 4);
}

/** The segment header for a segment whose first record has offset `baseOffset`. */
export function encodeSegmentHeader(baseOffset: number): Buffer {
  const buf = Buffer.alloc(SEGMENT_HEADER_BYTES);
  buf.writeUInt32LE(SEGMENT_MAGIC, 0);
  buf[4] = WAL_VERSION;
  writeU64(buf, 8, baseOffset);
  buf.writeInt32LE(crc32c(buf.subarray(0, 16)), 16);
  return buf;
}

/** A decoded segment header, or why it is not one. */
export type SegmentHeaderResult =
  | { readonly ok: true; readonly baseOffset: number }
  | { readonly ok: false; readonly code: "bad_magic" | "unsupported_version" | "corrupt" };

/** Decodes the first {@link SEGMENT_HEADER_BYTES} bytes of a segment. */
export function decodeSegmentHeader(buf: Buffer): SegmentHeaderResult {
  if (buf.length < SEGMENT_HEADER_BYTES) return { ok: false, code: "corrupt" };
  if (buf.readUInt32LE(0) !== SEGMENT_MAGIC) return { ok: false, code: "bad_magic" };
  if (buf.readInt32LE(16) !== crc32c(buf.subarray(0, 16))) return { ok: false, code: "corrupt" };
  if (buf[4] !== WAL_VERSION) return { ok: false, code: "unsupported_version" };
  if (buf[5] !== 0 || buf[6] !== 0 || buf[7] !== 0) return { ok: false, code: "corrupt" };
  const baseOffset = readU64(buf, 8);
  if (baseOffset === undefined) return { ok: false, code: "corrupt" };
  return { ok: true, baseOffset };
}

/** Bytes one record takes on disk. */
export function frameBytes(keyLength: number, valueLength: number): number {
  return FRAME_HEADER_BYTES + keyLength + valueLength;
}

/**
 * Writes the frame of one record at `at` in `out` (which must have room for
 * {@link frameBytes}) and returns the position after it.
 */
export function encodeFrame(
  out: Buffer,
  at: number,
  offset: number,
  key: Uint8Array,
  value: Uint8Array,
): number {
  const bodyLength = BODY_FIXED_BYTES + key.length + value.length;
  out.writeUInt32LE(bodyLength, at + 4);
  writeU64(out, at + 8, offset);
  out.writeUInt16LE(key.length, at + 16);
  out.set(key, at + FRAME_HEADER_BYTES);
  out.set(value, at + FRAME_HEADER_BYTES + key.length);
  const end = at + 8 + bodyLength;
  out.writeInt32LE(crc32c(out.subarray(at + 4, end)), at);
  return end;
}

/** What {@link decodeFrame} found at a position. */
export type FrameResult =
  | {
      readonly kind: "record";
      readonly offset: number;
      readonly key: Buffer;
      readonly value: Buffer;
      /** Position just after the frame. */
      readonly end: number;
    }
  /** The bytes end inside the frame; `needed` bytes from its start would hold all of it. */
  | { readonly kind: "short"; readonly needed: number }
  | { readonly kind: "bad"; readonly reason: string };

/**
 * Decodes the frame starting at `at` among `buf[at..end)`, which must carry
 * `expectedOffset`. Key and value are views into `buf`.
 */
export function decodeFrame(
  buf: Buffer,
  at: number,
  end: number,
  expectedOffset: number,
): FrameResult {
  if (end - at < 8) return { kind: "short", needed: 8 };
  const bodyLength = buf.readUInt32LE(at + 4);
  if (bodyLength < BODY_FIXED_BYTES || bodyLength > MAX_BODY_BYTES) {
    return { kind: "bad", reason: `frame length ${bodyLength} out of range` };
  }
  const frameEnd = at + 8 + bodyLength;
  if (frameEnd > end) return { kind: "short", needed: 8 + bodyLength };
  if (buf.readInt32LE(at) !== crc32c(buf.subarray(at + 4, frameEnd))) {
    return { kind: "bad", reason: "frame checksum mismatch" };
  }
  const offset = readU64(buf, at + 8);
  if (offset !== expectedOffset) {
    return { kind: "bad", reason: `frame has offset ${offset}, expected ${expectedOffset}` };
  }
  const keyLength = buf.readUInt16LE(at + 16);
  const keyEnd = at + FRAME_HEADER_BYTES + keyLength;
  if (keyEnd > frameEnd) return { kind: "bad", reason: "key longer than frame" };
  return {
    kind: "record",
    offset,
    key: buf.subarray(at + FRAME_HEADER_BYTES, keyEnd),
    value: buf.subarray(keyEnd, frameEnd),
    end: frameEnd,
  };
}

/** Bytes of an offsets file for `partitions` partitions. */
export function offsetsFileBytes(partitions: number): number {
  return 12 + 8 * partitions + 4;
}

/** The committed-offsets file. */
export function encodeOffsets(committed: readonly number[]): Buffer {
  const buf = Buffer.alloc(offsetsFileBytes(committed.length));
  buf.writeUInt32LE(OFFSETS_MAGIC, 0);
  buf[4] = WAL_VERSION;
  buf.writeUInt32LE(committed.length, 8);
  committed.forEach((offset, i) => {
    writeU64(buf, 12 + 8 * i, offset);
  });
  buf.writeInt32LE(crc32c(buf.subarray(0, buf.length - 4)), buf.length - 4);
  return buf;
}

/** Decoded committed offsets, or why the bytes are not an offsets file. */
export type OffsetsResult =
  | { readonly ok: true; readonly committed: number[] }
  | { readonly ok: false; readonly code: "bad_magic" | "unsupported_version" | "corrupt" };

/** Decodes a committed-offsets file. */
export function decodeOffsets(buf: Buffer): OffsetsResult {
  if (buf.length < 16) return { ok: false, code: "corrupt" };
  if (buf.readUInt32LE(0) !== OFFSETS_MAGIC) return { ok: false, code: "bad_magic" };
  if (buf[4] !== WAL_VERSION) return { ok: false, code: "unsupported_version" };
  const partitions = buf.readUInt32LE(8);
  if (buf.length !== offsetsFileBytes(partitions)) return { ok: false, code: "corrupt" };
  if (buf.readInt32LE(buf.length - 4) !== crc32c(buf.subarray(0, buf.length - 4))) {
    return { ok: false, code: "corrupt" };
  }
  const committed: number[] = [];
  for (let i = 0; i < partitions; i++) {
    const offset = readU64(buf, 12 + 8 * i);
    if (offset === undefined) return { ok: false, code: "corrupt" };
    committed.push(offset);
  }
  return { ok: true, committed };
}
