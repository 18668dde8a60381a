import CRC32C from "crc-32/crc32c.js";
import { StreamRecordType } from "./codec.js";
import type { LongBits } from "./codec.js";
import { ProtoError } from "./errors.js";
import type { LabelPair } from "./push.js";

/** The queue record envelope's magic: ASCII "SVQR". */
export const QUEUE_RECORD_MAGIC = 0x53565152;
/** The queue record version this code writes and reads. */
export const QUEUE_RECORD_VERSION = 1;
/** Bytes before the protobuf body: magic, version, flags, reserved, CRC-32C. */
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

function toLong(value: bigint, unsigned: boolean): LongBits {
  const v = BigInt.asUintN(64, value);
  return { low: Number(v & 0xffffffffn) | 0, high: Number(v >> 32n) | 0, unsigned };
}

function fromLong(value: LongBits | number, unsigned: boolean): bigint {
  if (typeof value === "number") return BigInt(value);
  const v = (BigInt(value.high >>> 0) << 32n) | BigInt(value.low >>> 0);
  return unsigned ? v : BigInt.asIntN(64, v);
}

/**
 * Encodes a record as its envelope (docs/formats.md, "Queue record"): magic "SVQR", version,
 * flags, reserved, CRC-32C of the body (little-endian), then the StreamRecord protobuf.
 */
export function encodeQueueRecord(record: QueueRecord): Uint8Array {
  const body = StreamRecordType.encode({
    tenant: record.tenant,
    labels: record.labels,
    fingerprint: toLong(record.fingerprint, true),
    entries: record.entries.map((e) => ({
      timestampNs: toLong(e.timestampNs, false),
      line: e.line,
      structuredMetadata: e.structuredMetadata,
    })),
  }).finish();
  const out = new Uint8Array(QUEUE_RECORD_HEADER_BYTES + body.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, QUEUE_RECORD_MAGIC, false);
  out[4] = QUEUE_RECORD_VERSION;
  view.setUint32(8, CRC32C.buf(body) >>> 0, true);
  out.set(body, QUEUE_RECORD_HEADER_BYTES);
  return out;
}

interface DecodedEntry {
  timestampNs: LongBits | number;
  line: string;
  structuredMetadata: LabelPair[];
}

/**
 * Decodes a record envelope. Checks, in order: length (`record_truncated`), magic
 * (`record_bad_magic`), version (`record_unsupported_version`), flags and reserved bytes
 * (`record_corrupt`), checksum (`record_bad_checksum`), then the body (`record_corrupt`).
 */
export function decodeQueueRecord(bytes: Uint8Array): QueueRecord {
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
  const body = bytes.subarray(QUEUE_RECORD_HEADER_BYTES);
  if (view.getUint32(8, true) !== CRC32C.buf(body) >>> 0)
    throw new ProtoError("record_bad_checksum");
  let decoded: {
    tenant: string;
    labels: string;
    fingerprint: LongBits | number;
    entries: DecodedEntry[];
  };
  try {
    decoded = StreamRecordType.decode(body) as unknown as typeof decoded;
  } catch (error) {
    throw new ProtoError("record_corrupt", (error as Error).message);
  }
  return {
    tenant: decoded.tenant,
    labels: decoded.labels,
    fingerprint: fromLong(decoded.fingerprint, true),
    entries: decoded.entries.map((e) => ({
      timestampNs: fromLong(e.timestampNs, false),
      line: e.line,
      structuredMetadata: e.structuredMetadata,
    })),
  };
}
