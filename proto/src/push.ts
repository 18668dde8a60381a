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
 * (streams, entries, timestamps, label pairs), counted by {@link countPushMessages} before
 * anything is decoded.
 */
export function decodePushRequest(bytes: Uint8Array, maxMessages = Infinity): PushRequest {
  if (maxMessages !== Infinity) {
    const messages = countPushMessages(bytes);
    if (messages > maxMessages) {
      throw new ProtoError("too_many_messages", `${messages}, limit ${maxMessages}`);
    }
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
 * pairs) by walking tags and lengths only, never the strings. Decoding costs heap per
 * message: an empty 2-byte entry becomes a JavaScript object, about 57 bytes of heap per
 * byte of input (measured with 1,000,000 of them), so the count bounds a push's memory
 * where its byte size cannot. Answers the count so far when the bytes are malformed
 * (decoding then reports the error). Wire format: https://protobuf.dev/programming-guides/encoding/
 */
export function countPushMessages(bytes: Uint8Array): number {
  let count = 0;
  // depth 0: PushRequest, 1: StreamAdapter, 2: EntryAdapter; `ends` holds each level's end.
  const ends = [bytes.length, 0, 0];
  let depth = 0;
  let at = 0;
  for (;;) {
    while (depth > 0 && at >= ends[depth]!) depth--;
    if (at >= bytes.length) return count;
    let tag = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= bytes.length || shift > 28) return count;
      const b = bytes[at++]!;
      tag += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    const field = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0:
        while (at < bytes.length && bytes[at]! >= 0x80) at++;
        at++;
        continue;
      case 1:
        at += 8;
        continue;
      case 5:
        at += 4;
        continue;
      case 2:
        break;
      default:
        return count;
    }
    let length = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= bytes.length || shift > 28) return count;
      const b = bytes[at++]!;
      length += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    const end = at + length;
    if (end > ends[depth]!) return count;
    if ((depth === 0 && field === 1) || (depth === 1 && field === 2)) {
      count++;
      ends[++depth] = end;
      continue;
    }
    if (depth === 2 && field >= 1 && field <= 4 && field !== 2) count++;
    at = end;
  }
}
