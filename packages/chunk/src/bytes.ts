import { ChunkError } from "./errors.js";
import type { ChunkErrorCode } from "./errors.js";

const MIN_INT64 = -(1n << 63n);
const MAX_INT64 = (1n << 63n) - 1n;
const MASK64 = (1n << 64n) - 1n;

/** True when `v` fits a signed 64-bit integer. */
export function isInt64(v: bigint): boolean {
  return v >= MIN_INT64 && v <= MAX_INT64;
}

/**
 * A growable output buffer with the primitives the chunk format uses: unsigned LEB128
 * varints (as protobuf), zig-zag signed varints, little-endian u32, UTF-8 strings. It is
 * reused across blocks, and grows to powers of two so a chunk costs few copies.
 */
export class ByteWriter {
  buf: Buffer;
  pos = 0;

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  reset(): void {
    this.pos = 0;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** An unsigned varint of a non-negative safe integer. */
  uvarint(v: number): void {
    this.ensure(10);
    const buf = this.buf;
    let pos = this.pos;
    while (v >= 0x80) {
      buf[pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    buf[pos++] = v;
    this.pos = pos;
  }

  /** An unsigned varint of a value in [0, 2^64). */
  uvarint64(v: bigint): void {
    if (v <= 0x1fffffffffffffn) {
      this.uvarint(Number(v));
      return;
    }
    this.ensure(10);
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  /** A zig-zag varint of a signed 64-bit value. */
  varint64(v: bigint): void {
    this.uvarint64(((v << 1n) ^ (v >> 63n)) & MASK64);
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  u32le(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(v >>> 0, this.pos);
    this.pos += 4;
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.byteLength);
    this.buf.set(b, this.pos);
    this.pos += b.byteLength;
  }

  /** A varint byte length, then the UTF-8 bytes of `s`. */
  string(s: string): void {
    const n = Buffer.byteLength(s, "utf8");
    this.uvarint(n);
    this.ensure(n);
    this.pos += this.buf.write(s, this.pos, n, "utf8");
  }

  /** A copy of what was written. */
  toBytes(): Uint8Array {
    return Uint8Array.prototype.slice.call(this.buf, 0, this.pos);
  }
}

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

/** `buf[start, end)` as a string, or undefined when those bytes are not valid UTF-8. */
export function utf8(buf: Buffer, start: number, end: number): string | undefined {
  const s = buf.toString("utf8", start, end);
  // toString is the fast native path but replaces invalid sequences with U+FFFD; only a
  // string holding U+FFFD needs the strict (slower) check to tell the two apart.
  if (s.includes("\uFFFD")) {
    try {
      fatalUtf8.decode(buf.subarray(start, end));
    } catch {
      return undefined;
    }
  }
  return s;
}

/**
 * A bounds-checked reader over one section of an encoded chunk. Every read checks the
 * remaining length first and throws a ChunkError with `code` (`corrupt` by default) on
 * anything malformed, so no input can read out of bounds or allocate from a bad length.
 */
export class ByteReader {
  pos: number;
  private readonly buf: Buffer;

  constructor(
    bytes: Uint8Array,
    private readonly where: string,
    private readonly code: ChunkErrorCode = "corrupt",
    start = 0,
    private readonly end = bytes.byteLength,
  ) {
    this.buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = start;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  fail(detail: string): never {
    throw new ChunkError(this.code, `${this.where}: ${detail}`);
  }

  /** An unsigned varint that must be at most `max` (a safe integer). */
  uvarint(max = Number.MAX_SAFE_INTEGER): number {
    const buf = this.buf;
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (this.pos >= this.end) this.fail("varint runs past the end");
      const b = buf[this.pos++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (b === 0 && i > 0) this.fail("varint has a redundant zero byte");
        if (result > max) this.fail(`value ${result} exceeds ${max}`);
        return result;
      }
      scale *= 0x80;
    }
    return this.fail("varint too long");
  }

  /** Steps over a varint (of up to 64 bits), reading nothing of its value. */
  skipVarint(): void {
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail("varint runs past the end");
      if (this.buf[this.pos++]! < 0x80) return;
    }
    this.fail("varint too long");
  }

  /** An unsigned varint in [0, 2^64). */
  uvarint64(): bigint {
    const start = this.pos;
    // Fast path: up to 7 bytes (49 bits) fit a double exactly.
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      if (this.pos >= this.end) this.fail("varint runs past the end");
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (b === 0 && i > 0) this.fail("varint has a redundant zero byte");
        return BigInt(result);
      }
      scale *= 0x80;
    }
    this.pos = start;
    let big = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail("varint runs past the end");
      const b = this.buf[this.pos++]!;
      big |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (b < 0x80) {
        if (b === 0) this.fail("varint has a redundant zero byte");
        if (big > MASK64) this.fail("varint exceeds 64 bits");
        return big;
      }
    }
    return this.fail("varint too long");
  }

  /** A zig-zag varint of a signed 64-bit value. */
  varint64(): bigint {
    const u = this.uvarint64();
    return (u >> 1n) ^ -(u & 1n);
  }

  u8(): number {
    if (this.remaining < 1) this.fail("u8 runs past the end");
    return this.buf[this.pos++]!;
  }

  u32le(): number {
    if (this.remaining < 4) this.fail("u32 runs past the end");
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }

  /** `n` bytes as a view (no copy). */
  bytes(n: number): Uint8Array {
    if (n > this.remaining) this.fail(`${n} bytes declared, ${this.remaining} left`);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** A varint length and that many bytes of UTF-8, which must be valid. */
  string(): string {
    const n = this.uvarint(this.remaining);
    const start = this.pos;
    this.pos += n;
    return utf8(this.buf, start, this.pos) ?? this.fail("invalid UTF-8");
  }

  /** Fails unless every byte of the section was read. */
  expectEnd(): void {
    if (this.pos !== this.end) this.fail(`${this.end - this.pos} unexpected trailing bytes`);
  }
}
