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
 * Decodes a block's uncompressed payload (format.ts) against the footer's record of it:
 * exactly `meta.entries` entries, timestamps non-decreasing from `meta.minTs` to
 * `meta.maxTs`, symbol references inside the table, no trailing bytes. Throws a
 * ChunkError `corrupt` on any mismatch.
 */
export function decodeBlockPayload(
  raw: Uint8Array,
  meta: BlockMeta,
  symbol: (id: number) => string,
  symbolCount: number,
  where: string,
): Entry[] {
  const r = new ByteReader(raw, where);
  if (meta.entries * MIN_ENTRY_BYTES > raw.byteLength) {
    r.fail(`${meta.entries} entries cannot fit ${raw.byteLength} bytes`);
  }
  const out: Entry[] = new Array<Entry>(meta.entries);
  const maxSymbol = symbolCount - 1;
  const maxTs = meta.maxTs;
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
    const line = r.string();
    const pairs = r.uvarint(Math.floor(r.remaining / 2));
    let md = NO_METADATA;
    if (pairs > 0) {
      if (maxSymbol < 0) r.fail("metadata in a chunk without symbols");
      const list: MetadataPair[] = new Array<MetadataPair>(pairs);
      for (let j = 0; j < pairs; j++) {
        const name = symbol(r.uvarint(maxSymbol));
        const value = symbol(r.uvarint(maxSymbol));
        list[j] = { name, value };
      }
      md = list;
    }
    out[i] = { timestamp: ts, line, structuredMetadata: md };
  }
  r.expectEnd();
  if (ts !== maxTs) r.fail("last entry is not at the block's maximum timestamp");
  return out;
}
