import { PartitionedBloomFilter, ScalableBloomFilter, type ScalableOptions } from "@sieve/bloom";
import { IndexError } from "./errors.js";
import {
  ALL_METADATA_TOKENS,
  CHUNK_PREFIX_BYTES,
  checkNgramOptions,
  forEachNgram,
  writeChunkPrefix,
  type ChunkIdentity,
  type MetadataPair,
  type MetadataTokens,
  type NgramOptions,
} from "./tokens.js";

/** How a {@link SeriesBloomBuilder} tokenizes and when it gives up. Units are in the names. */
export interface SeriesBloomOptions {
  /** The scalable filter's shape; Loki's defaults (fp 0.01, r 0.8, growth 4, hint 1024). */
  readonly filter?: Omit<ScalableOptions, "maxBytes">;
  /** A bloom whose bit arrays would pass this is dropped and recorded as missing (4 MiB). */
  readonly maxBloomBytes?: number;
  /** Line n-grams, for tenants that enable them; off when absent. */
  readonly ngrams?: NgramOptions;
  /**
   * Distinct tokens remembered per chunk (100,000). The set is what makes a repeated token
   * free and what the chunk-prefixed tokens are made from at cut time; a chunk past it loses
   * its prefixed tokens (its chunk-level test falls back to the series-level one).
   */
  readonly maxChunkTokens?: number;
  /** Recently seen tokens remembered once a chunk's set has overflowed (4096). */
  readonly cacheSize?: number;
  /**
   * `exact` (default): at finish the bloom is rebuilt as one filter sized for exactly its
   * tokens. `scalable`: the scalable filter grown as entries arrived is written as is, as
   * Loki's blooms are (bigger; kept for experiments that compare the two).
   */
  readonly layout?: BloomLayout;
  /** Which metadata tokens go in (both by default); recorded with the bloom. */
  readonly metadataTokens?: MetadataTokens;
  /**
   * Whether chunk-prefixed tokens go in (default true) when a bloom covers two chunks or
   * more; without them a chunk's test is its series' test.
   */
  readonly prefixed?: boolean;
}

/** How a finished bloom's bits are laid out: see {@link SeriesBloomOptions.layout}. */
export type BloomLayout = "exact" | "scalable";

/** A chunk a bloom covers; `prefixed` says whether its chunk-prefixed tokens are in the bloom. */
export interface CoveredChunk extends ChunkIdentity {
  /**
   * False when the bloom covers this chunk alone (the series test then is the chunk test, so
   * the prefixed tokens would only double the bloom) or when the chunk's token set
   * overflowed. A chunk test on an unprefixed chunk answers the series test.
   */
  readonly prefixed: boolean;
}

/** Why a series has no bloom for some chunks: shared by code, metrics and logs. */
export const MISSING_REASONS = {
  too_large: "the bloom grew past maxBloomBytes",
  incomplete: "a bloom reset lost tokens of the open head chunk",
  disabled: "blooms are off for the tenant",
} as const;

/** A key of {@link MISSING_REASONS}. */
export type MissingReason = keyof typeof MISSING_REASONS;

/** The bloom of the chunks cut since the last {@link SeriesBloomBuilder.finish}. */
export type SeriesBloom =
  | {
      readonly status: "ok";
      /**
       * Usually a partitioned filter sized for exactly the tokens it holds; the scalable
       * filter filled on arrival when a chunk's token set overflowed.
       */
      readonly filter: PartitionedBloomFilter | ScalableBloomFilter;
      readonly chunks: readonly CoveredChunk[];
      /** The line n-grams the filter holds besides metadata tokens; none when undefined. */
      readonly ngrams: NgramOptions | undefined;
      readonly metadataTokens: MetadataTokens;
    }
  | {
      /** No bloom: every covered chunk "may match". */
      readonly status: "missing";
      readonly reason: MissingReason;
      readonly chunks: readonly CoveredChunk[];
    };

/** Counters a builder keeps, for metrics. */
export interface BuilderStats {
  /** Tokens produced by entries. */
  tokens: number;
  /** Tokens hashed into the filter (the rest were already seen in the chunk). */
  hashed: number;
  /** Chunk-prefixed tokens hashed at finish. */
  prefixed: number;
  /** Tokens hashed again at finish into an exact-size filter. */
  rehashed: number;
}

interface CutChunk {
  readonly chunk: ChunkIdentity;
  /** The chunk's distinct tokens, or undefined when they overflowed maxChunkTokens. */
  readonly tokens: Set<string> | undefined;
}

const DEFAULT_MAX_BLOOM_BYTES = 4 * 1024 * 1024;
const DEFAULT_MAX_CHUNK_TOKENS = 100_000;
const DEFAULT_CACHE_SIZE = 4096;

/**
 * One series' bloom as the ingester fills it: {@link add} each entry as it arrives (its
 * unprefixed tokens go into a scalable filter at once, each distinct token hashed once per
 * chunk), {@link cut} when the head chunk is cut with its final ref, and {@link finish} at
 * flush to take the bloom of the chunks cut so far.
 *
 * Chunk-prefixed tokens need the chunk's checksum, known only at cut. The builder keeps
 * each chunk's distinct tokens (the same set that spares repeated tokens a hash) and adds
 * their prefixed forms at finish, and only when the bloom covers two chunks or more: for a
 * bloom of one chunk they say nothing the unprefixed tokens do not. docs/formats.md ("Bloom
 * blocks") has the measurements behind this choice.
 */
export class SeriesBloomBuilder {
  /** Counters since construction. */
  readonly stats: BuilderStats = { tokens: 0, hashed: 0, prefixed: 0, rehashed: 0 };
  private readonly filterOptions: ScalableOptions;
  private readonly fp: number;
  private readonly maxBloomBytes: number;
  private readonly ngrams: NgramOptions | undefined;
  private readonly maxChunkTokens: number;
  private readonly cacheSize: number;
  private readonly layout: BloomLayout;
  private readonly metadataTokens: MetadataTokens;
  private readonly prefixed: boolean;
  private filter: ScalableBloomFilter | undefined;
  private head: Set<string> | undefined = new Set();
  private headEntries = 0;
  private readonly cache = new Set<string>();
  private cut_: CutChunk[] = [];
  private missing: MissingReason | undefined;
  private scratch = new Uint8Array(256);
  private readonly visit = (token: string): void => {
    this.addToken(token);
  };

  constructor(options: SeriesBloomOptions = {}) {
    const maxBloomBytes = options.maxBloomBytes ?? DEFAULT_MAX_BLOOM_BYTES;
    this.maxChunkTokens = options.maxChunkTokens ?? DEFAULT_MAX_CHUNK_TOKENS;
    this.cacheSize = options.cacheSize ?? DEFAULT_CACHE_SIZE;
    this.layout = options.layout ?? "exact";
    this.metadataTokens = options.metadataTokens ?? ALL_METADATA_TOKENS;
    this.prefixed = options.prefixed ?? true;
    if (!(maxBloomBytes > 0))
      throw new IndexError("invalid_argument", `maxBloomBytes ${maxBloomBytes}`);
    if (!(Number.isInteger(this.maxChunkTokens) && this.maxChunkTokens >= 0)) {
      throw new IndexError("invalid_argument", `maxChunkTokens ${this.maxChunkTokens}`);
    }
    if (!(Number.isInteger(this.cacheSize) && this.cacheSize >= 1)) {
      throw new IndexError("invalid_argument", `cacheSize ${this.cacheSize}`);
    }
    if (options.ngrams !== undefined) checkNgramOptions(options.ngrams);
    this.ngrams = options.ngrams;
    this.filterOptions = { ...options.filter, maxBytes: maxBloomBytes };
    this.maxBloomBytes = maxBloomBytes;
    this.filter = this.newFilter();
    this.fp = this.filter.parameters.fp;
  }

  /** Tokenizes one entry of the head chunk: its structured metadata, and its line if n-grams are on. */
  add(metadata: readonly MetadataPair[], line?: string): void {
    this.headEntries++;
    const { keys, values } = this.metadataTokens;
    for (const { name, value } of metadata) {
      if (keys) this.addToken(name);
      if (values) this.addToken(`${name}=${value}`);
    }
    if (this.ngrams !== undefined && line !== undefined)
      forEachNgram(line, this.ngrams, this.visit);
  }

  /** The head chunk was cut as `chunk`: later entries belong to the next chunk. */
  cut(chunk: ChunkIdentity): void {
    this.cut_.push({ chunk, tokens: this.head });
    this.head = new Set();
    this.headEntries = 0;
    this.cache.clear();
  }

  /**
   * Distinct tokens of the open head chunk held in memory: its token set, or the cache of
   * recent tokens once the set overflowed.
   */
  get heldTokens(): number {
    return this.head?.size ?? this.cache.size;
  }

  /** Chunks cut and not yet finished. */
  get pendingChunks(): number {
    return this.cut_.length;
  }

  /**
   * The bloom of the chunks cut since the last call, or undefined when none was cut. The
   * builder starts a new bloom, carrying over the tokens of the open head chunk (entries
   * added since the last cut), which the returned bloom also holds: a few extra positives,
   * never a false negative.
   */
  finish(): SeriesBloom | undefined {
    if (this.cut_.length === 0) return undefined;
    const cut = this.cut_;
    this.cut_ = [];
    const prefixAll = cut.length > 1 && this.prefixed;
    const complete = cut.every((c) => c.tokens !== undefined);
    let filter: PartitionedBloomFilter | ScalableBloomFilter | undefined = this.filter;
    let missing = this.missing;
    if (missing === undefined) {
      if (complete && this.layout === "exact") {
        filter = this.exact(cut, prefixAll);
        if (filter === undefined) missing = "too_large";
      } else if (prefixAll) {
        for (const { chunk, tokens } of cut) {
          if (tokens !== undefined) this.addPrefixed(this.filter!, chunk, tokens);
        }
        filter = this.filter;
        missing = this.missing;
      }
    }
    this.filter = this.newFilter();
    this.missing = undefined;
    if (this.headEntries > 0) {
      if (this.head === undefined) this.missing = "incomplete";
      else for (const token of this.head) this.hash(token);
    }
    if (missing !== undefined || filter === undefined) {
      const chunks = cut.map(({ chunk }) => covered(chunk, false));
      return { status: "missing", reason: missing ?? "too_large", chunks };
    }
    const chunks = cut.map(({ chunk, tokens }) =>
      covered(chunk, prefixAll && tokens !== undefined),
    );
    return {
      status: "ok",
      filter,
      chunks,
      ngrams: this.ngrams,
      metadataTokens: this.metadataTokens,
    };
  }

  /**
   * The bloom of `cut`, rebuilt as one partitioned filter sized for exactly its tokens, or
   * undefined past maxBloomBytes. Measured on lines of 200 bytes whose trace_id is shared by
   * 10 lines (bench/index.ts): the scalable filter written as is takes 1.0–4.5% of the
   * snappy-compressed lines, because its first filter is sized for 1024 tokens at fp·(1−r)
   * and each next one for 4 times more; the exact filter takes about 0.3%. Hashing the
   * distinct tokens once more costs far less than writing the bigger filter.
   */
  private exact(cut: readonly CutChunk[], prefixAll: boolean): PartitionedBloomFilter | undefined {
    let union = cut[0]!.tokens!;
    if (cut.length > 1) {
      union = new Set(union);
      for (let i = 1; i < cut.length; i++) for (const token of cut[i]!.tokens!) union.add(token);
    }
    let count = union.size;
    if (prefixAll) for (const { tokens } of cut) count += tokens!.size;
    // Checked before allocating: forCapacity takes -ln(fp)/ln²2 bits a token.
    const bytes = (count * -Math.log(this.fp)) / (Math.LN2 * Math.LN2) / 8;
    if (bytes > this.maxBloomBytes) return undefined;
    const filter = PartitionedBloomFilter.forCapacity(Math.max(1, count), this.fp);
    if (filter.byteLength > this.maxBloomBytes) return undefined;
    for (const token of union) filter.add(token);
    this.stats.rehashed += union.size;
    if (prefixAll) for (const { chunk, tokens } of cut) this.addPrefixed(filter, chunk, tokens!);
    return filter;
  }

  private newFilter(): ScalableBloomFilter {
    return new ScalableBloomFilter(this.filterOptions);
  }

  private addToken(token: string): void {
    this.stats.tokens++;
    const head = this.head;
    if (head !== undefined) {
      if (head.has(token)) return;
      if (head.size < this.maxChunkTokens) {
        head.add(token);
      } else {
        this.head = undefined;
        this.cache.add(token);
      }
    } else {
      const cache = this.cache;
      if (cache.has(token)) return;
      // Cleared when full rather than evicted one by one: Loki's tokenizer cache does the
      // same, because neighbouring lines repeat the same tokens.
      if (cache.size >= this.cacheSize) cache.clear();
      cache.add(token);
    }
    this.hash(token);
  }

  private hash(token: string): void {
    this.stats.hashed++;
    const filter = this.filter;
    if (filter !== undefined && !filter.add(token)) this.overflow();
  }

  private overflow(): void {
    this.filter = undefined;
    this.missing = "too_large";
  }

  /** Adds prefix(chunk)+token for each token to `filter`, in one reused buffer. */
  private addPrefixed(
    filter: PartitionedBloomFilter | ScalableBloomFilter,
    chunk: ChunkIdentity,
    tokens: Set<string>,
  ): void {
    writeChunkPrefix(chunk, this.scratch);
    for (const token of tokens) {
      if (CHUNK_PREFIX_BYTES + token.length * 3 > this.scratch.length) {
        const grown = new Uint8Array(CHUNK_PREFIX_BYTES + token.length * 3);
        grown.set(this.scratch.subarray(0, CHUNK_PREFIX_BYTES));
        this.scratch = grown;
      }
      const { written } = encoder.encodeInto(token, this.scratch.subarray(CHUNK_PREFIX_BYTES));
      this.stats.prefixed++;
      const key = this.scratch.subarray(0, CHUNK_PREFIX_BYTES + written);
      if (filter instanceof PartitionedBloomFilter) {
        filter.add(key);
      } else if (!filter.add(key)) {
        this.overflow();
        return;
      }
    }
  }
}

function covered(chunk: ChunkIdentity, prefixed: boolean): CoveredChunk {
  return { from: chunk.from, through: chunk.through, checksum: chunk.checksum, prefixed };
}

const encoder = new TextEncoder();
