/*
 * Little-endian writer and bounds-checked reader shared by the segment and bloom-block
 * codecs. Written by hand: the formats are a handful of fixed-width fields, and what a
 * library would add (schemas, varints) is what the formats avoid so that a reader can check
 * every length against the bytes left before it allocates anything.
 */
import { crc32c } from "@sieve/kit";
import { IndexError } from "./errors.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Appends fixed-width fields to a buffer that doubles when full. */
export class Writer {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  /** Bytes written so far. */
  length = 0;

  private room(bytes: number): void {
    if (this.length + bytes <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + bytes) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(value: number): void {
    this.room(1);
    this.view.setUint8(this.length, value);
    this.length += 1;
  }

  u16(value: number): void {
    this.room(2);
    this.view.setUint16(this.length, value, true);
    this.length += 2;
  }

  u32(value: number): void {
    this.room(4);
    this.view.setUint32(this.length, value, true);
    this.length += 4;
  }

  /** An unsigned 64-bit integer (fingerprints). */
  u64(value: bigint): void {
    this.room(8);
    this.view.setBigUint64(this.length, value, true);
    this.length += 8;
  }

  /** A signed 64-bit integer (nanosecond timestamps). */
  i64(value: bigint): void {
    this.room(8);
    this.view.setBigInt64(this.length, value, true);
    this.length += 8;
  }

  /** A non-negative integer below 2^53 stored in 8 bytes (offsets). */
  offset(value: number): void {
    this.u64(BigInt(value));
  }

  bytes(value: Uint8Array): void {
    this.room(value.length);
    this.buf.set(value, this.length);
    this.length += value.length;
  }

  /** UTF-8 text after its byte length as a u32. */
  text(value: string): void {
    const bytes = encoder.encode(value);
    this.u32(bytes.length);
    this.bytes(bytes);
  }

  /** Appends the CRC-32C of everything written so far. */
  checksum(): void {
    this.u32(crc32c(this.buf.subarray(0, this.length)));
  }

  /** The bytes written, copied to a buffer of their exact length. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

/** Reads fields in order; any read past the end throws `truncated`, with what was being read. */
export class Reader {
  private readonly view: DataView;
  /** Offset of the next byte to read. */
  at: number;

  constructor(
    readonly bytes: Uint8Array,
    start = 0,
    /** Offset just past the last byte this reader may read. */
    readonly end = bytes.length,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.at = start;
  }

  /** Bytes left before `end`. */
  get left(): number {
    return this.end - this.at;
  }

  /** Throws `truncated` unless `bytes` more bytes can be read. */
  need(bytes: number, what: string): void {
    if (bytes > this.end - this.at) {
      throw new IndexError(
        "truncated",
        `${what} needs ${bytes} bytes at ${this.at}, ${this.left} left`,
      );
    }
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.at++);
  }

  u16(what: string): number {
    this.need(2, what);
    const value = this.view.getUint16(this.at, true);
    this.at += 2;
    return value;
  }

  u32(what: string): number {
    this.need(4, what);
    const value = this.view.getUint32(this.at, true);
    this.at += 4;
    return value;
  }

  u64(what: string): bigint {
    this.need(8, what);
    const value = this.view.getBigUint64(this.at, true);
    this.at += 8;
    return value;
  }

  i64(what: string): bigint {
    this.need(8, what);
    const value = this.view.getBigInt64(this.at, true);
    this.at += 8;
    return value;
  }

  /** An 8-byte offset or length; anything at or past 2^53 is `corrupt`. */
  offset(what: string): number {
    const value = this.u64(what);
    if (value > BigInt(Number.MAX_SAFE_INTEGER))
      throw new IndexError("corrupt", `${what} ${value}`);
    return Number(value);
  }

  /** A view (not a copy) of the next `length` bytes. */
  bytesView(length: number, what: string): Uint8Array {
    this.need(length, what);
    const out = this.bytes.subarray(this.at, this.at + length);
    this.at += length;
    return out;
  }

  /** UTF-8 text after its u32 byte length; invalid UTF-8 is `corrupt`. */
  text(what: string, maxBytes: number): string {
    const length = this.u32(`${what} length`);
    if (length > maxBytes)
      throw new IndexError("corrupt", `${what} of ${length} bytes (max ${maxBytes})`);
    const raw = this.bytesView(length, what);
    try {
      return decoder.decode(raw);
    } catch {
      throw new IndexError("corrupt", `${what} is not UTF-8`);
    }
  }
}
