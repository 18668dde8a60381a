import { hashKey, lastHash, type Key } from "@sieve/bloom";
import type { CoveredChunk } from "./builder.js";
import {
  chunkKeyHigh,
  chunkKeyLow,
  chunkPrefix,
  prefixToken,
  type MetadataTokens,
} from "./tokens.js";

/** What a test needs of a filter: any `@sieve/bloom` filter fits. */
export interface TestableFilter {
  test(key: Key): boolean;
  testHashed(lo: number, hi: number): boolean;
}

/** What a chunk test needs of a bloom: its filter, and how its chunk tokens are keyed. */
export interface TestableBloom {
  readonly filter: TestableFilter;
  readonly metadataTokens: MetadataTokens;
}

/**
 * Whether the series whose bloom is `filter` may hold a line with structured metadata
 * `name=value`, by its unprefixed tokens: false means certainly not, for every chunk the
 * bloom covers. Both tokens the pair added are tested (`name=value`, then `name`), which
 * only lowers the false-positive rate. Pass `undefined` for a missing bloom: the answer is
 * then true. A bloom whose chunks are all prefixed holds no unprefixed tokens (since the
 * ribbon layout): ask {@link bloomMayContain} for any bloom.
 */
export function seriesMayContain(
  filter: TestableFilter | undefined,
  name: string,
  value: string,
): boolean {
  if (filter === undefined) return true;
  return filter.test(`${name}=${value}`) && filter.test(name);
}

/** Whether the series may hold any line with structured metadata named `name`. */
export function seriesMayContainName(filter: TestableFilter | undefined, name: string): boolean {
  return filter === undefined || filter.test(name);
}

/**
 * Whether some chunk a bloom covers may hold `name=value`, as the bloom gateway asks: a
 * bloom whose chunks are all prefixed by chunk, the others by the series' tokens.
 */
export function bloomMayContain(
  bloom: (TestableBloom & { readonly chunks: readonly CoveredChunk[] }) | undefined,
  name: string,
  value: string,
): boolean {
  if (bloom === undefined) return true;
  const { chunks } = bloom;
  if (chunks.length > 0 && chunks.every((c) => c.prefixed)) {
    return chunks.some((c) => chunkMayContain(bloom, c, name, value));
  }
  return seriesMayContain(bloom.filter, name, value);
}

/**
 * Whether `chunk`, one of the chunks the bloom covers, may hold `name=value`. Chunks
 * without prefixed tokens (the bloom's only chunk, or one whose tokens overflowed) get the
 * series answer; the others are tested with their own keys alone (a bloom whose chunks are
 * all prefixed holds nothing else).
 */
export function chunkMayContain(
  bloom: TestableBloom | undefined,
  chunk: CoveredChunk,
  name: string,
  value: string,
): boolean {
  if (bloom === undefined || !chunk.prefixed) return seriesMayContain(bloom?.filter, name, value);
  return chunkHas(bloom, chunk, `${name}=${value}`) && chunkHas(bloom, chunk, name);
}

/** Whether `chunk` may hold the n-gram (or any raw token) `token`, keyed as the builder does. */
export function chunkMayContainToken(
  bloom: TestableBloom | undefined,
  chunk: CoveredChunk,
  token: string,
): boolean {
  if (bloom === undefined) return true;
  if (!chunk.prefixed) return bloom.filter.test(token);
  return chunkHas(bloom, chunk, token);
}

/** The test of `token` keyed to a prefixed `chunk`, as tokens.ts says for the bloom's flags. */
function chunkHas(bloom: TestableBloom, chunk: CoveredChunk, token: string): boolean {
  if (bloom.metadataTokens.checksumKeys !== true) {
    return bloom.filter.test(prefixToken(chunkPrefix(chunk), token));
  }
  hashKey(token);
  return bloom.filter.testHashed(
    (lastHash[0]! ^ chunkKeyLow(chunk.checksum)) >>> 0,
    (lastHash[1]! ^ chunkKeyHigh(chunk.checksum)) >>> 0,
  );
}
