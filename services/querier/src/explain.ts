/**
 * A query's explain (`explain=true`, answered as `data.explain`): every chunk of the index in
 * the query's range, kept or pruned, and why. Chunks the ingesters answer from (unflushed)
 * are not listed. The list stops at {@link EXPLAIN_MAX_CHUNKS}; `total` counts them all.
 */
import type { IndexedChunk } from "@sieve/index";

/** Most chunks an explain lists (`limit`); past it, `truncated` is true. */
export const EXPLAIN_MAX_CHUNKS = 1000;

/**
 * Why a chunk was kept or pruned: `series` (its series' unprefixed tokens failed the bloom
 * test) and `chunk` (its own prefixed tokens failed) prune; `passed` (the test passed),
 * `no_bloom` (no bloom was tested) and `fail_open` (the gateway could not test it) keep.
 */
export type ExplainReason = "series" | "chunk" | "passed" | "no_bloom" | "fail_open";

/**
 * The `detail` of a `no_bloom` chunk, beside the index's missing reasons (`too_large`,
 * `incomplete`, `disabled`: see `@sieve/index` MISSING_REASONS). A `fail_open` chunk's detail
 * is the gateway's fail-open reason (`@sieve/bloom-gateway` reasons.ts).
 */
export const NO_BLOOM_DETAILS = {
  no_test: "the query has no matcher or line filter a bloom can test",
  no_ngrams: "the query's bloom test is line filters only, and the chunk's bloom has no n-grams",
  no_gateway: "the querier has no bloom gateway",
} as const;

/** A key of {@link NO_BLOOM_DETAILS}. */
export type NoBloomDetail = keyof typeof NO_BLOOM_DETAILS;

/** What the plan decided for one chunk. */
export interface ChunkOutcome {
  readonly outcome: "pruned" | "kept";
  readonly reason: ExplainReason;
  /** For a pruned chunk: the LogQL text of the test leaf that failed. */
  readonly test?: string;
  /** For `no_bloom` and `fail_open`: why. */
  readonly detail?: string;
}

/** One chunk of `data.explain.chunks`. */
export interface ExplainChunk extends ChunkOutcome {
  /** The series' canonical labels, `{a="b", c="d"}`. */
  readonly stream: string;
  /** Unix ns, as decimal strings (Loki's timestamps in JSON). */
  readonly from: string;
  readonly through: string;
  readonly checksum: number;
  /** Bytes of the chunk object. */
  readonly bytes: number;
}

/** `data.explain`. */
export interface QueryExplain {
  readonly chunks: ExplainChunk[];
  /** Chunks in range, listed or not. */
  readonly total: number;
  readonly truncated: boolean;
  readonly limit: number;
}

/** Collects a query's explain as its plan judges each chunk. */
export class Explain {
  private readonly chunks: ExplainChunk[] = [];
  private total = 0;

  /** One chunk of series `stream` and what was decided for it. */
  add(stream: string, chunk: IndexedChunk, outcome: ChunkOutcome): void {
    if (++this.total > EXPLAIN_MAX_CHUNKS) return;
    this.chunks.push({
      stream,
      from: chunk.ref.from.toString(),
      through: chunk.ref.through.toString(),
      checksum: chunk.ref.checksum,
      bytes: chunk.bytes,
      ...outcome,
    });
  }

  toJSON(): QueryExplain {
    return {
      chunks: this.chunks,
      total: this.total,
      truncated: this.total > EXPLAIN_MAX_CHUNKS,
      limit: EXPLAIN_MAX_CHUNKS,
    };
  }
}
