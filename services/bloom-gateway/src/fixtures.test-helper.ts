/**
 * Test data: real bloom blocks built with the ingester's builder (@sieve/index
 * SeriesBloomBuilder, encodeBloomBlock), written to a real object store, and the
 * FilterSeries a querier would send for them, with the ground truth of every chunk.
 */
import { encodeBloomBlock, SeriesBloomBuilder } from "@sieve/index";
import type { BloomBlockInput, BloomLocation, SegmentChunk } from "@sieve/index";
import { fingerprint, labelsFromObject, labelsString } from "@sieve/labels";
import type { FilterSeries } from "@sieve/proto";

/** One chunk: the structured metadata of each of its entries. */
export type ChunkSpec = readonly Readonly<Record<string, string>>[];

/** One series: its stream labels and its chunks. */
export interface SeriesSpec {
  readonly labels: Readonly<Record<string, string>>;
  readonly chunks: readonly ChunkSpec[];
}

/** A series as written, with what each chunk holds. */
export interface WrittenSeries extends FilterSeries {
  readonly chunks: SegmentChunk[];
  /** Stream labels, parsed. */
  readonly streamLabels: Readonly<Record<string, string>>;
  /** The entries of each chunk, in the order of `chunks`. */
  readonly truth: readonly ChunkSpec[];
}

/** What a fixture store needs: put. */
export interface PutStore {
  put(key: string, data: Uint8Array): Promise<void>;
}

let checksumSeed = 0x9e3779b9;
function nextChecksum(): number {
  // xorshift32: distinct, deterministic checksums so chunk prefixes differ.
  checksumSeed ^= checksumSeed << 13;
  checksumSeed ^= checksumSeed >>> 17;
  checksumSeed ^= checksumSeed << 5;
  return checksumSeed >>> 0;
}

/**
 * Builds one bloom block holding every series of `specs` (one bloom a series covering all
 * its chunks), puts it at `key`, and answers the series to filter. A series whose bloom the
 * builder refuses is listed with a missing bloom, as the index would.
 */
export async function writeBlock(
  store: PutStore,
  key: string,
  specs: readonly SeriesSpec[],
  baseNs = 1_714_521_600_000_000_000n,
): Promise<WrittenSeries[]> {
  const inputs: BloomBlockInput[] = [];
  const pending: Omit<WrittenSeries, "bloom">[] = [];
  const missing = new Map<bigint, BloomLocation>();
  specs.forEach((spec, si) => {
    const labels = labelsString(labelsFromObject(spec.labels));
    const fp = fingerprint(labels);
    const builder = new SeriesBloomBuilder();
    const identities = spec.chunks.map((entries, ci) => {
      for (const sm of entries) {
        builder.add(Object.entries(sm).map(([name, value]) => ({ name, value })));
      }
      const from = baseNs + BigInt(si) * 1_000_000_000n + BigInt(ci) * 1_000_000n;
      const chunk = { from, through: from + 999_999n, checksum: nextChecksum() };
      builder.cut(chunk);
      return chunk;
    });
    const bloom = spec.chunks.length === 0 ? undefined : builder.finish();
    const prefixed = new Map<bigint, boolean>();
    if (bloom?.status === "ok") {
      inputs.push({ fingerprint: fp, filter: bloom.filter, chunks: bloom.chunks });
      for (const c of bloom.chunks) prefixed.set(c.from, c.prefixed);
    } else if (bloom !== undefined) {
      missing.set(fp, { kind: "missing", reason: bloom.reason });
    }
    pending.push({
      fingerprint: fp,
      labels,
      streamLabels: spec.labels,
      truth: spec.chunks,
      chunks: identities.map((c, ci) => ({
        ...c,
        bytes: 1000 + ci,
        entries: spec.chunks[ci]!.length,
        prefixed: prefixed.get(c.from) ?? false,
      })),
    });
  });
  const { bytes, entries } = encodeBloomBlock(inputs);
  await store.put(key, bytes);
  const located = new Map(entries.map((e) => [e.fingerprint, e]));
  return pending.map((p) => {
    const e = located.get(p.fingerprint);
    const bloom: BloomLocation =
      e !== undefined
        ? { kind: "block", key, offset: e.offset, length: e.length }
        : (missing.get(p.fingerprint) ?? { kind: "missing", reason: "disabled" });
    return { ...p, bloom };
  });
}

/** Whether an entry with metadata `sm` in a stream with `labels` passes `| name="value"` filters. */
export type EntryPredicate = (
  sm: Readonly<Record<string, string>>,
  labels: Readonly<Record<string, string>>,
) => boolean;

/** Chunks holding an entry the predicate keeps, as `fingerprint/from` strings. */
export function matchingChunks(
  series: readonly WrittenSeries[],
  keep: EntryPredicate,
): Set<string> {
  const out = new Set<string>();
  for (const s of series) {
    s.truth.forEach((entries, ci) => {
      if (entries.some((sm) => keep(sm, s.streamLabels)))
        out.add(`${s.fingerprint}/${s.chunks[ci]!.from}`);
    });
  }
  return out;
}

/** The kept chunks of a response, as `fingerprint/from` strings. */
export function keptChunks(res: {
  series: readonly { fingerprint: bigint; chunks: readonly SegmentChunk[] }[];
}): Set<string> {
  const out = new Set<string>();
  for (const s of res.series) for (const c of s.chunks) out.add(`${s.fingerprint}/${c.from}`);
  return out;
}
