import CRC32 from "crc-32";
import * as zlib from "node:zlib";
import { ProtoError } from "./errors.js";
import type { LabelPair } from "./push.js";
import { WireReader } from "./wire.js";

/** The queue record envelope's magic: ASCII "SVQR". */
export const QUEUE_RECORD_MAGIC = 0x53565152;
/** The queue record version this code writes and reads. */
export const QUEUE_RECORD_VERSION = 1;
/** Bytes before the protobuf body: magic, version, flags, reserved, CRC-32 (zlib's). */
export const QUEUE_RECORD_HEADER_BYTES = 12;

/** One entry of a queued stream. */
export interface QueueEntry {
  /** Nanoseconds since the Unix epoch. */
  readonly timestampNs: bigint;
  readonly line: string;
  readonly structuredMetadata: readonly LabelPair[];
}

/** One stream of one push, as it travels through the queue. */
export interface QueueRecord {
  readonly tenant: string;
  /** Canonical label set (sorted, Loki's printing). */
  readonly labels: string;
  /** xxhash64 of `labels`. */
  readonly fingerprint: bigint;
  readonly entries: readonly QueueEntry[];
}

// Scratch for splitting a bigint into 32-bit halves without allocating more bigints.
export const split64 = new BigInt64Array(1);
export const halves = new Uint32Array(split64.buffer);
// Per-entry sizes, kept from the sizing pass for the writing pass; grown as needed.
let entrySizes = new Int32Array(1024);
let lineSizes = new Int32Array(1024);

export function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

/** Bytes of the varint of the 64-bit value (lo, hi), each an unsigned 32-bit half. */
export function varint64Size(lo: number, hi: number): number {
  if (hi === 0) return varintSize(lo);
  let size = 5; // 35 bits: the low 32 and 3 of the high half
  for (let rest = hi >>> 3; rest !== 0; rest >>>= 7) size++;
  return size;
}

export function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n > 0x7f) {
    buf[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[at++] = n;
  return at;
}

export function writeVarint64(buf: Buffer, at: number, lo: number, hi: number): number {
  while (hi !== 0) {
    buf[at++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  return writeVarint(buf, at, lo);
}

export function stringField(bytes: number): number {
  return 1 + varintSize(bytes) + bytes;
}

// Node's Buffer has a `utf8Write(string, offset, length)` under `write`, which protobufjs
// also calls: `write` first normalises its arguments and encoding name, a cost per string
// that showed in profiles (3.6% of the server). Used when present, `write` otherwise.
type Utf8Writer = Buffer & { utf8Write?: (s: string, offset: number, length: number) => number };
const hasUtf8Write = typeof (Buffer.prototype as Utf8Writer).utf8Write === "function";

export function writeString(
  buf: Buffer,
  at: number,
  tag: number,
  s: string,
  bytes: number,
): number {
  buf[at++] = tag;
  at = writeVarint(buf, at, bytes);
  if (hasUtf8Write) (buf as Utf8Writer).utf8Write!(s, at, bytes);
  else buf.write(s, at, bytes, "utf8");
  return at + bytes;
}

/**
 * Encodes a record as its envelope (docs/formats.md, "Queue record"): magic "SVQR", version,
 * flags, reserved, CRC-32 of the body (little-endian), then the StreamRecord protobuf.
 *
 * The body is written by hand rather than by protobufjs: one sizing pass with the native
 * `Buffer.byteLength`, then one write into a single buffer. protobufjs' writer allocates an
 * operation object per field and a Long per int64; in a CPU profile of the distributor under
 * `pnpm bench:push` load, garbage collection was 19.5% of the main thread. Alone, this
 * encoder is only 1.1–1.5× protobufjs' (250 entries: 132 µs with a CRC-32C vs 150 µs
 * without), but with it, the native checksum below and cheaper timestamps (push.ts), the
 * benchmark's WAL protobuf+snappy column went from 40 MB/s to 68 MB/s (8 connections,
 * medians, a shared 2-core machine). The tests decode these bytes with protobufjs from queue.proto, so the two cannot drift apart.
 */
export function encodeQueueRecord(record: QueueRecord): Uint8Array {
  const { tenant, labels, entries } = record;
  if (entries.length > entrySizes.length) {
    entrySizes = new Int32Array(entries.length * 2);
    lineSizes = new Int32Array(entries.length * 2);
  }
  const tenantBytes = Buffer.byteLength(tenant);
  const labelsBytes = Buffer.byteLength(labels);
  let size = stringField(tenantBytes) + stringField(labelsBytes) + 9; // + fixed64 fingerprint
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    split64[0] = e.timestampNs;
    const lineBytes = Buffer.byteLength(e.line);
    let entry = 1 + varint64Size(halves[0]!, halves[1]!) + stringField(lineBytes);
    for (const p of e.structuredMetadata) {
      const pair = stringField(Buffer.byteLength(p.name)) + stringField(Buffer.byteLength(p.value));
      entry += 1 + varintSize(pair) + pair;
    }
    entrySizes[i] = entry;
    lineSizes[i] = lineBytes;
    size += 1 + varintSize(entry) + entry;
  }
  const out = Buffer.allocUnsafe(QUEUE_RECORD_HEADER_BYTES + size);
  let at = QUEUE_RECORD_HEADER_BYTES;
  at = writeString(out, at, (1 << 3) | 2, tenant, tenantBytes);
  at = writeString(out, at, (2 << 3) | 2, labels, labelsBytes);
  out[at++] = (3 << 3) | 1;
  out.writeBigUInt64LE(BigInt.asUintN(64, record.fingerprint), at);
  at += 8;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    out[at++] = (4 << 3) | 2;
    at = writeVarint(out, at, entrySizes[i]!);
    split64[0] = e.timestampNs;
    out[at++] = 1 << 3;
    at = writeVarint64(out, at, halves[0]!, halves[1]!);
    at = writeString(out, at, (2 << 3) | 2, e.line, lineSizes[i]!);
    for (const p of e.structuredMetadata) {
      const nameBytes = Buffer.byteLength(p.name);
      const valueBytes = Buffer.byteLength(p.value);
      out[at++] = (3 << 3) | 2;
      at = writeVarint(out, at, stringField(nameBytes) + stringField(valueBytes));
      at = writeString(out, at, (1 << 3) | 2, p.name, nameBytes);
      at = writeString(out, at, (2 << 3) | 2, p.value, valueBytes);
    }
  }
  writeRecordEnvelope(out);
  return out;
}

/** Writes the envelope of a record whose body fills `out` from QUEUE_RECORD_HEADER_BYTES. */
export function writeRecordEnvelope(out: Buffer): void {
  out.writeUInt32BE(QUEUE_RECORD_MAGIC, 0);
  out[4] = QUEUE_RECORD_VERSION;
  out[5] = out[6] = out[7] = 0;
  out.writeUInt32LE(checksum(out.subarray(QUEUE_RECORD_HEADER_BYTES)), 8);
}

/**
 * CRC-32 (IEEE, as zlib and gzip) of the body: `zlib.crc32` where Node has it (20.15+), native
 * and about 4× faster than crc-32's JavaScript (4.4 GB/s vs 1.2 GB/s measured here); the same
 * function from crc-32 otherwise.
 */
const zlibCrc32 = (zlib as { crc32?: (data: Uint8Array) => number }).crc32;
function checksum(body: Uint8Array): number {
  return zlibCrc32 !== undefined ? zlibCrc32(body) >>> 0 : CRC32.buf(body) >>> 0;
}

/**
 * An entry read from a queue record. Its line stays the record's UTF-8 bytes,
 * `source[lineStart, lineEnd)`, until `line` is read: the ingester copies those bytes into
 * its chunk, and only what needs the text (tails, patterns, n-grams) decodes it. `timestamp`
 * is `timestampNs` under the name `@sieve/chunk`'s Entry gives it, so that the entry is
 * appended as it is. It holds the record's bytes: keep a plain copy, not the view.
 */
export class QueueEntryView implements QueueEntry {
  private text: string | undefined;

  constructor(
    readonly timestampNs: bigint,
    readonly source: Buffer,
    readonly lineStart: number,
    readonly lineEnd: number,
    readonly structuredMetadata: readonly LabelPair[],
  ) {}

  get timestamp(): bigint {
    return this.timestampNs;
  }

  get line(): string {
    return (this.text ??= this.source.toString("utf8", this.lineStart, this.lineEnd));
  }
}

/** A queue record as {@link readQueueRecord} reads it: its entries are views. */
export interface QueueRecordView extends QueueRecord {
  readonly entries: readonly QueueEntryView[];
}

/**
 * Reads a record envelope. Checks, in order: length (`record_truncated`), magic
 * (`record_bad_magic`), version (`record_unsupported_version`), flags and reserved bytes
 * (`record_corrupt`), checksum (`record_bad_checksum`), then the body (`record_corrupt`).
 *
 * The body is read by hand, as it is written: protobufjs made a string of every line, a
 * Long and an object of every entry, which the ingester turned into bytes again for its
 * chunk: decoding the lines, their entries and writing them back were about a fifth of an
 * ingest worker's profile (`bench:path`), before the garbage they made. As protobufjs would: the last occurrence of a scalar field wins, unknown fields
 * are skipped, an absent field is empty or 0.
 */
export function readQueueRecord(bytes: Uint8Array): QueueRecordView {
  if (bytes.length < QUEUE_RECORD_HEADER_BYTES) {
    throw new ProtoError("record_truncated", `${bytes.length} bytes`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, false) !== QUEUE_RECORD_MAGIC) throw new ProtoError("record_bad_magic");
  if (bytes[4] !== QUEUE_RECORD_VERSION) {
    throw new ProtoError("record_unsupported_version", `version ${bytes[4]}`);
  }
  if (bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0) {
    throw new ProtoError("record_corrupt", "flags and reserved bytes must be 0");
  }
  // A Buffer view (no copy), whose native UTF-8 decoder reads the strings.
  const body = Buffer.from(
    bytes.buffer,
    bytes.byteOffset + QUEUE_RECORD_HEADER_BYTES,
    bytes.byteLength - QUEUE_RECORD_HEADER_BYTES,
  );
  if (view.getUint32(8, true) !== checksum(body)) throw new ProtoError("record_bad_checksum");
  const r = new WireReader(body);
  let tenant = "";
  let labels = "";
  let fingerprint = 0n;
  const entries: QueueEntryView[] = [];
  while (r.at < body.length) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) tenant = readString(r, body.length);
    else if (tag === ((2 << 3) | 2)) labels = readString(r, body.length);
    else if (tag === ((3 << 3) | 1)) {
      if (r.at + 8 > body.length) corrupt("fingerprint");
      fingerprint = body.readBigUInt64LE(r.at);
      r.at += 8;
    } else if (tag === ((4 << 3) | 2)) entries.push(readEntry(r, fieldEnd(r, body.length)));
    else r.skip(tag);
  }
  if (r.at !== body.length) corrupt("record");
  return { tenant, labels, fingerprint, entries };
}

/** Decodes a record envelope into plain objects (see {@link readQueueRecord}). */
export function decodeQueueRecord(bytes: Uint8Array): QueueRecord {
  const record = readQueueRecord(bytes);
  return {
    ...record,
    entries: record.entries.map((e) => ({
      timestampNs: e.timestampNs,
      line: e.line,
      structuredMetadata: e.structuredMetadata,
    })),
  };
}

function corrupt(where: string): never {
  throw new ProtoError("record_corrupt", `${where} runs past its end`);
}

/** Where the length-delimited field at `r.at` ends, within `end`. */
function fieldEnd(r: WireReader, end: number): number {
  const fieldEnd = r.lengthEnd();
  if (fieldEnd > end) corrupt("a field");
  return fieldEnd;
}

function readString(r: WireReader, end: number): string {
  const stop = fieldEnd(r, end);
  const start = r.at;
  r.at = stop;
  return r.buf.toString("utf8", start, stop);
}

function readEntry(r: WireReader, end: number): QueueEntryView {
  halves[0] = halves[1] = 0;
  let lineStart = r.at;
  let lineEnd = r.at;
  const metadata: LabelPair[] = [];
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 0)) {
      r.varint64();
      halves[0] = r.lo;
      halves[1] = r.hi;
    } else if (tag === ((2 << 3) | 2)) {
      lineEnd = fieldEnd(r, end);
      lineStart = r.at;
      r.at = lineEnd;
    } else if (tag === ((3 << 3) | 2)) metadata.push(readPair(r, fieldEnd(r, end)));
    else r.skip(tag);
  }
  if (r.at !== end) corrupt("an entry");
  return new QueueEntryView(split64[0]!, r.buf, lineStart, lineEnd, metadata);
}

/**
 * The metadata names read last, with their bytes: names repeat from entry to entry
 * (trace_id, span_id), and a repeated one costs a comparison of a few bytes instead of a
 * string (which the chunk builder then interns by its hash, kept on the string).
 */
const recentNames: { readonly bytes: Buffer; readonly text: string }[] = [];
const RECENT_NAMES = 8;
const NAME_BYTES = 64;

function readName(r: WireReader, end: number): string {
  const stop = fieldEnd(r, end);
  const start = r.at;
  r.at = stop;
  const length = stop - start;
  const buf = r.buf;
  for (const name of recentNames) {
    if (name.bytes.length !== length) continue;
    let i = 0;
    while (i < length && name.bytes[i] === buf[start + i]) i++;
    if (i === length) return name.text;
  }
  const text = buf.toString("utf8", start, stop);
  if (length <= NAME_BYTES) {
    if (recentNames.length === RECENT_NAMES) recentNames.shift();
    // A copy: the record's bytes are not kept.
    recentNames.push({ bytes: Buffer.from(buf.subarray(start, stop)), text });
  }
  return text;
}

function readPair(r: WireReader, end: number): LabelPair {
  let name = "";
  let value = "";
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) name = readName(r, end);
    else if (tag === ((2 << 3) | 2)) value = readString(r, end);
    else r.skip(tag);
  }
  if (r.at !== end) corrupt("a metadata pair");
  return { name, value };
}
