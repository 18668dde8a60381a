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
 * parsing or validation here. Throws a {@link ProtoError} `malformed_protobuf`.
 */
export function decodePushRequest(bytes: Uint8Array): PushRequest {
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
