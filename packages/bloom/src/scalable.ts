import { BloomError } from "./errors.js";
import { eachBatch, hashKey, lastHash, testAllHashed, type Key } from "./hash.js";
import { PartitionedBloomFilter } from "./partitioned.js";

/** How a scalable filter grows. Every field has Loki's default. */
export interface ScalableOptions {
  /** Keys the first filter is sized for (Loki: 1024). */
  readonly initialCapacity?: number;
  /** Bound on the compound false-positive rate of the whole chain (Loki: 0.01). */
  readonly fp?: number;
  /** Each new filter's rate is the previous one's times this (Loki: 0.8). */
  readonly tighteningRatio?: number;
  /** Each new filter is sized for this many times the previous one's keys (Loki: 4). */
  readonly growth?: number;
  /** The newest filter is full when this fraction of its bits is set (Loki: 0.5). */
  readonly fillRatio?: number;
  /** Memory the chain may take, in bytes of bit arrays; past it, the filter reports full. */
  readonly maxBytes?: number;
}

/** What {@link ScalableBloomFilter.testAndAdd} did with a key. */
export type AddResult = "present" | "added" | "full";

/** The options with every default filled in. */
export type ScalableParameters = Required<ScalableOptions>;

/** Loki's defaults (pkg/storage/bloom/v1, after BoomFilters), and no memory bound. */
export const SCALABLE_DEFAULTS: ScalableParameters = {
  initialCapacity: 1024,
  fp: 0.01,
  tighteningRatio: 0.8,
  growth: 4,
  fillRatio: 0.5,
  maxBytes: Infinity,
};

/**
 * A scalable Bloom filter (Almeida et al., "Scalable Bloom Filters", 2007): a chain of
 * partitioned filters; keys go into the newest, and when its fill ratio reaches the limit a
 * new one, `growth` times larger and `tighteningRatio` times stricter, is appended. A key
 * is present if any filter has it.
 *
 * The compound false-positive rate is at most the sum of the filters' rates. Loki starts
 * the chain at fp, so the sum approaches fp/(1-r) (5·fp with r = 0.8). Here, as in
 * RedisBloom, the first filter is tightened to fp·(1-r): the sum fp·(1-r)·(1 + r + r² + …)
 * stays at or under fp however far the chain grows.
 *
 * The fill ratio of the newest filter is a counter it keeps as bits are set, so checking it
 * before every add costs nothing; a popcount would be O(m) per add, and BoomFilters'
 * estimate from a count of adds overcounts repeated keys.
 */
export class ScalableBloomFilter {
  readonly parameters: ScalableParameters;
  private readonly chain: PartitionedBloomFilter[];
  private bytes = 0;
  private isFull = false;

  /** An empty chain, or (deserialisation) one over existing `filters`, oldest first. */
  constructor(options: ScalableOptions = {}, filters?: readonly PartitionedBloomFilter[]) {
    this.parameters = { ...SCALABLE_DEFAULTS, ...options };
    checkParameters(this.parameters);
    this.chain = [];
    if (filters === undefined || filters.length === 0) {
      if (!this.grow()) {
        throw new BloomError("invalid_parameters", "maxBytes is below the first filter's size");
      }
    } else {
      for (const filter of filters) {
        this.chain.push(filter);
        this.bytes += filter.byteLength;
      }
    }
  }

  /** The partitioned filters, oldest first. */
  get filters(): readonly PartitionedBloomFilter[] {
    return this.chain;
  }

  /** Whether the newest filter is full and another would exceed `maxBytes`. */
  get full(): boolean {
    return this.isFull;
  }

  /**
   * Adds `key` to the newest filter, growing the chain first if that filter is full.
   * Answers false, storing nothing, when the chain is full and may not grow.
   */
  add(key: Key): boolean {
    hashKey(key);
    return this.addHashed(lastHash[0]!, lastHash[1]!);
  }

  /** {@link add} for a key already hashed (its xxhash64 as two 32-bit halves). */
  addHashed(lo: number, hi: number): boolean {
    const newest = this.writable();
    if (newest === undefined) return false;
    newest.addHashed(lo, hi);
    return true;
  }

  /** Whether `key` may have been added: false means certainly not. */
  test(key: Key): boolean {
    hashKey(key);
    return this.testHashed(lastHash[0]!, lastHash[1]!);
  }

  /** Adds `key` unless some filter may already hold it. */
  testAndAdd(key: Key): AddResult {
    hashKey(key);
    const lo = lastHash[0]!;
    const hi = lastHash[1]!;
    if (this.testHashed(lo, hi)) return "present";
    const newest = this.writable();
    if (newest === undefined) return "full";
    newest.addHashed(lo, hi);
    return "added";
  }

  /** Adds every key, hashed in batches; answers how many were stored (fewer once full). */
  addMany(keys: readonly Key[]): number {
    let stored = 0;
    eachBatch(keys, (hashes, _from, count) => {
      for (let i = 0; i < count; i++) {
        const newest = this.writable();
        if (newest === undefined) return;
        newest.addHashed(hashes[2 * i]!, hashes[2 * i + 1]!);
        stored++;
      }
    });
    return stored;
  }

  /** Tests every key in batches: out[i] is 1 when keys[i] may be present, 0 when it is absent. */
  testMany(keys: readonly Key[], out = new Uint8Array(keys.length)): Uint8Array {
    return testAllHashed(this, keys, out);
  }

  /** Tests a hash given as two 32-bit halves; newest first, where most keys are. */
  testHashed(lo: number, hi: number): boolean {
    for (let i = this.chain.length - 1; i >= 0; i--) {
      if (this.chain[i]!.testHashed(lo, hi)) return true;
    }
    return false;
  }

  /** Estimated distinct keys: the sum over the chain. */
  estimatedCount(): number {
    let total = 0;
    for (const filter of this.chain) total += filter.estimatedCount();
    return total;
  }

  /** Upper bound on the compound false-positive rate now: 1 - Π(1 - rate of each filter). */
  estimatedFalsePositiveRate(): number {
    let none = 1;
    for (const filter of this.chain) none *= 1 - filter.estimatedFalsePositiveRate();
    return 1 - none;
  }

  /** Memory of all bit arrays, in bytes. */
  get byteLength(): number {
    return this.bytes;
  }

  /** The newest filter if it has room, after growing the chain if needed. */
  private writable(): PartitionedBloomFilter | undefined {
    const newest = this.chain[this.chain.length - 1]!;
    if (newest.fillRatio() < this.parameters.fillRatio) return newest;
    if (this.isFull || !this.grow()) return undefined;
    return this.chain[this.chain.length - 1];
  }

  /** Appends the next filter of the chain, unless it would exceed maxBytes. */
  private grow(): boolean {
    const { initialCapacity, fp, tighteningRatio, growth, fillRatio, maxBytes } = this.parameters;
    const level = this.chain.length;
    const capacity = Math.ceil(initialCapacity * growth ** level);
    const rate = fp * (1 - tighteningRatio) * tighteningRatio ** level;
    let next: PartitionedBloomFilter;
    try {
      next = PartitionedBloomFilter.forCapacity(capacity, rate, fillRatio);
    } catch (error) {
      // Past 2^32 bits, or a rate that underflowed: the chain cannot grow any further.
      if (!(error instanceof BloomError) || level === 0) throw error;
      this.isFull = true;
      return false;
    }
    if (this.bytes + next.byteLength > maxBytes) {
      this.isFull = true;
      return false;
    }
    this.chain.push(next);
    this.bytes += next.byteLength;
    return true;
  }
}

function checkParameters(p: ScalableParameters): void {
  const problems: string[] = [];
  if (!(Number.isInteger(p.initialCapacity) && p.initialCapacity >= 1)) {
    problems.push(`initialCapacity ${p.initialCapacity} (an integer ≥ 1)`);
  }
  if (!(p.fp > 0 && p.fp < 1)) problems.push(`fp ${p.fp} (0 < fp < 1)`);
  if (!(p.tighteningRatio > 0 && p.tighteningRatio < 1)) {
    problems.push(`tighteningRatio ${p.tighteningRatio} (0 < r < 1)`);
  }
  if (!(p.growth >= 1 && p.growth <= 1024)) problems.push(`growth ${p.growth} (1..1024)`);
  if (!(p.fillRatio > 0 && p.fillRatio < 1)) problems.push(`fillRatio ${p.fillRatio} (0..1)`);
  if (!(p.maxBytes > 0)) problems.push(`maxBytes ${p.maxBytes} (> 0)`);
  if (problems.length > 0) throw new BloomError("invalid_parameters", problems.join(", "));
}
