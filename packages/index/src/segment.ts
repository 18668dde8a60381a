/*
 * Index segment, version 3 or 4: one tenant's series and chunk refs for one UTC day, written
 * by an ingester at each flush, after the chunks and bloom blocks it points to, or by the
 * compactor merging a day's segments. All integers little-endian; docs/formats.md ("Index
 * segments") is the same layout for other readers.
 *
 *   u32 magic "SVIX", u8 version = 3, 3 reserved zero bytes
 *   text tenant (u32 byte length, UTF-8; 1–256 bytes)
 *   u32 day: days since 1970-01-01 (UTC)
 *   u32 bloom block count, then each block's object key as text (1–1024 bytes)
 *   u32 series count, then per series, ascending fingerprint, each once (version 4: a
 *   fingerprint may repeat, with the same labels, once per bloom location: a compacted
 *   segment keeps every flush's bloom of a series):
 *     u64 fingerprint
 *     text labels (the canonical label string, at most 65536 bytes)
 *     u8 bloom kind: 0 missing, then u8 reason (1 too_large, 2 incomplete, 3 disabled);
 *                    1 in a block, then u32 block number, u64 record offset, u32 record length;
 *                    2 (version 2) in a block with line n-grams: as 1, then u8 n-gram
 *                    length and u8 skip, as the bloom block's record has them;
 *                    3 (version 2) as 2, n-gram length 0 for none, then u8 metadata
 *                    token flags, the record's bits 0 and 1 (not 0: kinds 1 and 2 hold
 *                    both kinds; bit 2, how chunk tokens are keyed, is the record's alone)
 *     u32 chunk count (≥ 1), then per chunk: i64 from, i64 through (ns, from ≤ through),
 *       u32 checksum, u32 size in bytes, u32 entry count, u8 flags (bit 0: the chunk's
 *       prefixed tokens are in the series' bloom; bit 1 (version 3): a u32 follows, the
 *       UTF-8 bytes of the chunk's lines; other bits zero)
 *   u32 CRC-32C of every byte before it
 *
 * A chunk's object key is not stored: it is chunkKey(tenant, fingerprint, from, through,
 * checksum) from @sieve/chunk. A segment's object key is `<tenant>/index/<day>/<id>` (see
 * segmentKey), so a querier lists one day of a tenant by prefix.
 */
import { chunkKey, type ChunkRef } from "@sieve/chunk";
import { crc32c } from "@sieve/kit";
import { Reader, Writer } from "./binary.js";
import type { MissingReason } from "./builder.js";
import { IndexError } from "./errors.js";
import {
  ALL_METADATA_TOKENS,
  checkNgramOptions,
  metadataTokenFlags,
  metadataTokensOf,
  type MetadataTokens,
  type NgramOptions,
} from "./tokens.js";

/** "SVIX" read as a little-endian u32. */
const MAGIC = 0x58495653;
/**
 * The newest segment version this code writes: 4 only for a segment that lists a series
 * more than once (a compacted one), else 3, so what an ingester writes stays readable by
 * the code before version 4. It also reads versions 1 (no bloom kind 2) and 2 (no line
 * bytes).
 */
export const SEGMENT_VERSION = 4;
const MAX_TENANT_BYTES = 256;
const MAX_KEY_BYTES = 1024;
const MAX_LABELS_BYTES = 65536;
const CHUNK_BYTES = 29;
/** Fingerprint, empty labels, missing bloom, one chunk. */
const MIN_SERIES_BYTES = 8 + 4 + 2 + 4 + CHUNK_BYTES;
const NS_PER_DAY = 86_400_000_000_000n;

const REASON_CODES: Record<MissingReason, number> = { too_large: 1, incomplete: 2, disabled: 3 };
const REASONS = new Map<number, MissingReason>(
  Object.entries(REASON_CODES).map(([reason, code]) => [code, reason as MissingReason]),
);

/** Where a series' bloom for the chunks of a segment lives. */
export type BloomLocation =
  | {
      readonly kind: "block";
      /** The bloom block's object key. */
      readonly key: string;
      /** The series' record in the block: one range request. */
      readonly offset: number;
      readonly length: number;
      /**
       * The line n-grams the bloom holds, as its record says (a querier sends line tests
       * only for blooms that have them); none when absent.
       */
      readonly ngrams?: NgramOptions | undefined;
      /** The metadata tokens it holds, when not both kinds. */
      readonly metadataTokens?: MetadataTokens | undefined;
    }
  /** No bloom: every chunk of the series in this segment "may match". */
  | { readonly kind: "missing"; readonly reason: MissingReason };

/** A chunk as an index segment lists it. */
export interface SegmentChunk {
  readonly from: bigint;
  readonly through: bigint;
  readonly checksum: number;
  /** Bytes of the chunk object. */
  readonly bytes: number;
  /** Entries in the chunk. */
  readonly entries: number;
  /** Whether the chunk's prefixed tokens are in the series' bloom (see `CoveredChunk`). */
  readonly prefixed: boolean;
  /**
   * UTF-8 bytes of the chunk's lines (uncompressed: what Loki's volume and stats count);
   * absent in segments written before version 3.
   */
  readonly lineBytes?: number;
}

/** One series of a segment. */
export interface SegmentSeries {
  readonly fingerprint: bigint;
  /** The canonical label string, e.g. `{app="api", env="prod"}`. */
  readonly labels: string;
  readonly bloom: BloomLocation;
  readonly chunks: readonly SegmentChunk[];
}

/** One tenant's index for one day, as one flush wrote it. */
export interface IndexSegment {
  readonly tenant: string;
  /** Days since 1970-01-01, UTC. */
  readonly day: number;
  readonly series: readonly SegmentSeries[];
}

/** The UTC day (days since the epoch) of a nanosecond timestamp. */
export function dayOf(ns: bigint): number {
  const day = ns / NS_PER_DAY;
  return Number(ns < 0n && day * NS_PER_DAY !== ns ? day - 1n : day);
}

/**
 * The days {@link dayString} wrote last, by their last three bits: every query lists the
 * segments of its days, most of them today's and yesterday's, and formatting a Date took
 * 3.4 µs of a needle's ~180 on the main thread.
 */
const DAY_STRINGS = 8;
const stringDays = new Float64Array(DAY_STRINGS).fill(Number.NaN);
const dayStrings: string[] = new Array<string>(DAY_STRINGS).fill("");

/** The day as it appears in keys: `YYYY-MM-DD`, which sorts as the days do. */
export function dayString(day: number): string {
  const slot = day & (DAY_STRINGS - 1);
  if (stringDays[slot] !== day) {
    dayStrings[slot] = new Date(day * 86_400_000).toISOString().slice(0, 10);
    stringDays[slot] = day;
  }
  return dayStrings[slot]!;
}

/** The key prefix of one tenant's segments of one day: `<tenant>/index/<YYYY-MM-DD>/`. */
export function segmentDayPrefix(tenant: string, day: number): string {
  checkTenant(tenant);
  if (!(Number.isInteger(day) && day >= 0 && day < 2_932_897)) {
    throw new IndexError("invalid_argument", `day ${day} (0 to 9999-12-31)`);
  }
  return `${tenant}/index/${dayString(day)}/`;
}

/**
 * The key of a segment: `<tenant>/index/<YYYY-MM-DD>/<id>`. Ids from {@link newSegmentId}
 * sort by creation time, so a listing of one day comes back oldest first.
 */
export function segmentKey(tenant: string, day: number, id: string): string {
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(id))
    throw new IndexError("invalid_argument", `segment id ${JSON.stringify(id)}`);
  return segmentDayPrefix(tenant, day) + id;
}

/**
 * A segment id that sorts by time and cannot collide between writers: the creation time in
 * milliseconds (15 digits), the writer's name, and the writer's sequence number (8 hex digits).
 */
export function newSegmentId(writer: string, nowMs: number, sequence: number): string {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(writer))
    throw new IndexError("invalid_argument", `writer ${JSON.stringify(writer)}`);
  if (!(Number.isSafeInteger(nowMs) && nowMs >= 0))
    throw new IndexError("invalid_argument", `time ${nowMs}`);
  if (!(Number.isInteger(sequence) && sequence >= 0 && sequence <= 0xffffffff)) {
    throw new IndexError("invalid_argument", `sequence ${sequence}`);
  }
  return `${String(nowMs).padStart(15, "0")}-${writer}-${sequence.toString(16).padStart(8, "0")}`;
}

function checkTenant(tenant: string): void {
  const bytes = Buffer.byteLength(tenant, "utf8");
  if (
    bytes === 0 ||
    bytes > MAX_TENANT_BYTES ||
    tenant.includes("/") ||
    tenant === "." ||
    tenant === ".."
  ) {
    throw new IndexError("invalid_argument", `tenant ${JSON.stringify(tenant)}`);
  }
}

/**
 * Encodes a segment; series are sorted by fingerprint here (stably). A fingerprint listed
 * twice must have the same labels each time and makes the segment version 4.
 */
export function encodeSegment(segment: IndexSegment): Uint8Array {
  checkTenant(segment.tenant);
  segmentDayPrefix(segment.tenant, segment.day);
  const series = [...segment.series].sort((a, b) =>
    a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0,
  );
  const repeats = series.some((s, i) => i > 0 && series[i - 1]!.fingerprint === s.fingerprint);
  const blocks = new Map<string, number>();
  for (const s of series) {
    if (s.bloom.kind === "block" && !blocks.has(s.bloom.key)) blocks.set(s.bloom.key, blocks.size);
  }
  const out = new Writer();
  out.u32(MAGIC);
  out.u8(repeats ? 4 : 3);
  out.u8(0);
  out.u16(0);
  out.text(segment.tenant);
  out.u32(segment.day);
  out.u32(blocks.size);
  for (const key of blocks.keys()) {
    const bytes = new TextEncoder().encode(key).length;
    if (bytes === 0 || bytes > MAX_KEY_BYTES)
      throw new IndexError("invalid_argument", `bloom block key of ${bytes} bytes`);
    out.text(key);
  }
  out.u32(series.length);
  let previous: SegmentSeries | undefined;
  for (const s of series) {
    if (s.fingerprint === previous?.fingerprint && s.labels !== previous.labels)
      throw new IndexError(
        "invalid_argument",
        `series ${s.fingerprint.toString(16)} twice with different labels`,
      );
    if (s.fingerprint < 0n || s.fingerprint >= 1n << 64n)
      throw new IndexError("invalid_argument", `fingerprint ${s.fingerprint}`);
    if (s.chunks.length === 0)
      throw new IndexError(
        "invalid_argument",
        `series ${s.fingerprint.toString(16)} without chunks`,
      );
    if (new TextEncoder().encode(s.labels).length > MAX_LABELS_BYTES)
      throw new IndexError("invalid_argument", "labels too long");
    previous = s;
    out.u64(s.fingerprint);
    out.text(s.labels);
    if (s.bloom.kind === "block") {
      const { ngrams } = s.bloom;
      if (ngrams !== undefined) checkNgramOptions(ngrams);
      // The kinds alone: how chunk tokens are keyed is the record's to say (bit 2 here would
      // make the segment unreadable by code before it, where a record fails only its series).
      const flags = metadataTokenFlags(s.bloom.metadataTokens ?? ALL_METADATA_TOKENS) & 3;
      out.u8(flags !== 0 ? 3 : ngrams === undefined ? 1 : 2);
      out.u32(blocks.get(s.bloom.key)!);
      out.offset(s.bloom.offset);
      out.u32(s.bloom.length);
      if (ngrams !== undefined || flags !== 0) {
        out.u8(ngrams?.length ?? 0);
        out.u8(ngrams?.skip ?? 0);
      }
      if (flags !== 0) out.u8(flags);
    } else {
      out.u8(0);
      out.u8(REASON_CODES[s.bloom.reason]);
    }
    out.u32(s.chunks.length);
    for (const c of s.chunks) {
      if (c.through < c.from)
        throw new IndexError(
          "invalid_argument",
          `chunk through ${c.through} before from ${c.from}`,
        );
      out.i64(c.from);
      out.i64(c.through);
      out.u32(c.checksum >>> 0);
      out.u32(c.bytes);
      out.u32(c.entries);
      const lines = c.lineBytes;
      if (lines !== undefined && !(Number.isSafeInteger(lines) && lines >= 0 && lines < 2 ** 32))
        throw new IndexError("invalid_argument", `chunk line bytes ${lines}`);
      out.u8((c.prefixed ? 1 : 0) | (lines !== undefined ? 2 : 0));
      if (lines !== undefined) out.u32(lines);
    }
  }
  out.checksum();
  return out.finish();
}

/** Decodes and checks a segment; anything damaged throws an {@link IndexError}. */
export function decodeSegment(bytes: Uint8Array): IndexSegment {
  if (bytes.length < 12) throw new IndexError("truncated", `a segment of ${bytes.length} bytes`);
  const r = new Reader(bytes, 0, bytes.length - 4);
  if (r.u32("magic") !== MAGIC) throw new IndexError("bad_magic", "index segment");
  const version = r.u8("version");
  if (version < 1 || version > SEGMENT_VERSION) {
    throw new IndexError(
      "unsupported_version",
      `index segment ${version}, this code reads 1 to ${SEGMENT_VERSION}`,
    );
  }
  const stored = new DataView(bytes.buffer, bytes.byteOffset + bytes.length - 4, 4).getUint32(
    0,
    true,
  );
  if (crc32c(bytes.subarray(0, bytes.length - 4)) !== stored)
    throw new IndexError("bad_checksum", "index segment");
  if ((r.u8("reserved") | r.u16("reserved")) !== 0)
    throw new IndexError("corrupt", "reserved header bytes");
  const tenant = r.text("tenant", MAX_TENANT_BYTES);
  const day = r.u32("day");
  try {
    segmentDayPrefix(tenant, day);
  } catch (error) {
    if (error instanceof IndexError) throw new IndexError("corrupt", error.message);
    throw error;
  }
  const blockCount = r.u32("block count");
  if (blockCount > r.left / 5) throw new IndexError("corrupt", `${blockCount} bloom blocks`);
  const blocks: string[] = [];
  for (let i = 0; i < blockCount; i++) {
    const key = r.text("bloom block key", MAX_KEY_BYTES);
    if (key.length === 0) throw new IndexError("corrupt", "empty bloom block key");
    blocks.push(key);
  }
  const seriesCount = r.u32("series count");
  if (seriesCount > r.left / MIN_SERIES_BYTES)
    throw new IndexError("corrupt", `${seriesCount} series`);
  const series: SegmentSeries[] = [];
  const used = new Set<number>();
  let previous = -1n;
  let previousLabels = "";
  for (let i = 0; i < seriesCount; i++) {
    const fingerprint = r.u64("fingerprint");
    const repeated = fingerprint === previous && version >= 4;
    if (fingerprint < previous || (fingerprint === previous && !repeated))
      throw new IndexError("corrupt", `series ${i} out of order`);
    previous = fingerprint;
    const labels = r.text("labels", MAX_LABELS_BYTES);
    if (repeated && labels !== previousLabels)
      throw new IndexError("corrupt", `series ${i} repeats a fingerprint with other labels`);
    previousLabels = labels;
    const kind = r.u8("bloom kind");
    let bloom: BloomLocation;
    if (kind === 1 || ((kind === 2 || kind === 3) && version >= 2)) {
      const block = r.u32("bloom block");
      const offset = r.offset("bloom offset");
      const length = r.u32("bloom length");
      const key = blocks[block];
      if (key === undefined)
        throw new IndexError("corrupt", `bloom block ${block} of ${blocks.length}`);
      used.add(block);
      bloom = { kind: "block", key, offset, length };
      if (kind >= 2) {
        const ngrams = { length: r.u8("n-gram length"), skip: r.u8("n-gram skip") };
        if (kind === 2 || ngrams.length > 0) {
          try {
            checkNgramOptions(ngrams);
          } catch {
            throw new IndexError("corrupt", `n-gram length ${ngrams.length}, skip ${ngrams.skip}`);
          }
          bloom = { ...bloom, ngrams };
        } else if (ngrams.skip !== 0) {
          throw new IndexError("corrupt", `n-gram skip ${ngrams.skip} without a length`);
        }
      }
      if (kind === 3) {
        const flags = r.u8("metadata token flags");
        const metadataTokens = metadataTokensOf(flags);
        if (metadataTokens === undefined || flags === 0 || flags > 3) {
          throw new IndexError("corrupt", `metadata token flags ${flags}`);
        }
        bloom = { ...bloom, metadataTokens };
      }
    } else if (kind === 0) {
      const code = r.u8("missing reason");
      const reason = REASONS.get(code);
      if (reason === undefined) throw new IndexError("corrupt", `missing-bloom reason ${code}`);
      bloom = { kind: "missing", reason };
    } else {
      throw new IndexError("corrupt", `bloom kind ${kind}`);
    }
    const chunkCount = r.u32("chunk count");
    if (chunkCount === 0 || chunkCount > r.left / CHUNK_BYTES)
      throw new IndexError("corrupt", `${chunkCount} chunks`);
    const chunks: SegmentChunk[] = [];
    for (let j = 0; j < chunkCount; j++) {
      const from = r.i64("chunk from");
      const through = r.i64("chunk through");
      const checksum = r.u32("chunk checksum");
      const size = r.u32("chunk bytes");
      const entries = r.u32("chunk entries");
      const flags = r.u8("chunk flags");
      if (through < from)
        throw new IndexError("corrupt", `chunk through ${through} before from ${from}`);
      if (flags > (version >= 3 ? 3 : 1)) throw new IndexError("corrupt", `chunk flags ${flags}`);
      const chunk = { from, through, checksum, bytes: size, entries, prefixed: (flags & 1) === 1 };
      chunks.push((flags & 2) === 2 ? { ...chunk, lineBytes: r.u32("chunk line bytes") } : chunk);
    }
    series.push({ fingerprint, labels, bloom, chunks });
  }
  if (r.left !== 0) throw new IndexError("corrupt", `${r.left} trailing bytes`);
  if (used.size !== blocks.length) throw new IndexError("corrupt", "a bloom block no series uses");
  return { tenant, day, series };
}

/** The full ref and object key of a segment's chunk. */
export function segmentChunkRef(
  tenant: string,
  fingerprint: bigint,
  chunk: SegmentChunk,
): { ref: ChunkRef; key: string } {
  const ref: ChunkRef = {
    tenant,
    fingerprint,
    from: chunk.from,
    through: chunk.through,
    checksum: chunk.checksum,
  };
  return { ref, key: chunkKey(ref) };
}
