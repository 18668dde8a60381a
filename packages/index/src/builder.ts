import {
  lastHash,
  PartitionedBloomFilter,
  RibbonFilter,
  RIBBON_MIN_RATE,
  ScalableBloomFilter,
  type ScalableOptions,
} from "@sieve/bloom";
import { IndexError } from "./errors.js";
import { TokenSet } from "./tokenset.js";
import {
  ALL_METADATA_TOKENS,
  checkNgramOptions,
  chunkKeyHigh,
  chunkKeyLow,
  forEachNgram,
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
   * free and what the chunk-prefixed tokens are made from at finish; a chunk past it loses
   * its prefixed tokens (its chunk-level test falls back to the series-level one).
   */
  readonly maxChunkTokens?: number;
  /** Recently seen tokens remembered once a chunk's set has overflowed (4096). */
  readonly cacheSize?: number;
  /**
   * `ribbon` (default): at finish the bloom is built as one ribbon filter of exactly its
   * tokens (a Bloom filter when that is smaller, a few dozen tokens or fewer, or when the
   * rate is below the ribbon's 2^-16). `exact`: one Bloom filter sized for exactly its
   * tokens. `scalable`: the scalable filter grown as entries arrived is written as is, as
   * Loki's blooms are (bigger; kept for experiments that compare them).
   */
  readonly layout?: BloomLayout;
  /**
   * Which metadata tokens go in (both by default); recorded with the bloom, with its chunk
   * tokens keyed by checksum (tokens.ts).
   */
  readonly metadataTokens?: Pick<MetadataTokens, "keys" | "values">;
  /**
   * Whether chunk-prefixed tokens go in (default true) when a bloom covers two chunks or
   * more; without them a chunk's test is its series' test.
   */
  readonly prefixed?: boolean;
}

/** How a finished bloom's bits are laid out: see {@link SeriesBloomOptions.layout}. */
export type BloomLayout = "ribbon" | "exact" | "scalable";

/** The filters a {@link SeriesBloom} can hold. */
export type SeriesFilter = PartitionedBloomFilter | ScalableBloomFilter | RibbonFilter;

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
       * Usually a ribbon or partitioned filter of exactly the tokens it holds; the scalable
       * filter filled on arrival when a chunk's token set overflowed.
       */
      readonly filter: SeriesFilter;
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
  /** Chunk tokens keyed at finish (by checksum: nothing hashed again). */
  prefixed: number;
  /** Tokens hashed again at finish into an exact-size filter. */
  rehashed: number;
}

interface CutChunk {
  readonly chunk: ChunkIdentity;
  /** The chunk's distinct tokens, or undefined when they overflowed maxChunkTokens. */
  readonly tokens: TokenSet | undefined;
}

const DEFAULT_MAX_BLOOM_BYTES = 4 * 1024 * 1024;
const DEFAULT_MAX_CHUNK_TOKENS = 100_000;
const DEFAULT_CACHE_SIZE = 4096;
/** `=` in UTF-8: what joins a pair's name and value into its token. */
const EQUALS = 0x3d;
/** Symbol ids below this pair into one exact number key (name · 2^26 + value). */
const PAIR_KEY_IDS = 2 ** 26;

/**
 * One series' bloom as the ingester fills it: {@link add} (or {@link addInterned}) each
 * entry as it arrives, {@link cut} when the head chunk is cut with its final ref, and
 * {@link finish} at flush to take the bloom of the chunks cut so far.
 *
 * Each chunk's distinct tokens are kept as bytes and hashes (tokenset.ts), each hashed once
 * when first seen. The bloom written is by default rebuilt at finish as one filter sized for
 * exactly those tokens, from the stored hashes; the scalable filter is filled as tokens
 * arrive only when it is what gets written: with the `scalable` layout, or once a chunk's
 * token set overflowed (its tokens so far are then poured into it, and later ones follow).
 *
 * Chunk-prefixed tokens need the chunk's checksum, known only at cut. They are made from
 * each chunk's stored token hashes at finish, keyed by its checksum (tokens.ts), and only
 * when the bloom covers two chunks or more: for a bloom of one chunk they say nothing the unprefixed tokens do not. A bloom
 * rebuilt at finish whose chunks are all prefixed holds only the prefixed tokens (the
 * unprefixed ones would double it to say what they already say). docs/formats.md ("Bloom
 * blocks") has the measurements behind these choices.
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
  /** Whether tokens go into `filter` as they arrive (see the class comment). */
  private live: boolean;
  private head: TokenSet | undefined = new TokenSet();
  private headEntries = 0;
  /** Recent tokens, once the head's set overflowed: cleared when full. */
  private cache = new TokenSet();
  private cut_: CutChunk[] = [];
  private missing: MissingReason | undefined;
  /** Where a token's bytes are made before they are hashed. */
  private tokenBytes = new Uint8Array(256);
  /**
   * What {@link addInterned} has seen of the open head chunk, by its chunk builder's symbol
   * ids (`symbols` is that builder's table: another table resets it): names whose token is
   * in, and for each value id the name id + 1 of its first pair in (other names of the same
   * value, rare, in `otherPairs`).
   */
  private symbols: readonly string[] | undefined;
  private namesIn = new Uint8Array(64);
  private valueName = new Int32Array(256);
  private otherPairs = new Set<number>();
  private readonly visit = (token: string): void => {
    this.addString(token);
  };

  constructor(options: SeriesBloomOptions = {}) {
    const maxBloomBytes = options.maxBloomBytes ?? DEFAULT_MAX_BLOOM_BYTES;
    this.maxChunkTokens = options.maxChunkTokens ?? DEFAULT_MAX_CHUNK_TOKENS;
    this.cacheSize = options.cacheSize ?? DEFAULT_CACHE_SIZE;
    this.layout = options.layout ?? "ribbon";
    const { keys, values } = options.metadataTokens ?? ALL_METADATA_TOKENS;
    this.metadataTokens = { keys, values, checksumKeys: true };
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
    this.live = this.layout === "scalable";
  }

  /** Whether lines are tokenized (n-grams are on): a caller passes `line` only then. */
  get readsLines(): boolean {
    return this.ngrams !== undefined;
  }

  /** Tokenizes one entry of the head chunk: its structured metadata, and its line if n-grams are on. */
  add(metadata: readonly MetadataPair[], line?: string): void {
    this.headEntries++;
    const { keys, values } = this.metadataTokens;
    for (const { name, value } of metadata) {
      if (keys) this.addString(name);
      if (values) this.addPair(name, value);
    }
    if (this.ngrams !== undefined && line !== undefined)
      forEachNgram(line, this.ngrams, this.visit);
  }

  /**
   * {@link add} for an entry its chunk builder has interned: `ids` holds the symbol ids of
   * its pairs (name, value, …) in `symbols`, the builder's table (`ChunkBuilder.lastEntryIds`
   * and `symbolList`). A name or pair already in the chunk is recognised by its ids, with no
   * string made or hashed: the same tokens as {@link add}, at a fraction of the cost.
   */
  addInterned(ids: ArrayLike<number>, symbols: readonly string[], line?: string): void {
    this.headEntries++;
    if (symbols !== this.symbols) this.forgetIds(symbols);
    const { keys, values } = this.metadataTokens;
    for (let j = 0; j + 1 < ids.length; j += 2) {
      const nameId = ids[j]!;
      const valueId = ids[j + 1]!;
      if (keys) {
        if (nameId >= this.namesIn.length) this.namesIn = grown(this.namesIn, nameId);
        if (this.namesIn[nameId] === 0) {
          this.namesIn[nameId] = 1;
          this.addString(symbols[nameId]!);
        } else {
          this.stats.tokens++;
        }
      }
      if (values) {
        if (valueId >= this.valueName.length) this.valueName = grown(this.valueName, valueId);
        const first = this.valueName[valueId]!;
        let seen: boolean;
        if (first === 0) {
          this.valueName[valueId] = nameId + 1;
          seen = false;
        } else if (first === nameId + 1) {
          seen = true;
        } else if (nameId < PAIR_KEY_IDS && valueId < PAIR_KEY_IDS) {
          const key = nameId * PAIR_KEY_IDS + valueId;
          seen = this.otherPairs.has(key);
          if (!seen) this.otherPairs.add(key);
        } else {
          seen = false; // ids past exact keys: the token set tells
        }
        if (seen) this.stats.tokens++;
        else this.addPair(symbols[nameId]!, symbols[valueId]!);
      }
    }
    if (this.ngrams !== undefined && line !== undefined)
      forEachNgram(line, this.ngrams, this.visit);
  }

  /** The head chunk was cut as `chunk`: later entries belong to the next chunk. */
  cut(chunk: ChunkIdentity): void {
    this.head?.seal();
    this.cut_.push({ chunk, tokens: this.head });
    this.head = new TokenSet();
    this.headEntries = 0;
    this.cache = new TokenSet();
    this.forgetIds(undefined);
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
    let filter: SeriesFilter | undefined = this.filter;
    let missing = this.missing;
    if (missing === undefined) {
      if (complete && this.layout !== "scalable") {
        filter = this.exact(cut, prefixAll);
        if (filter === undefined) missing = "too_large";
      } else {
        // Live since the first overflow (or by layout): the filter holds every token.
        if (prefixAll) {
          for (const { chunk, tokens } of cut) {
            if (tokens !== undefined) this.addPrefixed(this.filter!, chunk, tokens);
          }
        }
        filter = this.filter;
        missing = this.missing;
      }
    }
    this.filter = this.newFilter();
    this.missing = undefined;
    this.live = this.layout === "scalable";
    if (this.headEntries > 0) {
      if (this.head === undefined) {
        this.missing = "incomplete";
        this.live = true;
      } else if (this.live) {
        this.head.forEachHash(this.addLive);
      }
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
   * The bloom of `cut`, rebuilt as one filter of exactly its tokens (a ribbon filter, or a
   * partitioned Bloom filter when that is smaller or the layout is `exact`), or undefined
   * past maxBloomBytes. Measured on lines of 200 bytes whose trace_id is shared by 10 lines
   * (bench/index.ts): the scalable filter written as is takes 1.0–4.5% of the
   * snappy-compressed lines, because its first filter is sized for 1024 tokens at fp·(1−r)
   * and each next one for 4 times more; the exact filter takes about 0.3%, and a ribbon
   * filter about a fifth less than that (7.4 bits a token at fp 0.01 against 9.6). Both are
   * filled from the hashes stored with the tokens: nothing is hashed twice.
   */
  private exact(cut: readonly CutChunk[], prefixAll: boolean): SeriesFilter | undefined {
    // With every chunk's tokens prefixed, unprefixed ones would only repeat them: the
    // gateway tests such a bloom chunk by chunk (on old blooms that hold both as well).
    const union = prefixAll ? undefined : unionOf(cut);
    let count = union?.size ?? 0;
    if (union === undefined) for (const { tokens } of cut) count += tokens!.size;
    // Checked before allocating: forCapacity takes -ln(fp)/ln²2 bits a token.
    const bytes = (count * -Math.log(this.fp)) / (Math.LN2 * Math.LN2) / 8;
    if (
      this.layout === "ribbon" &&
      this.fp >= RIBBON_MIN_RATE &&
      RibbonFilter.bytesFor(count, this.fp) < bytes
    ) {
      return this.ribbon(cut, union, count);
    }
    if (bytes > this.maxBloomBytes) return undefined;
    const filter = PartitionedBloomFilter.forCapacity(Math.max(1, count), this.fp);
    if (filter.byteLength > this.maxBloomBytes) return undefined;
    if (union !== undefined) {
      union.forEachHash((lo, hi) => {
        filter.addHashed(lo, hi);
      });
      this.stats.rehashed += union.size;
    } else {
      for (const { chunk, tokens } of cut) this.addPrefixed(filter, chunk, tokens!);
    }
    return filter;
  }

  /** {@link exact}'s ribbon filter of `union`, or else of every chunk's prefixed tokens. */
  private ribbon(
    cut: readonly CutChunk[],
    union: TokenSet | undefined,
    count: number,
  ): RibbonFilter | undefined {
    if (RibbonFilter.bytesFor(count, this.fp) > this.maxBloomBytes) return undefined;
    const lo = new Uint32Array(count);
    const hi = new Uint32Array(count);
    let n = 0;
    if (union !== undefined) {
      union.forEachHash((a, b) => {
        lo[n] = a;
        hi[n++] = b;
      });
      this.stats.rehashed += union.size;
    } else {
      for (const { chunk, tokens } of cut) {
        this.forEachChunkKey(chunk, tokens!, (a, b) => {
          lo[n] = a;
          hi[n++] = b;
        });
      }
    }
    const filter = RibbonFilter.fromHashes(lo, hi, n, this.fp);
    return filter.byteLength > this.maxBloomBytes ? undefined : filter;
  }

  private newFilter(): ScalableBloomFilter {
    return new ScalableBloomFilter(this.filterOptions);
  }

  /** Adds the token `name=value`, made as UTF-8 bytes without a string. */
  private addPair(name: string, value: string): void {
    const need = 3 * (name.length + value.length) + 1;
    if (need > this.tokenBytes.length) this.tokenBytes = new Uint8Array(2 * need);
    const bytes = this.tokenBytes;
    let n = encoder.encodeInto(name, bytes).written;
    bytes[n++] = EQUALS;
    n += encoder.encodeInto(value, bytes.subarray(n)).written;
    this.addBytes(bytes, n);
  }

  private addString(token: string): void {
    const need = 3 * token.length;
    if (need > this.tokenBytes.length) this.tokenBytes = new Uint8Array(2 * need);
    this.addBytes(this.tokenBytes, encoder.encodeInto(token, this.tokenBytes).written);
  }

  /** The token whose UTF-8 bytes are `bytes[0, length)`: held once per chunk, hashed once. */
  private addBytes(bytes: Uint8Array, length: number): void {
    this.stats.tokens++;
    const head = this.head;
    if (head !== undefined) {
      if (!head.add(bytes, length)) return;
      const lo = lastHash[0]!;
      const hi = lastHash[1]!;
      this.stats.hashed++;
      if (head.size > this.maxChunkTokens) {
        // Past the set's bound: it is kept for this chunk's tokens so far, which the filter
        // now takes (with every chunk cut since the last finish), and no prefixed ones.
        if (this.live) this.addLive(lo, hi);
        else this.goLive();
        this.head = undefined;
        this.cache.add(bytes, length);
        return;
      }
      if (this.live) this.addLive(lo, hi);
      return;
    }
    // Cleared when full rather than evicted one by one: Loki's tokenizer cache does the
    // same, because neighbouring lines repeat the same tokens.
    if (this.cache.size >= this.cacheSize) this.cache = new TokenSet();
    if (!this.cache.add(bytes, length)) return;
    this.stats.hashed++;
    this.addLive(lastHash[0]!, lastHash[1]!);
  }

  /** Pours every token held since the last finish into the filter, which then takes them as they come. */
  private goLive(): void {
    if (this.live) return;
    this.live = true;
    for (const { tokens } of this.cut_) tokens?.forEachHash(this.addLive);
    this.head?.forEachHash(this.addLive);
  }

  private readonly addLive = (lo: number, hi: number): void => {
    const filter = this.filter;
    if (filter !== undefined && !filter.addHashed(lo, hi)) this.overflow();
  };

  private overflow(): void {
    this.filter = undefined;
    this.missing = "too_large";
  }

  /** Starts {@link addInterned}'s memory afresh, for the table `symbols`. */
  private forgetIds(symbols: readonly string[] | undefined): void {
    this.symbols = symbols;
    // Sized by the chunk's symbols: a big chunk's arrays go with it rather than stay per series.
    if (this.namesIn.length > 64) this.namesIn = new Uint8Array(64);
    else this.namesIn.fill(0);
    if (this.valueName.length > 256) this.valueName = new Int32Array(256);
    else this.valueName.fill(0);
    this.otherPairs.clear();
  }

  /** Adds each token of `chunk`, keyed by its checksum, to `filter`. */
  private addPrefixed(
    filter: PartitionedBloomFilter | ScalableBloomFilter,
    chunk: ChunkIdentity,
    tokens: TokenSet,
  ): void {
    let full = false;
    this.forEachChunkKey(chunk, tokens, (lo, hi) => {
      if (full) return;
      if (filter instanceof PartitionedBloomFilter) {
        filter.addHashed(lo, hi);
      } else if (!filter.addHashed(lo, hi)) {
        this.overflow();
        full = true;
      }
    });
  }

  /** Each token of `chunk` keyed by the chunk's checksum (tokens.ts): its stored hash, XORed. */
  private forEachChunkKey(
    chunk: ChunkIdentity,
    tokens: TokenSet,
    visit: (lo: number, hi: number) => void,
  ): void {
    const kl = chunkKeyLow(chunk.checksum);
    const kh = chunkKeyHigh(chunk.checksum);
    this.stats.prefixed += tokens.size;
    tokens.forEachHash((lo, hi) => {
      visit((lo ^ kl) >>> 0, (hi ^ kh) >>> 0);
    });
  }
}

/** The distinct tokens of every chunk in `cut` (each chunk's set is complete). */
function unionOf(cut: readonly CutChunk[]): TokenSet {
  if (cut.length === 1) return cut[0]!.tokens!;
  const union = new TokenSet(cut[0]!.tokens!.size);
  for (const { tokens } of cut) tokens!.forEachHash((lo, hi) => union.addHashed(lo, hi));
  return union;
}

/** A copy of `a` with room for index `i` (doubling). */
function grown<T extends Uint8Array | Int32Array>(a: T, i: number): T {
  const out = new (a.constructor as new (n: number) => T)(Math.max(2 * a.length, i + 1));
  out.set(a);
  return out;
}

function covered(chunk: ChunkIdentity, prefixed: boolean): CoveredChunk {
  return { from: chunk.from, through: chunk.through, checksum: chunk.checksum, prefixed };
}

const encoder = new TextEncoder();
