/*
 * Flush manifest, version 2: what one partition flush is about to make visible, written
 * after its chunks and bloom blocks, before the ownership record decides it (ownership.ts)
 * and before its index segments (docs/formats.md, "Flush manifests and exactly-once
 * ingestion"). All integers little-endian.
 *
 *   u32 magic "SVFM", u8 version = 2, 3 reserved zero bytes
 *   u32 body length, body: UTF-8 JSON (below)
 *   for each key of "segments", in order: u32 length, the index segment's bytes
 *   u32 CRC-32C of every byte before it
 *
 * Body: { "partition": p, "epoch": e, "seq": n, "writer": instanceId, "createdMs": t,
 *         "segments": [index segment keys this flush writes],
 *         "blooms": [bloom block keys it wrote],
 *         "streams": [{ "tenant": t, "fingerprint": "<16 hex>", "maxOffset": o }] }
 * where maxOffset is the highest queue offset of the partition whose entries of that
 * stream are in the flushed chunks, and epoch is the writer's ownership epoch.
 *
 * The segments' bytes are carried so that whoever finds the flush decided can finish it
 * (write its segments) without its writer. JSON rather than another binary layout for the
 * rest: a manifest is small, read only at partition assignment, and easier to inspect by
 * hand when recovering from an incident.
 */
import { crc32c } from "@sieve/kit";
import { IngesterError } from "./errors.js";

/** "SVFM" read as a little-endian u32. */
const MAGIC = 0x4d465653;
/** The only manifest version this code writes and reads. */
const MANIFEST_VERSION = 2;
const HEADER_BYTES = 12;
/** Largest body accepted: a manifest lists one flush of one partition. */
const MAX_MANIFEST_BODY_BYTES = 64 * 1024 * 1024;
/** Largest manifest accepted, segments included (a segment is at most `MAX_SEGMENT_BYTES`). */
const MAX_MANIFEST_BYTES = 1024 * 1024 * 1024;

/** One stream of a manifest: its entries up to `maxOffset` are in the flushed chunks. */
export interface ManifestStream {
  readonly tenant: string;
  readonly fingerprint: bigint;
  readonly maxOffset: number;
}

/** A flush manifest (see the top of this file). */
export interface FlushManifest {
  readonly partition: number;
  /** The writer's ownership epoch (ownership.ts): keys of different owners never collide. */
  readonly epoch: number;
  readonly seq: number;
  readonly writer: string;
  readonly createdMs: number;
  readonly segments: readonly string[];
  /** The bytes of each of `segments`, in the same order. */
  readonly segmentBytes: readonly Uint8Array[];
  readonly blooms: readonly string[];
  readonly streams: readonly ManifestStream[];
}

/** The prefix of every partition's manifests. */
export const MANIFESTS_PREFIX = "_ingester/partitions/";

/** The prefix of partition `p`'s manifests: `_ingester/partitions/<p>/`. */
export function manifestPrefix(partition: number): string {
  return `${MANIFESTS_PREFIX}${partition}/`;
}

/**
 * The key of a manifest: `_ingester/partitions/<p>/<epoch, 10 digits>-<seq, 10 digits>`,
 * sorting by epoch then seq. The epoch keeps a stale owner's manifest from ever replacing
 * the current owner's.
 */
export function manifestKey(partition: number, epoch: number, seq: number): string {
  return `${manifestPrefix(partition)}${String(epoch).padStart(10, "0")}-${String(seq).padStart(10, "0")}`;
}

/** The epoch and seq of a manifest key of `partition`, or undefined for another key. */
export function manifestId(
  partition: number,
  key: string,
): { epoch: number; seq: number } | undefined {
  const prefix = manifestPrefix(partition);
  if (!key.startsWith(prefix)) return undefined;
  const m = /^([0-9]{10})-([0-9]{10})$/.exec(key.slice(prefix.length));
  if (m === null) return undefined;
  return { epoch: Number(m[1]), seq: Number(m[2]) };
}

/** Highest offset a manifest records: once the commit is past it, it can go. */
export function manifestMaxOffset(m: FlushManifest): number {
  let max = -1;
  for (const s of m.streams) if (s.maxOffset > max) max = s.maxOffset;
  return max;
}

/** Encodes a manifest. */
export function encodeManifest(m: FlushManifest): Uint8Array {
  if (m.segmentBytes.length !== m.segments.length) {
    throw new Error(`${m.segments.length} segment keys, ${m.segmentBytes.length} segments`);
  }
  const body = new TextEncoder().encode(
    JSON.stringify({
      partition: m.partition,
      epoch: m.epoch,
      seq: m.seq,
      writer: m.writer,
      createdMs: m.createdMs,
      segments: m.segments,
      blooms: m.blooms,
      streams: m.streams.map((s) => ({
        tenant: s.tenant,
        fingerprint: s.fingerprint.toString(16).padStart(16, "0"),
        maxOffset: s.maxOffset,
      })),
    }),
  );
  let size = HEADER_BYTES + body.length + 4;
  for (const b of m.segmentBytes) size += 4 + b.length;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  out[4] = MANIFEST_VERSION;
  view.setUint32(8, body.length, true);
  out.set(body, HEADER_BYTES);
  let at = HEADER_BYTES + body.length;
  for (const b of m.segmentBytes) {
    view.setUint32(at, b.length, true);
    out.set(b, at + 4);
    at += 4 + b.length;
  }
  view.setUint32(at, crc32c(out.subarray(0, at)), true);
  return out;
}

function corrupt(detail: string): IngesterError {
  return new IngesterError("corrupt_manifest", detail);
}

const isInt = (v: unknown, min: number): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= min;
const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((s) => typeof s === "string" && s.length > 0);

/** Decodes and checks a manifest; damage throws `corrupt_manifest`. */
export function decodeManifest(bytes: Uint8Array): FlushManifest {
  if (bytes.length < HEADER_BYTES + 4) throw corrupt(`${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) throw corrupt("bad magic");
  if (bytes[4] !== MANIFEST_VERSION) throw corrupt(`unsupported version ${bytes[4]}`);
  if (bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0) throw corrupt("reserved bytes");
  const length = view.getUint32(8, true);
  if (
    bytes.length > MAX_MANIFEST_BYTES ||
    length > MAX_MANIFEST_BODY_BYTES ||
    HEADER_BYTES + length + 4 > bytes.length
  ) {
    throw corrupt(`body of ${length} bytes in ${bytes.length}`);
  }
  const end = bytes.length - 4;
  if (view.getUint32(end, true) !== crc32c(bytes.subarray(0, end))) throw corrupt("bad checksum");
  let doc: unknown;
  try {
    doc = JSON.parse(
      new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(12, 12 + length)),
    );
  } catch (error) {
    throw corrupt(`body: ${(error as Error).message}`);
  }
  const d = doc as Record<string, unknown> | null;
  if (typeof d !== "object" || d === null) throw corrupt("body is not an object");
  if (!isInt(d.partition, 0) || !isInt(d.epoch, 0) || !isInt(d.seq, 0) || !isInt(d.createdMs, 0))
    throw corrupt("partition, epoch, seq or createdMs");
  if (typeof d.writer !== "string") throw corrupt("writer");
  if (!isStringArray(d.segments) || !isStringArray(d.blooms)) throw corrupt("segments or blooms");
  if (!Array.isArray(d.streams)) throw corrupt("streams");
  const streams: ManifestStream[] = [];
  for (const s of d.streams as unknown[]) {
    const o = s as Record<string, unknown> | null;
    if (
      typeof o !== "object" ||
      o === null ||
      typeof o.tenant !== "string" ||
      typeof o.fingerprint !== "string" ||
      !/^[0-9a-f]{16}$/.test(o.fingerprint) ||
      !isInt(o.maxOffset, 0)
    ) {
      throw corrupt("a stream entry");
    }
    streams.push({
      tenant: o.tenant,
      fingerprint: BigInt(`0x${o.fingerprint}`),
      maxOffset: o.maxOffset,
    });
  }
  const segmentBytes: Uint8Array[] = [];
  let at = HEADER_BYTES + length;
  for (let i = 0; i < d.segments.length; i++) {
    if (at + 4 > end) throw corrupt(`segment ${i} past the end`);
    const n = view.getUint32(at, true);
    if (at + 4 + n > end) throw corrupt(`segment ${i} of ${n} bytes past the end`);
    segmentBytes.push(bytes.slice(at + 4, at + 4 + n));
    at += 4 + n;
  }
  if (at !== end) throw corrupt(`${end - at} bytes after the segments`);
  return {
    partition: d.partition,
    epoch: d.epoch,
    seq: d.seq,
    writer: d.writer,
    createdMs: d.createdMs,
    segments: d.segments,
    segmentBytes,
    blooms: d.blooms,
    streams,
  };
}
