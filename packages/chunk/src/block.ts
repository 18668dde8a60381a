import { ByteReader } from "./bytes.js";
import type { Entry, MetadataPair } from "./entry.js";

/** Where a block sits in the encoded chunk and what it holds, as the footer records it. */
export interface BlockMeta {
  /** Byte offset of the block's snappy data in the chunk. */
  readonly offset: number;
  /** Length of the snappy data, without the CRC that follows it. */
  readonly length: number;
  /** Uncompressed payload length. */
  readonly rawLength: number;
  /** Earliest entry timestamp in the block, ns. */
  readonly minTs: bigint;
  /** Latest entry timestamp in the block, ns. */
  readonly maxTs: bigint;
  /** Number of entries. */
  readonly entries: number;
}

/** The shared metadata array of entries without metadata (frozen: never mutated). */
export const NO_METADATA: readonly MetadataPair[] = Object.freeze([]);

/**
 * Smallest encoded entry: a one-byte timestamp delta, line length and pair count. Bounds
 * the entry count a payload of a given length can hold before anything is allocated.
 */
export const MIN_ENTRY_BYTES = 3;

/**
 * Which entries a reader wants, asked before an entry's line and metadata are decoded:
 * `refs` holds its metadata as symbol ids, name then value, for `pairs` pairs.
 */
export type EntryTest = (refs: Uint32Array, pairs: number) => boolean;

/**
 * Decodes a block's uncompressed payload (format.ts) against the footer's record of it:
 * exactly `meta.entries` entries, timestamps non-decreasing from `meta.minTs` to
 * `meta.maxTs`, symbol references inside the table, no trailing bytes. Throws a
 * ChunkError `corrupt` on any mismatch. With `keep`, only the entries it accepts are
 * decoded and answered (the others' lines are skipped over, not checked as UTF-8).
 */
export function decodeBlockPayload(
  raw: Uint8Array,
  meta: BlockMeta,
  symbol: (id: number) => string,
  symbolCount: number,
  where: string,
  keep?: EntryTest,
): Entry[] {
  const r = new ByteReader(raw, where);
  if (meta.entries * MIN_ENTRY_BYTES > raw.byteLength) {
    r.fail(`${meta.entries} entries cannot fit ${raw.byteLength} bytes`);
  }
  const out: Entry[] = [];
  const maxSymbol = symbolCount - 1;
  const maxTs = meta.maxTs;
  let refs = EMPTY_REFS;
  // The first timestamp is absolute (zig-zag), so a block reads without its footer record,
  // and the two must agree; the others are deltas from the previous one.
  let ts = r.varint64();
  if (ts !== meta.minTs) r.fail("first entry is not at the block's minimum timestamp");
  for (let i = 0; i < meta.entries; i++) {
    if (i > 0) {
      const delta = r.uvarint64();
      if (delta !== 0n) {
        ts += delta;
        if (ts > maxTs) r.fail("timestamp past the block's maximum");
      }
    }
    // With `keep`, the line is skipped over and decoded only for an entry it accepts.
    const lineAt = r.pos;
    let line: string | undefined;
    if (keep === undefined) line = r.string();
    else r.bytes(r.uvarint(r.remaining));
    const pairs = r.uvarint(Math.floor(r.remaining / 2));
    if (pairs > 0 && maxSymbol < 0) r.fail("metadata in a chunk without symbols");
    if (2 * pairs > refs.length) refs = new Uint32Array(Math.max(2 * pairs, 16));
    for (let j = 0; j < 2 * pairs; j++) refs[j] = r.uvarint(maxSymbol);
    if (line === undefined) {
      if (keep !== undefined && !keep(refs, pairs)) continue;
      const end = r.pos;
      r.pos = lineAt;
      line = r.string();
      r.pos = end;
    }
    out.push({ timestamp: ts, line, structuredMetadata: pairsOf(refs, pairs, symbol) });
  }
  r.expectEnd();
  if (ts !== maxTs) r.fail("last entry is not at the block's maximum timestamp");
  return out;
}

const EMPTY_REFS = new Uint32Array(0);

function pairsOf(
  refs: Uint32Array,
  pairs: number,
  symbol: (id: number) => string,
): readonly MetadataPair[] {
  if (pairs === 0) return NO_METADATA;
  const list: MetadataPair[] = new Array<MetadataPair>(pairs);
  for (let j = 0; j < pairs; j++)
    list[j] = { name: symbol(refs[2 * j]!), value: symbol(refs[2 * j + 1]!) };
  return list;
}
