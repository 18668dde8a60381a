/**
 * Test data: real bloom blocks built with the ingester's builder (@sieve/index
 * SeriesBloomBuilder, encodeBloomBlock), written to a real object store, and the
 * FilterSeries a querier would send for them, with the ground truth of every chunk.
 */
import { encodeBloomBlock, SeriesBloomBuilder } from "@sieve/index";
import type {
  BloomBlockInput,
  BloomLocation,
  NgramOptions,
  SegmentChunk,
  SeriesBloomOptions,
} from "@sieve/index";
import { fingerprint, labelsFromObject, labelsString } from "@sieve/labels";
import type { FilterSeries } from "@sieve/proto";

/** One chunk: the structured metadata of each of its entries. */
export type ChunkSpec = readonly Readonly<Record<string, string>>[];

/** One series: its stream labels and its chunks. */
export interface SeriesSpec {
  readonly labels: Readonly<Record<string, string>>;
  readonly chunks: readonly ChunkSpec[];
  /** The line of each entry, in the shape of `chunks`; empty lines when absent. */
  readonly lines?: readonly (readonly string[])[];
}

/** A series as written, with what each chunk holds. */
export interface WrittenSeries extends FilterSeries {
  readonly chunks: SegmentChunk[];
  /** Stream labels, parsed. */
  readonly streamLabels: Readonly<Record<string, string>>;
  /** The entries of each chunk, in the order of `chunks`. */
  readonly truth: readonly ChunkSpec[];
  /** Their lines. */
  readonly lines: readonly (readonly string[])[];
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
 * builder refuses is listed with a missing bloom, as the index would. With `ngrams`, the
 * builder also writes the entries' line n-grams, as an ingester with them on does.
 */
export async function writeBlock(
  store: PutStore,
  key: string,
  specs: readonly SeriesSpec[],
  baseNs = 1_714_521_600_000_000_000n,
  ngrams?: NgramOptions,
  tokens: Pick<SeriesBloomOptions, "metadataTokens" | "prefixed"> = {},
): Promise<WrittenSeries[]> {
  const inputs: BloomBlockInput[] = [];
  const pending: Omit<WrittenSeries, "bloom">[] = [];
  const missing = new Map<bigint, BloomLocation>();
  specs.forEach((spec, si) => {
    const labels = labelsString(labelsFromObject(spec.labels));
    const fp = fingerprint(labels);
    const builder = new SeriesBloomBuilder({ ...tokens, ...(ngrams !== undefined && { ngrams }) });
    const lines = spec.chunks.map((entries, ci) =>
      entries.map((_, ei) => spec.lines?.[ci]?.[ei] ?? ""),
    );
    const identities = spec.chunks.map((entries, ci) => {
      entries.forEach((sm, ei) => {
        const pairs = Object.entries(sm).map(([name, value]) => ({ name, value }));
        builder.add(pairs, lines[ci]![ei]);
      });
      const from = baseNs + BigInt(si) * 1_000_000_000n + BigInt(ci) * 1_000_000n;
      const chunk = { from, through: from + 999_999n, checksum: nextChecksum() };
      builder.cut(chunk);
      return chunk;
    });
    const bloom = spec.chunks.length === 0 ? undefined : builder.finish();
    const prefixed = new Map<bigint, boolean>();
    if (bloom?.status === "ok") {
      const { filter, chunks, metadataTokens } = bloom;
      inputs.push({ fingerprint: fp, filter, chunks, ngrams, metadataTokens });
      for (const c of bloom.chunks) prefixed.set(c.from, c.prefixed);
    } else if (bloom !== undefined) {
      missing.set(fp, { kind: "missing", reason: bloom.reason });
    }
    pending.push({
      fingerprint: fp,
      labels,
      streamLabels: spec.labels,
      truth: spec.chunks,
      lines,
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
        ? {
            kind: "block",
            key,
            offset: e.offset,
            length: e.length,
            ngrams,
            ...(tokens.metadataTokens !== undefined && { metadataTokens: tokens.metadataTokens }),
          }
        : (missing.get(p.fingerprint) ?? { kind: "missing", reason: "disabled" });
    return { ...p, bloom };
  });
}

/** Whether an entry with metadata `sm` and `line` in a stream with `labels` passes a query. */
export type EntryPredicate = (
  sm: Readonly<Record<string, string>>,
  labels: Readonly<Record<string, string>>,
  line: string,
) => boolean;

/** Chunks holding an entry the predicate keeps, as `fingerprint/from` strings. */
export function matchingChunks(
  series: readonly WrittenSeries[],
  keep: EntryPredicate,
): Set<string> {
  const out = new Set<string>();
  for (const s of series) {
    s.truth.forEach((entries, ci) => {
      if (entries.some((sm, ei) => keep(sm, s.streamLabels, s.lines[ci]![ei]!)))
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
