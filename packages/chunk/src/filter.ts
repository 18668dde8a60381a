/**
 * A chunk's symbol filter (format version 3): a Golomb-Rice coded set of its symbols'
 * fingerprints, after the block symbols and before the footer, uncompressed. A query that
 * needs a metadata value reads the chunk's last few KB (trailer, footer, filter) and, when
 * the filter says the chunk cannot hold the value, stops there: a chunk a bloom kept by
 * false positive costs that read, not its symbol table's (90 KB on the peers bench's data,
 * where every line has its own span id, checked and decompressed, then searched). The
 * filter answers "maybe" for every symbol the chunk holds, and for an absent one with
 * probability under 2^-{@link FILTER_FP_BITS}; a "maybe" is then settled exactly by the
 * symbol table, as before.
 *
 * Written by hand: a Golomb-coded set (as Bitcoin's BIP 158 uses) is ~60 lines, and the
 * npm packages that implement one fix their own hash and byte layout, which the chunk
 * format must own. A bloom or ribbon filter would take ~1.44× or ~1.05× the bits for the
 * same rate, with a hash the writer and reader must share anyway.
 *
 * Layout (docs/formats.md, "Chunks"): u8 `bits` (fingerprints are the top `bits` bits of
 * a symbol's CRC-32C), u8 `k` (the Rice parameter), u8 `d` (2^d buckets by a
 * fingerprint's top d bits), uvarint `n` (distinct fingerprints), uvarint `streamBits`,
 * 2^d × u32le (where each bucket's codes start in the stream, in bits), then the stream:
 * each bucket's fingerprints ascending, each as its difference from the previous (the
 * first from the bucket's lowest value): the quotient by 2^k in unary (that many 1 bits,
 * then a 0), the remainder in k bits, most significant bit first.
 */
import { crc32c } from "@sieve/kit";
import { ByteReader, type ByteWriter } from "./bytes.js";
import { ChunkError } from "./errors.js";

/**
 * A fingerprint has ⌈log2 n⌉ + this many bits, so an absent symbol matches one of the
 * chunk's n with probability n / 2^bits ≤ 2^-5 (3.1%; 1.6% at best). With a bloom kept at
 * 1%, one chunk in 3,000-6,000 is read past its filter for nothing. Costs about 7.5 bits
 * a symbol, plus 1 for the buckets (a chunk of 5,300 symbols: 5.5 KB).
 */
export const FILTER_FP_BITS = 5;
/** Fingerprints a bucket holds on average, at most: what a lookup decodes. */
const BUCKET_ITEMS = 64;
/** Largest bucket count a reader accepts: 2^24 buckets (64 MiB of offsets). */
const MAX_DIRECTORY_BITS = 24;

/** The hash a filter keeps of a symbol: the CRC-32C of its UTF-8 bytes. */
export function symbolHash(bytes: Uint8Array): number {
  return crc32c(bytes);
}

function fingerprint(hash: number, bits: number): number {
  return bits === 32 ? hash >>> 0 : hash >>> (32 - bits);
}

/** Writes the filter of the symbols whose hashes are `hashes` (any order, repeats allowed). */
export function writeSymbolFilter(w: ByteWriter, hashes: Uint32Array): void {
  const bits = Math.min(32, Math.ceil(Math.log2(Math.max(1, hashes.length))) + FILTER_FP_BITS);
  const prints = new Uint32Array(hashes.length);
  for (let i = 0; i < hashes.length; i++) prints[i] = fingerprint(hashes[i]!, bits);
  prints.sort();
  let n = 0;
  for (let i = 0; i < prints.length; i++)
    if (n === 0 || prints[i] !== prints[n - 1]) prints[n++] = prints[i]!;
  // n ≥ 1 keeps k below bits, so below 32: the shifts below are exact.
  const k = n === 0 ? 0 : Math.floor(Math.log2(2 ** bits / n));
  const d = Math.min(bits, n <= BUCKET_ITEMS ? 0 : Math.ceil(Math.log2(n / BUCKET_ITEMS)));
  const span = 2 ** (bits - d);
  const buckets = 2 ** d;
  const starts = new Uint32Array(buckets);
  const stream = new BitWriter(n * (k + 3));
  let i = 0;
  for (let b = 0; b < buckets; b++) {
    starts[b] = stream.bits;
    const end = (b + 1) * span;
    let prev = b * span;
    for (; i < n && prints[i]! < end; i++) {
      const delta = prints[i]! - prev;
      prev = prints[i]!;
      const q = Math.floor(delta / 2 ** k);
      stream.ones(q);
      stream.put(delta - q * 2 ** k, k + 1); // the unary code's 0, then the remainder
    }
  }
  w.u8(bits);
  w.u8(k);
  w.u8(d);
  w.uvarint(n);
  w.uvarint(stream.bits);
  for (let b = 0; b < buckets; b++) w.u32le(starts[b]!);
  w.bytes(stream.finish());
}

/** Bits, most significant first, into bytes. */
class BitWriter {
  private buf: Uint8Array;
  bits = 0;

  constructor(expectBits: number) {
    this.buf = new Uint8Array(Math.ceil(expectBits / 8) + 8);
  }

  /** `count` 1 bits. */
  ones(count: number): void {
    for (; count > 24; count -= 24) this.put(0xffffff, 24);
    this.put(2 ** count - 1, count);
  }

  /** The low `count` bits of `v` (count ≤ 32, v < 2^count). */
  put(v: number, count: number): void {
    if (count > 24) {
      this.put(Math.floor(v / 2 ** 16), count - 16);
      this.put(v & 0xffff, 16);
      return;
    }
    this.ensure(count);
    // At most 7 bits pending in the current byte plus 24: fits 31 bits.
    let used = this.bits & 7;
    let at = this.bits >>> 3;
    const acc = ((this.buf[at]! >>> (8 - used)) << count) | v;
    used += count;
    this.bits += count;
    while (used >= 8) {
      used -= 8;
      this.buf[at++] = (acc >>> used) & 0xff;
    }
    if (used > 0) this.buf[at] = (acc << (8 - used)) & 0xff;
  }

  private ensure(count: number): void {
    const need = ((this.bits + count) >>> 3) + 1;
    if (need <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(need, this.buf.length * 2));
    grown.set(this.buf);
    this.buf = grown;
  }

  finish(): Uint8Array {
    return this.buf.subarray(0, Math.ceil(this.bits / 8));
  }
}

/** A chunk's symbol filter, read from its section (checked by the caller's CRC). */
export class SymbolFilter {
  /** Distinct fingerprints held. */
  readonly count: number;
  private readonly bits: number;
  private readonly k: number;
  private readonly d: number;
  private readonly streamBits: number;
  private readonly buf: Buffer;
  /** Where the bucket offsets start in {@link buf}, and the stream after them. */
  private readonly directory: number;
  private readonly stream: number;
  private readonly where: string;

  constructor(raw: Uint8Array, where = "symbol filter") {
    const r = new ByteReader(raw, where);
    this.bits = r.u8();
    this.k = r.u8();
    this.d = r.u8();
    if (this.bits < 1 || this.bits > 32) r.fail(`${this.bits} fingerprint bits`);
    if (this.k > this.bits) r.fail(`Rice parameter ${this.k} above ${this.bits} bits`);
    if (this.d > Math.min(this.bits, MAX_DIRECTORY_BITS)) r.fail(`${this.d} bucket bits`);
    this.count = r.uvarint(2 ** this.bits);
    this.streamBits = r.uvarint(raw.byteLength * 8);
    this.directory = r.pos;
    this.stream = this.directory + 4 * 2 ** this.d;
    if (this.stream + Math.ceil(this.streamBits / 8) !== raw.byteLength) {
      r.fail(
        `${raw.byteLength} bytes, the header says ${this.stream + Math.ceil(this.streamBits / 8)}`,
      );
    }
    this.buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    this.where = where;
  }

  /**
   * Checks the bucket starts (non-decreasing, inside the stream): what a lookup does not
   * (one that finds its bucket's bounds out of order answers "may hold"); a chunk's CRC
   * guards them, and decoding a whole chunk checks them too.
   */
  check(): void {
    let prev = 0;
    for (let b = 0; b < 2 ** this.d; b++) {
      const start = this.buf.readUInt32LE(this.directory + 4 * b);
      if (start < prev || start > this.streamBits) {
        throw new ChunkError("corrupt", `${this.where}: bucket ${b} starts at bit ${start}`);
      }
      prev = start;
    }
  }

  /**
   * False when the chunk holds no such symbol; true when it may (it does, or a
   * fingerprint matched by chance).
   */
  mayHold(symbol: string): boolean {
    const f = fingerprint(symbolHash(Buffer.from(symbol, "utf8")), this.bits);
    const shift = this.bits - this.d;
    const bucket = Math.floor(f / 2 ** shift);
    let v = bucket * 2 ** shift;
    let p = this.buf.readUInt32LE(this.directory + 4 * bucket);
    const end =
      bucket + 1 < 2 ** this.d
        ? this.buf.readUInt32LE(this.directory + 4 * (bucket + 1))
        : this.streamBits;
    // Bounds out of order (a damaged section whose CRC still matched): fail open.
    if (p > end || end > this.streamBits) return true;
    const buf = this.buf;
    const at = this.stream;
    const k = this.k;
    while (p < end) {
      let q = 0;
      while (p < end && ((buf[at + (p >>> 3)]! << (p & 7)) & 0x80) !== 0) {
        q++;
        p++;
      }
      p++; // the unary code's 0
      let r = 0;
      for (let j = 0; j < k; j++, p++)
        r = r * 2 + (((buf[at + (p >>> 3)]! << (p & 7)) & 0x80) >>> 7);
      v += q * 2 ** k + r;
      if (v === f) return true;
      if (v > f) return false;
    }
    return false;
  }
}
