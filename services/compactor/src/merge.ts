/**
 * Merging one tenant's day of index segments into one (or a few), leaving out expired
 * chunks: the pure part of index compaction and retention, no store involved.
 */
import { chunkKey } from "@sieve/chunk";
import type { BloomLocation, IndexSegment, SegmentChunk, SegmentSeries } from "@sieve/index";

/** What {@link mergeDay} made. */
export interface MergedDay {
  /** The merged segments (none when every chunk expired), each at most `maxChunks` listings. */
  readonly segments: IndexSegment[];
  /** Object keys of the chunks left out as expired. */
  readonly expired: string[];
  /** Chunk listings in, and distinct chunks kept. */
  readonly listingsIn: number;
  readonly chunksOut: number;
}

/** Decides whether a chunk of a series is expired (true: leave it out). */
export type ExpiryTest = (labels: string, chunk: SegmentChunk) => boolean;

function bloomId(b: BloomLocation): string {
  return b.kind === "block"
    ? `b\u0000${b.key}\u0000${b.offset}\u0000${b.length}`
    : `m\u0000${b.reason}`;
}

function chunkId(c: SegmentChunk): string {
  return `${c.from}:${c.through}:${c.checksum}`;
}

interface SeriesAcc {
  readonly fingerprint: bigint;
  readonly labels: string;
  /** Each chunk once, with the bloom it is listed under. */
  readonly chunks: Map<string, { chunk: SegmentChunk; bloom: BloomLocation }>;
}

/**
 * Merges `segments` (one tenant, one day): each chunk once per series (listed twice, by a
 * chunk across midnight's other segment, a replayed flush or a merge not yet cleaned up,
 * the listing with a bloom wins, as the reader's merge chooses), under the bloom location
 * it was listed with, so every bloom reference stays valid; expired chunks are left out.
 * A series keeps one listing per bloom location (segment version 4). The result is split
 * by series, in fingerprint order, so that no segment holds more than `maxChunks` chunks
 * (one series with more is a segment of its own).
 */
export function mergeDay(
  tenant: string,
  day: number,
  segments: readonly IndexSegment[],
  expired: ExpiryTest,
  maxChunks: number,
): MergedDay {
  const series = new Map<bigint, SeriesAcc>();
  const dropped = new Set<string>();
  let listingsIn = 0;
  for (const segment of segments) {
    for (const s of segment.series) {
      let acc = series.get(s.fingerprint);
      if (acc === undefined) {
        acc = { fingerprint: s.fingerprint, labels: s.labels, chunks: new Map() };
        series.set(s.fingerprint, acc);
      }
      for (const c of s.chunks) {
        listingsIn++;
        if (expired(s.labels, c)) {
          dropped.add(chunkKey({ tenant, fingerprint: s.fingerprint, ...c }));
          continue;
        }
        const id = chunkId(c);
        const seen = acc.chunks.get(id);
        if (seen === undefined || (seen.bloom.kind === "missing" && s.bloom.kind === "block")) {
          acc.chunks.set(id, { chunk: c, bloom: s.bloom });
        }
      }
    }
  }
  const ordered = [...series.values()].sort((a, b) =>
    a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0,
  );
  const out: IndexSegment[] = [];
  let current: SegmentSeries[] = [];
  let inCurrent = 0;
  let chunksOut = 0;
  for (const acc of ordered) {
    if (acc.chunks.size === 0) continue;
    const byBloom = new Map<string, { bloom: BloomLocation; chunks: SegmentChunk[] }>();
    for (const { chunk, bloom } of acc.chunks.values()) {
      const id = bloomId(bloom);
      let g = byBloom.get(id);
      if (g === undefined) byBloom.set(id, (g = { bloom, chunks: [] }));
      g.chunks.push(chunk);
    }
    if (inCurrent > 0 && inCurrent + acc.chunks.size > maxChunks) {
      out.push({ tenant, day, series: current });
      current = [];
      inCurrent = 0;
    }
    for (const g of byBloom.values()) {
      g.chunks.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
      current.push({
        fingerprint: acc.fingerprint,
        labels: acc.labels,
        bloom: g.bloom,
        chunks: g.chunks,
      });
    }
    inCurrent += acc.chunks.size;
    chunksOut += acc.chunks.size;
  }
  if (current.length > 0) out.push({ tenant, day, series: current });
  return { segments: out, expired: [...dropped], listingsIn, chunksOut };
}
