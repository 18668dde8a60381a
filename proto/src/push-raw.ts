/**
 * A protobuf push read as byte ranges, and queue records written from them: the
 * distributor's path for protobuf pushes. Validating a push needs each entry's timestamp
 * and byte lengths, never its text, so lines and structured metadata stay bytes from the
 * client's body to the queue record: no UTF-8 decoding into strings and encoding back,
 * which, with the garbage it made, was most of a decoding worker's time (a CPU profile of
 * `sieve all` under `pnpm bench:path`).
 *
 * The records say what protobufjs would have decoded: the last occurrence of a scalar
 * field wins, unknown fields are skipped, an entry without a timestamp is at 0. Invalid
 * UTF-8 is carried as it came (as Loki does) and becomes U+FFFD where the ingester writes
 * it into a chunk, where the string path turned it into U+FFFD here; for valid UTF-8 the
 * two paths write the same bytes (push-raw.test.ts checks it).
 */
import { countPushMessages } from "./push.js";
import { ProtoError } from "./errors.js";
import { WireReader } from "./wire.js";
import {
  QUEUE_RECORD_HEADER_BYTES,
  halves,
  split64,
  stringField,
  varint64Size,
  varintSize,
  writeRecordEnvelope,
  writeVarint,
  writeString,
  writeVarint64,
} from "./queue-record.js";

/** A push's streams as ranges of its bytes. */
export interface RawPush {
  /** The decompressed PushRequest the ranges point into. */
  readonly bytes: Buffer;
  readonly streams: RawPushStream[];
}

/** One StreamAdapter: its labels decoded, its entries as ranges. */
export interface RawPushStream {
  /** The label set in selector syntax, as sent. */
  readonly labels: string;
  /** Entries. */
  readonly count: number;
  /** Each entry's timestamp, Unix ns (as sent: validation refuses what int64 cannot hold). */
  readonly timestamps: readonly bigint[];
  /**
   * Four numbers an entry: its line's start and end in {@link RawPush.bytes}, and its
   * structured metadata pairs' first and end index in {@link pairs}.
   */
  readonly entries: Int32Array;
  /** Four numbers a pair: its name's start and end, its value's start and end. */
  readonly pairs: Int32Array;
}

/** Bytes of entry `i`'s line. */
export function rawLineBytes(stream: RawPushStream, i: number): number {
  return stream.entries[i * 4 + 1]! - stream.entries[i * 4]!;
}

/** Structured metadata pairs of entry `i`. */
export function rawPairCount(stream: RawPushStream, i: number): number {
  return stream.entries[i * 4 + 3]! - stream.entries[i * 4 + 2]!;
}

/** Bytes of entry `i`'s structured metadata names and values (what Loki's limit counts). */
export function rawMetadataBytes(stream: RawPushStream, i: number): number {
  let bytes = 0;
  const { pairs } = stream;
  for (let p = stream.entries[i * 4 + 2]!; p < stream.entries[i * 4 + 3]!; p++) {
    bytes += pairs[p * 4 + 1]! - pairs[p * 4]! + pairs[p * 4 + 3]! - pairs[p * 4 + 2]!;
  }
  return bytes;
}

// Growable scratch for one stream's ranges while it is read; copied out exact at its end.
let entryScratch = new Int32Array(4096);
let pairScratch = new Int32Array(4096);

/**
 * Reads a PushRequest (decompressed) as ranges. Well-formedness and the message count are
 * checked first by {@link countPushMessages}, with the same errors as `decodePushRequest`:
 * `malformed_protobuf`, or `too_many_messages` past `maxMessages`.
 */
export function decodePushRaw(bytes: Uint8Array, maxMessages = Infinity): RawPush {
  const messages = countPushMessages(bytes);
  if (messages < 0) throw new ProtoError("malformed_protobuf", "truncated or malformed field");
  if (messages > maxMessages) {
    throw new ProtoError("too_many_messages", `${messages}, limit ${maxMessages}`);
  }
  const buf = Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = new WireReader(buf);
  const streams: RawPushStream[] = [];
  while (r.at < buf.length) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) {
      const end = r.lengthEnd();
      streams.push(readStream(r, end));
    } else r.skip(tag);
  }
  return { bytes: buf, streams };
}

function readStream(r: WireReader, end: number): RawPushStream {
  let labelsStart = 0;
  let labelsEnd = 0;
  let count = 0;
  let pairCount = 0;
  const timestamps: bigint[] = [];
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) {
      labelsEnd = r.lengthEnd();
      labelsStart = r.at;
      r.at = labelsEnd;
    } else if (tag === ((2 << 3) | 2)) {
      const entryEnd = r.lengthEnd();
      if ((count + 1) * 4 > entryScratch.length) entryScratch = grow(entryScratch);
      pairCount = readEntry(r, entryEnd, count, pairCount, timestamps);
      count++;
    } else r.skip(tag);
  }
  return {
    labels: r.buf.toString("utf8", labelsStart, labelsEnd),
    count,
    timestamps,
    entries: entryScratch.slice(0, count * 4),
    pairs: pairScratch.slice(0, pairCount * 4),
  };
}

/** Reads entry `index` into the scratch arrays; answers the pair count after it. */
function readEntry(
  r: WireReader,
  end: number,
  index: number,
  pairs: number,
  timestamps: bigint[],
): number {
  let ts = 0n;
  let lineStart = 0;
  let lineEnd = 0;
  const firstPair = pairs;
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) {
      ts = readTimestamp(r, r.lengthEnd());
    } else if (tag === ((2 << 3) | 2)) {
      lineEnd = r.lengthEnd();
      lineStart = r.at;
      r.at = lineEnd;
    } else if (tag === ((3 << 3) | 2)) {
      const pairEnd = r.lengthEnd();
      if ((pairs + 1) * 4 > pairScratch.length) pairScratch = grow(pairScratch);
      readPair(r, pairEnd, pairs);
      pairs++;
    } else r.skip(tag);
  }
  timestamps.push(ts);
  const e = index * 4;
  entryScratch[e] = lineStart;
  entryScratch[e + 1] = lineEnd;
  entryScratch[e + 2] = firstPair;
  entryScratch[e + 3] = pairs;
  return pairs;
}

/** google.protobuf.Timestamp as ns: int64 seconds and int32 nanos, as `timestampNs` reads them. */
function readTimestamp(r: WireReader, end: number): bigint {
  let seconds = 0;
  let nanos = 0;
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 0)) {
      r.varint64();
      // Seconds fit a double exactly (|s| < 2^53 for any time Loki accepts).
      seconds = r.hi * 4294967296 + r.lo;
    } else if (tag === ((2 << 3) | 0)) {
      r.varint64();
      nanos = r.lo | 0; // int32: the low 32 bits, signed
    } else r.skip(tag);
  }
  return BigInt(seconds) * 1_000_000_000n + BigInt(nanos);
}

function readPair(r: WireReader, end: number, index: number): void {
  let nameStart = 0;
  let nameEnd = 0;
  let valueStart = 0;
  let valueEnd = 0;
  while (r.at < end) {
    const tag = r.varint32();
    if (tag === ((1 << 3) | 2)) {
      nameEnd = r.lengthEnd();
      nameStart = r.at;
      r.at = nameEnd;
    } else if (tag === ((2 << 3) | 2)) {
      valueEnd = r.lengthEnd();
      valueStart = r.at;
      r.at = valueEnd;
    } else r.skip(tag);
  }
  const p = index * 4;
  pairScratch[p] = nameStart;
  pairScratch[p + 1] = nameEnd;
  pairScratch[p + 2] = valueStart;
  pairScratch[p + 3] = valueEnd;
}

function grow(a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const next = new Int32Array(a.length * 2);
  next.set(a);
  return next;
}

// ---- queue records from ranges --------------------------------------------------------

function writeRange(
  out: Buffer,
  at: number,
  tag: number,
  src: Buffer,
  start: number,
  end: number,
): number {
  out[at++] = tag;
  at = writeVarint(out, at, end - start);
  // Most ranges are short (ids, names): a loop beats Buffer#copy's per-call work there,
  // which was a fifth of a decoding worker's time.
  if (end - start < 64) {
    for (let i = start; i < end; i++) out[at++] = src[i]!;
    return at;
  }
  out.set(src.subarray(start, end), at);
  return at + end - start;
}

/**
 * The queue record (docs/formats.md, "Queue record") of the entries of `stream` whose
 * indexes are in `kept` (in order), the same bytes `encodeQueueRecord` writes for the
 * decoded entries.
 */
export function encodeQueueRecordRaw(
  tenant: string,
  labels: string,
  fingerprint: bigint,
  push: RawPush,
  stream: RawPushStream,
  kept: ArrayLike<number>,
  /** One more pair for some entries, by position in `kept` (the distributor's `detected_level`). */
  extra?: { readonly name: string; readonly values: readonly (string | undefined)[] },
): Uint8Array {
  const { entries, pairs, timestamps } = stream;
  const extraName = extra?.name ?? "";
  const src = push.bytes;
  const tenantBytes = Buffer.byteLength(tenant);
  const labelsBytes = Buffer.byteLength(labels);
  let size = stringField(tenantBytes) + stringField(labelsBytes) + 9; // + fixed64 fingerprint
  const entrySizes = new Int32Array(kept.length);
  for (let k = 0; k < kept.length; k++) {
    const i = kept[k]!;
    split64[0] = timestamps[i]!;
    const line = entries[i * 4 + 1]! - entries[i * 4]!;
    let entry = 1 + varint64Size(halves[0]!, halves[1]!) + stringField(line);
    for (let p = entries[i * 4 + 2]!; p < entries[i * 4 + 3]!; p++) {
      const name = pairs[p * 4 + 1]! - pairs[p * 4]!;
      const value = pairs[p * 4 + 3]! - pairs[p * 4 + 2]!;
      const pair = stringField(name) + stringField(value);
      entry += 1 + varintSize(pair) + pair;
    }
    const value = extra?.values[k];
    if (value !== undefined) entry += extraPair(extraName, value).length;
    entrySizes[k] = entry;
    size += 1 + varintSize(entry) + entry;
  }
  const out = Buffer.allocUnsafe(QUEUE_RECORD_HEADER_BYTES + size);
  let at = QUEUE_RECORD_HEADER_BYTES;
  at = writeString(out, at, (1 << 3) | 2, tenant, tenantBytes);
  at = writeString(out, at, (2 << 3) | 2, labels, labelsBytes);
  out[at++] = (3 << 3) | 1;
  out.writeBigUInt64LE(BigInt.asUintN(64, fingerprint), at);
  at += 8;
  for (let k = 0; k < kept.length; k++) {
    const i = kept[k]!;
    out[at++] = (4 << 3) | 2;
    at = writeVarint(out, at, entrySizes[k]!);
    split64[0] = timestamps[i]!;
    out[at++] = (1 << 3) | 0;
    at = writeVarint64(out, at, halves[0]!, halves[1]!);
    at = writeRange(out, at, (2 << 3) | 2, src, entries[i * 4]!, entries[i * 4 + 1]!);
    for (let p = entries[i * 4 + 2]!; p < entries[i * 4 + 3]!; p++) {
      const name = pairs[p * 4 + 1]! - pairs[p * 4]!;
      const value = pairs[p * 4 + 3]! - pairs[p * 4 + 2]!;
      out[at++] = (3 << 3) | 2;
      at = writeVarint(out, at, stringField(name) + stringField(value));
      at = writeRange(out, at, (1 << 3) | 2, src, pairs[p * 4]!, pairs[p * 4 + 1]!);
      at = writeRange(out, at, (2 << 3) | 2, src, pairs[p * 4 + 2]!, pairs[p * 4 + 3]!);
    }
    const value = extra?.values[k];
    if (value !== undefined) {
      const pair = extraPair(extraName, value);
      for (let b = 0; b < pair.length; b++) out[at++] = pair[b]!;
    }
  }
  writeRecordEnvelope(out);
  return out;
}

/**
 * The extra pair's field as encoded (tag, length, name, value), remembered for a few
 * dozen values: the distributor adds `detected_level` to almost every entry, with one of
 * a handful of values, and writing both strings an entry was a fifth of the encoding.
 */
function extraPair(name: string, value: string): Uint8Array {
  if (name !== pairName) {
    pairName = name;
    pairs.clear();
  }
  let pair = pairs.get(value);
  if (pair !== undefined) return pair;
  const nameBytes = Buffer.byteLength(name);
  const valueBytes = Buffer.byteLength(value);
  const body = stringField(nameBytes) + stringField(valueBytes);
  const out = Buffer.allocUnsafe(1 + varintSize(body) + body);
  let at = 0;
  out[at++] = (3 << 3) | 2;
  at = writeVarint(out, at, body);
  at = writeString(out, at, (1 << 3) | 2, name, nameBytes);
  writeString(out, at, (2 << 3) | 2, value, valueBytes);
  pair = out;
  if (pairs.size < MAX_PAIRS) pairs.set(value, pair);
  return pair;
}

const MAX_PAIRS = 64;
let pairName = "";
const pairs = new Map<string, Uint8Array>();
