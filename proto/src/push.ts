import { PushRequestType } from "./codec.js";
import type { LongBits } from "./codec.js";
import { ProtoError } from "./errors.js";

/** A name/value pair: a structured metadata entry (logproto.LabelPairAdapter). */
export interface LabelPair {
  name: string;
  value: string;
}

/** google.protobuf.Timestamp as decoded: `seconds` is a Long (or a number when encoding). */
export interface PushTimestamp {
  seconds: number | LongBits;
  nanos: number;
}

/** logproto.EntryAdapter. `timestamp` is null when the field was absent. */
export interface PushEntry {
  timestamp: PushTimestamp | null;
  line: string;
  structuredMetadata: LabelPair[];
}

/** logproto.StreamAdapter: `labels` is the label set in selector syntax, unparsed. */
export interface PushStream {
  labels: string;
  entries: PushEntry[];
}

/** logproto.PushRequest. */
export interface PushRequest {
  streams: PushStream[];
}

/**
 * Decodes a PushRequest from protobuf bytes (already decompressed). Bytes only: no label
 * parsing or validation here. Throws a {@link ProtoError} `malformed_protobuf`, or
 * `too_many_messages` when the request holds more than `maxMessages` nested messages
 * (streams, entries, timestamps, label pairs); both are found by {@link countPushMessages}
 * before anything is decoded.
 */
export function decodePushRequest(bytes: Uint8Array, maxMessages = Infinity): PushRequest {
  const messages = countPushMessages(bytes);
  if (messages < 0) throw new ProtoError("malformed_protobuf", "truncated or malformed field");
  if (messages > maxMessages) {
    throw new ProtoError("too_many_messages", `${messages}, limit ${maxMessages}`);
  }
  try {
    return PushRequestType.decode(bytes) as unknown as PushRequest;
  } catch (error) {
    throw new ProtoError("malformed_protobuf", (error as Error).message);
  }
}

/** Encodes a PushRequest to protobuf bytes (not compressed): what clients send. */
export function encodePushRequest(request: PushRequest): Uint8Array {
  return PushRequestType.encode(request).finish();
}

/** Nanoseconds since the epoch of a decoded timestamp; 0n when absent (as Go's zero time is not). */
export function timestampNs(ts: PushTimestamp | null): bigint {
  if (ts === null) return 0n;
  const { seconds } = ts;
  // Seconds fit a double exactly (|s| < 2^53), so only the final ns value is a BigInt: three
  // BigInt allocations per entry instead of seven, on the push path's hottest loop.
  const s = typeof seconds === "number" ? seconds : seconds.high * 4294967296 + (seconds.low >>> 0);
  return BigInt(s) * 1_000_000_000n + BigInt(ts.nanos);
}

/**
 * Counts the messages a PushRequest would decode to (streams, entries, timestamps, label
 * pairs) by walking tags and lengths only, never the strings; answers -1 when the bytes are
 * not well-formed protobuf (a truncated varint or field, a field crossing the end of its
 * message, a group). Decoding costs heap per message: an empty 2-byte entry becomes a
 * JavaScript object, about 57 bytes of heap per byte of input (measured with 1,000,000 of
 * them), so the count bounds a push's memory where its byte size cannot. The walk also
 * closes a gap in protobufjs: reading from a Buffer, it cuts a string that runs past the
 * end of the input instead of failing. Wire format:
 * https://protobuf.dev/programming-guides/encoding/
 */
export function countPushMessages(bytes: Uint8Array): number {
  let count = 0;
  // The message being walked at each depth, and where it ends.
  const types: number[] = [PUSH_REQUEST];
  const ends: number[] = [bytes.length];
  let at = 0;
  // Tags and lengths are 32-bit varints (at most 5 bytes, as protobufjs reads them); values
  // of int64 fields take up to 10.
  const varint = (limit: number, maxBytes = 5): number => {
    let value = 0;
    for (let shift = 0; shift < maxBytes * 7; shift += 7) {
      if (at >= limit) return -1;
      const b = bytes[at++]!;
      value += (b & 0x7f) * 2 ** shift;
      // protobufjs keeps the low 32 bits of a 32-bit varint: so do we, to read what it reads.
      if (b < 0x80) return maxBytes === 5 ? value % 4294967296 : value;
    }
    return -1;
  };
  for (;;) {
    let depth = types.length - 1;
    while (depth > 0 && at === ends[depth]) {
      types.pop();
      ends.pop();
      depth--;
    }
    if (at === bytes.length) return depth === 0 ? count : -1;
    const limit = ends[depth]!;
    const tag = varint(limit);
    if (tag < 8) return -1; // field 0 or a broken varint
    const wire = tag & 7;
    const expected = SCHEMA[types[depth]!]![Math.floor(tag / 8)];
    if (expected !== undefined && expected.wire !== wire) return -1;
    let end: number;
    switch (wire) {
      case 0:
        if (varint(limit, 10) < 0) return -1;
        continue;
      case 1:
        end = at + 8;
        break;
      case 5:
        end = at + 4;
        break;
      case 2: {
        const length = varint(limit);
        if (length < 0) return -1;
        end = at + length;
        if (end > limit) return -1;
        if (expected?.child !== undefined) {
          count++;
          types.push(expected.child);
          ends.push(end);
          continue;
        }
        break;
      }
      default:
        return -1; // groups: not in Loki's schema
    }
    if (end > limit) return -1;
    at = end;
  }
}

// The push schema as the walk needs it: per message, per field, its wire type and, for a
// nested message, the message's index here. Unknown fields are skipped by wire type.
const PUSH_REQUEST = 0;
const STREAM = 1;
const ENTRY = 2;
const TIMESTAMP = 3;
const PAIR = 4;
const VARINT = { wire: 0 };
const BYTES = { wire: 2 };
const SCHEMA: readonly Readonly<Record<number, { wire: number; child?: number }>>[] = [
  { 1: { wire: 2, child: STREAM }, 2: BYTES },
  { 1: BYTES, 2: { wire: 2, child: ENTRY }, 3: VARINT },
  {
    1: { wire: 2, child: TIMESTAMP },
    2: BYTES,
    3: { wire: 2, child: PAIR },
    4: { wire: 2, child: PAIR },
  },
  { 1: VARINT, 2: VARINT },
  { 1: BYTES, 2: BYTES },
];
