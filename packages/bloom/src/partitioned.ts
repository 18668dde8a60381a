import { checkCapacity, estimateCount, popcount } from "./classic.js";
import { BloomError } from "./errors.js";
import { addAllHashed, hashKey, lastHash, testAllHashed, type Key } from "./hash.js";

/** Parameters that fully describe a partitioned filter's shape. */
export interface PartitionedShape {
  /** Number of slices, k: one position per slice. */
  readonly hashes: number;
  /** Bits per slice, s (a multiple of 32, so that slices start on a word). */
  readonly sliceBits: number;
}

/** The largest partitioned filter, in bits (k·s), as for the classic filter. */
const MAX_TOTAL_BITS = 2 ** 32 - 32;

/**
 * A partitioned Bloom filter: k equal slices of s bits, and each key sets exactly one bit in
 * each slice (Almeida et al., "Scalable Bloom Filters", 2007, section 3, the design Loki
 * uses from BoomFilters). Positions come from one xxhash64 by enhanced double hashing, as
 * in {@link BloomFilter}.
 *
 * The number of set bits is kept as keys are added (a bit is read before it is written
 * anyway), so {@link fillRatio} is O(1): the scalable filter asks it after every add.
 */
export class PartitionedBloomFilter implements PartitionedShape {
  readonly hashes: number;
  readonly sliceBits: number;
  /** All slices, back to back: slice i is bits [i·s, (i+1)·s). */
  readonly words: Uint32Array;
  private readonly scale: number;
  private readonly sliceWords: number;
  private setBits: number;

  /** An empty filter of the given shape, or one over existing `words` (deserialisation). */
  constructor(shape: PartitionedShape, words?: Uint32Array) {
    const { hashes, sliceBits } = shape;
    if (!(Number.isInteger(hashes) && hashes >= 1 && hashes <= 30)) {
      throw new BloomError("invalid_parameters", `hashes ${hashes} (1..30)`);
    }
    if (!(Number.isInteger(sliceBits) && sliceBits >= 32 && sliceBits % 32 === 0)) {
      throw new BloomError("invalid_parameters", `slice bits ${sliceBits} (a multiple of 32)`);
    }
    if (hashes * sliceBits > MAX_TOTAL_BITS) {
      throw new BloomError("invalid_parameters", `${hashes * sliceBits} bits is too large`);
    }
    this.hashes = hashes;
    this.sliceBits = sliceBits;
    this.sliceWords = sliceBits / 32;
    this.scale = sliceBits / 2 ** 32;
    this.words = words ?? new Uint32Array(this.sliceWords * hashes);
    if (this.words.length !== this.sliceWords * hashes) {
      throw new BloomError("invalid_parameters", `expected ${this.sliceWords * hashes} words`);
    }
    this.setBits = words === undefined ? 0 : popcount(this.words);
  }

  /**
   * Sized for `items` keys at false-positive rate `fp`, as BoomFilters sizes it: m =
   * -n·ln(fp)/ln²2 bits in k = ceil(log2(1/fp)) slices. Each slice is then half full at or
   * before `items` keys, when the rate is 0.5^k ≤ fp.
   *
   * With `fillRatio` f, k = ceil(ln fp / ln f) instead, so that the rate is still ≤ fp
   * when the slices are f full: that is the point where a scalable filter stops adding.
   */
  static forCapacity(items: number, fp: number, fillRatio = 0.5): PartitionedBloomFilter {
    checkCapacity(items, fp);
    if (!(fillRatio > 0 && fillRatio < 1)) {
      throw new BloomError("invalid_parameters", `fill ratio ${fillRatio} (0..1)`);
    }
    const hashes = Math.max(1, Math.ceil(Math.log(fp) / Math.log(fillRatio)));
    if (hashes > 30) {
      throw new BloomError(
        "invalid_parameters",
        `rate ${fp} at fill ${fillRatio} needs ${hashes} slices (max 30)`,
      );
    }
    const bits = (-items * Math.log(fp)) / (Math.LN2 * Math.LN2);
    const sliceBits = Math.max(32, Math.ceil(bits / hashes / 32) * 32);
    return new PartitionedBloomFilter({ hashes, sliceBits });
  }

  /** Total bits, k·s. */
  get bits(): number {
    return this.hashes * this.sliceBits;
  }

  /** Adds `key`. */
  add(key: Key): void {
    hashKey(key);
    this.addHashed(lastHash[0]!, lastHash[1]!);
  }

  /** Whether `key` may have been added: false means certainly not. */
  test(key: Key): boolean {
    hashKey(key);
    return this.testHashed(lastHash[0]!, lastHash[1]!);
  }

  /** Adds `key`, answering whether it may have been present before. */
  testAndAdd(key: Key): boolean {
    hashKey(key);
    return this.testAndAddHashed(lastHash[0]!, lastHash[1]!);
  }

  /** Adds every key, hashing them in batches (about twice as fast as one add a key). */
  addMany(keys: readonly Key[]): void {
    addAllHashed(this, keys);
  }

  /** Tests every key in batches: out[i] is 1 when keys[i] may be present, 0 when it is absent. */
  testMany(keys: readonly Key[], out = new Uint8Array(keys.length)): Uint8Array {
    return testAllHashed(this, keys, out);
  }

  /** Sets one bit per slice for a hash given as two 32-bit halves. */
  addHashed(lo: number, hi: number): void {
    this.testAndAddHashed(lo, hi);
  }

  /** Sets one bit per slice, answering whether all of them were set already. */
  testAndAddHashed(lo: number, hi: number): boolean {
    let x = lo;
    let y = hi;
    const words = this.words;
    let base = 0;
    let added = 0;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      const index = base + (bit >>> 5);
      const w = words[index]!;
      const mask = 1 << (bit & 31);
      if ((w & mask) === 0) {
        words[index] = w | mask;
        added++;
      }
      base += this.sliceWords;
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    this.setBits += added;
    return added === 0;
  }

  /** Tests one bit per slice for a hash given as two 32-bit halves. */
  testHashed(lo: number, hi: number): boolean {
    let x = lo;
    let y = hi;
    const words = this.words;
    let base = 0;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      if ((words[base + (bit >>> 5)]! & (1 << (bit & 31))) === 0) return false;
      base += this.sliceWords;
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return true;
  }

  /** Fraction of bits set, averaged over the slices; O(1). */
  fillRatio(): number {
    return this.setBits / this.bits;
  }

  /** Estimated distinct keys: each slice is a one-hash filter of s bits. */
  estimatedCount(): number {
    return estimateCount(this.bits, this.hashes, this.setBits);
  }

  /** False-positive rate at the current fill: the product of the slices' fill ratios. */
  estimatedFalsePositiveRate(): number {
    let rate = 1;
    for (let i = 0; i < this.hashes; i++) {
      const slice = this.words.subarray(i * this.sliceWords, (i + 1) * this.sliceWords);
      rate *= popcount(slice) / this.sliceBits;
    }
    return rate;
  }

  /** Memory of the bit array in bytes. */
  get byteLength(): number {
    return this.words.byteLength;
  }
}
