/**
 * Rewriting what a delete request touches: a chunk without its deleted lines
 * ({@link rewriteChunk}), and an index segment whose affected series list the rewritten
 * chunks, with their blooms rebuilt as the ingester builds them at flush
 * ({@link replaceSegment}). Pure but for reads: the caller writes the results in the
 * order that keeps readers right (chunks, bloom block, segment; then the old ones go).
 */
import { ChunkReader, chunkKey, encodeChunk, type EncodedChunk, type Entry } from "@sieve/chunk";
import {
  ALL_METADATA_TOKENS,
  SeriesBloomBuilder,
  encodeBloomBlock,
  type BloomBlockInput,
  type BloomLocation,
  type IndexSegment,
  type SegmentChunk,
  type SegmentSeries,
  type SeriesBloomOptions,
} from "@sieve/index";
import type { StreamDeleteTest } from "@sieve/logql";

/** What a delete does to one chunk that holds deleted lines. */
export interface ChunkRewrite {
  readonly oldKey: string;
  readonly oldBytes: number;
  readonly deletedLines: number;
  /** The chunk without them; undefined when it lost every line (dropped). */
  readonly rewritten:
    | { readonly encoded: EncodedChunk; readonly key: string; readonly entries: readonly Entry[] }
    | undefined;
}

/** Every entry of an encoded chunk, oldest first. */
export function chunkEntries(bytes: Uint8Array): Entry[] {
  return [...new ChunkReader(bytes).entries()];
}

/**
 * The rewrite of a chunk of `tenant`'s series `fingerprint` for `deleted`, or undefined
 * when it holds no deleted line. Deterministic: the same chunk and request always give
 * the same bytes, so a rerun after a crash writes the same object under the same key.
 */
export function rewriteChunk(
  tenant: string,
  fingerprint: bigint,
  oldKey: string,
  bytes: Uint8Array,
  deleted: StreamDeleteTest,
): ChunkRewrite | undefined {
  const entries = chunkEntries(bytes);
  const kept = entries.filter((e) => !deleted(e));
  if (kept.length === entries.length) return undefined;
  let rewritten: ChunkRewrite["rewritten"];
  if (kept.length > 0) {
    const encoded = encodeChunk(kept);
    const key = chunkKey({
      tenant,
      fingerprint,
      from: encoded.from,
      through: encoded.through,
      checksum: encoded.checksum,
    });
    rewritten = { encoded, key, entries: kept };
  }
  return {
    oldKey,
    oldBytes: bytes.byteLength,
    deletedLines: entries.length - kept.length,
    rewritten,
  };
}

/** What building a replacement segment reads: the entries of an unaffected chunk. */
export type ReadEntries = (key: string) => Promise<readonly Entry[]>;

/** A replacement segment and the bloom block its rebuilt series point to. */
export interface Replacement {
  /** Undefined when every series lost every chunk: the old segment simply goes. */
  readonly segment: IndexSegment | undefined;
  readonly bloomBlock: { readonly key: string; readonly bytes: Uint8Array } | undefined;
}

/**
 * `segment` with the rewrites applied: an affected chunk is replaced by its rewrite or
 * left out (dropped), a series left without chunks goes, and the bloom of each affected
 * series that had one is rebuilt from all its chunks' entries (the settings its index
 * entry records: n-grams and metadata tokens), into one new block at `bloomKey`. Series
 * without an affected chunk are copied as they are, bloom location included.
 */
export async function replaceSegment(
  segment: IndexSegment,
  rewrites: ReadonlyMap<string, ChunkRewrite>,
  readEntries: ReadEntries,
  bloomKey: string,
  bloomOptions: SeriesBloomOptions,
): Promise<Replacement> {
  const series: SegmentSeries[] = [];
  const inputs: BloomBlockInput[] = [];
  const rebuilt = new Map<bigint, { chunks: SegmentChunk[]; bloom: BloomLocation }>();
  for (const s of segment.series) {
    const keyOf = (c: SegmentChunk): string =>
      chunkKey({ tenant: segment.tenant, fingerprint: s.fingerprint, ...c });
    if (!s.chunks.some((c) => rewrites.has(keyOf(c)))) {
      series.push(s);
      continue;
    }
    const chunks: { chunk: SegmentChunk; entries: () => Promise<readonly Entry[]> }[] = [];
    for (const c of s.chunks) {
      const r = rewrites.get(keyOf(c));
      if (r === undefined) {
        chunks.push({ chunk: c, entries: () => readEntries(keyOf(c)) });
      } else if (r.rewritten !== undefined) {
        const { encoded, entries } = r.rewritten;
        const chunk: SegmentChunk = {
          from: encoded.from,
          through: encoded.through,
          checksum: encoded.checksum,
          bytes: encoded.bytes.byteLength,
          entries: encoded.entryCount,
          lineBytes: encoded.lineBytes,
          prefixed: false,
        };
        chunks.push({ chunk, entries: () => Promise.resolve(entries) });
      }
    }
    if (chunks.length === 0) continue;
    chunks.sort((a, b) => (a.chunk.from < b.chunk.from ? -1 : a.chunk.from > b.chunk.from ? 1 : 0));
    if (s.bloom.kind === "missing") {
      series.push({ ...s, chunks: chunks.map((c) => c.chunk) });
      continue;
    }
    const builder = new SeriesBloomBuilder({
      ...bloomOptions,
      ...(s.bloom.ngrams !== undefined && { ngrams: s.bloom.ngrams }),
      metadataTokens: s.bloom.metadataTokens ?? ALL_METADATA_TOKENS,
    });
    for (const c of chunks) {
      for (const e of await c.entries()) builder.add(e.structuredMetadata, e.line);
      builder.cut(c.chunk);
    }
    const bloom = builder.finish()!;
    const prefixed = new Set(
      bloom.chunks.filter((c) => c.prefixed).map((c) => `${c.from}-${c.through}-${c.checksum}`),
    );
    const listed = chunks.map(({ chunk: c }) => ({
      ...c,
      prefixed: prefixed.has(`${c.from}-${c.through}-${c.checksum}`),
    }));
    if (bloom.status === "ok") {
      inputs.push({
        fingerprint: s.fingerprint,
        filter: bloom.filter,
        chunks: bloom.chunks,
        ngrams: bloom.ngrams,
        metadataTokens: bloom.metadataTokens,
      });
      rebuilt.set(s.fingerprint, { chunks: listed, bloom: s.bloom });
    } else {
      series.push({
        fingerprint: s.fingerprint,
        labels: s.labels,
        bloom: { kind: "missing", reason: bloom.reason },
        chunks: listed,
      });
    }
  }
  let bloomBlock: Replacement["bloomBlock"];
  if (inputs.length > 0) {
    const block = encodeBloomBlock(inputs);
    bloomBlock = { key: bloomKey, bytes: block.bytes };
    for (const e of block.entries) {
      const old = segment.series.find((s) => s.fingerprint === e.fingerprint)!;
      const { chunks, bloom } = rebuilt.get(e.fingerprint)!;
      if (bloom.kind !== "block") continue;
      series.push({
        fingerprint: e.fingerprint,
        labels: old.labels,
        bloom: { ...bloom, key: bloomKey, offset: e.offset, length: e.length },
        chunks,
      });
    }
  }
  return {
    segment: series.length === 0 ? undefined : { ...segment, series },
    bloomBlock,
  };
}
