import { BloomError } from "./errors.js";
import { addAllHashed, hashKey, lastHash, testAllHashed, type Key } from "./hash.js";

/** The largest filter, in bits: positions are 32-bit. */
export const MAX_BITS = 2 ** 32 - 32;

/** Parameters that fully describe a classic filter's shape. */
export interface BloomShape {
  /** Number of bits, m. */
  readonly bits: number;
  /** Number of hash positions per key, k. */
  readonly hashes: number;
}

/** A classic filter's memory, shareable with worker threads (structured-clonable). */
export interface SharedBloom extends BloomShape {
  readonly buffer: SharedArrayBuffer;
}

/** Bits for `items` keys at false-positive rate `fp`: m = -n·ln(fp)/ln²2, rounded up to a word. */
export function optimalBits(items: number, fp: number): number {
  checkCapacity(items, fp);
  return roundToWord(Math.ceil((-items * Math.log(fp)) / (Math.LN2 * Math.LN2)));
}

/** Hash count for `bitsPerKey`, as LevelDB: k = bitsPerKey·ln2, truncated, clamped to 1..30. */
export function hashesForBitsPerKey(bitsPerKey: number): number {
  return Math.min(30, Math.max(1, Math.floor(bitsPerKey * Math.LN2)));
}

/**
 * A classic Bloom filter (Bloom 1970): m bits, k positions per key from one xxhash64 by
 * enhanced double hashing. It never answers "absent" for a key that was added.
 *
 * Positions: with a = low and b = high 32 bits of the hash, g0 = a, then g(i) = g(i-1) + b +
 * (i-1)i/2 mod 2^32 (Dillinger & Manolios, "Bloom filters in probabilistic verification",
 * 2004: the cubic term keeps positions distinct when b is small). Each g(i) maps to [0, m)
 * with floor(g·m/2^32) (Lemire's fast range) rather than a modulo; the product is a double
 * and, m being below 2^32, it cannot round up to m.
 */
export class BloomFilter implements BloomShape {
  readonly bits: number;
  readonly hashes: number;
  /** The bit array, 32 bits a word, bit p at words[p >>> 5] bit (p & 31). */
  readonly words: Uint32Array;
  /** m / 2^32, so that a 32-bit hash times scale lands in [0, m). */
  protected readonly scale: number;

  /** A filter of exactly `bits` (rounded up to a multiple of 32) and `hashes`. */
  constructor(shape: BloomShape, words?: Uint32Array) {
    checkShape(shape.bits, shape.hashes);
    this.bits = roundToWord(shape.bits);
    this.hashes = shape.hashes;
    this.words = words ?? new Uint32Array(this.bits / 32);
    if (this.words.length !== this.bits / 32) {
      throw new BloomError("invalid_parameters", `expected ${this.bits / 32} words`);
    }
    this.scale = this.bits / 2 ** 32;
  }

  /** Sized for `items` keys at false-positive rate `fp` (optimal m and the nearest k). */
  static forCapacity(items: number, fp: number): BloomFilter {
    const bits = optimalBits(items, fp);
    const hashes = Math.min(30, Math.max(1, Math.round((bits / items) * Math.LN2)));
    return new BloomFilter({ bits, hashes });
  }

  /** Sized as LevelDB sizes its filters: `bitsPerKey` bits a key, at least 64 bits. */
  static withBitsPerKey(items: number, bitsPerKey: number): BloomFilter {
    if (!(items >= 1 && Number.isFinite(items) && bitsPerKey > 0 && bitsPerKey <= 1024)) {
      throw new BloomError("invalid_parameters", `items ${items}, bits per key ${bitsPerKey}`);
    }
    const bits = Math.max(64, Math.ceil(items * bitsPerKey));
    return new BloomFilter({ bits, hashes: hashesForBitsPerKey(bitsPerKey) });
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
    let x = lastHash[0]!;
    let y = lastHash[1]!;
    const words = this.words;
    let present = true;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      const w = words[bit >>> 5]!;
      const mask = 1 << (bit & 31);
      if ((w & mask) === 0) {
        present = false;
        words[bit >>> 5] = w | mask;
      }
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return present;
  }

  /** Adds every key, hashing them in batches (about twice as fast as one add a key). */
  addMany(keys: readonly Key[]): void {
    addAllHashed(this, keys);
  }

  /** Tests every key in batches: out[i] is 1 when keys[i] may be present, 0 when it is absent. */
  testMany(keys: readonly Key[], out = new Uint8Array(keys.length)): Uint8Array {
    return testAllHashed(this, keys, out);
  }

  /** Sets the k bits of a hash given as two 32-bit halves. */
  addHashed(lo: number, hi: number): void {
    let x = lo;
    let y = hi;
    const words = this.words;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      words[bit >>> 5]! |= 1 << (bit & 31);
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
  }

  /** Tests the k bits of a hash given as two 32-bit halves. */
  testHashed(lo: number, hi: number): boolean {
    let x = lo;
    let y = hi;
    const words = this.words;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      if ((words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return true;
  }

  /** Fraction of bits set (a popcount over the whole filter: O(m), not for hot paths). */
  fillRatio(): number {
    return popcount(this.words) / this.bits;
  }

  /** Estimated number of distinct keys added (Swamidass & Baldi 2007): -(m/k)·ln(1 - X/m). */
  estimatedCount(): number {
    return estimateCount(this.bits, this.hashes, popcount(this.words));
  }

  /** Memory of the bit array in bytes. */
  get byteLength(): number {
    return this.words.byteLength;
  }

  /** Empties the filter. */
  clear(): void {
    this.words.fill(0);
  }

  /**
   * A copy of this filter in a SharedArrayBuffer: send `.shared()` to workers, open it there
   * with {@link SharedBloomFilter.open}, and every thread's adds land in the same memory.
   */
  toShared(): SharedBloomFilter {
    const filter = SharedBloomFilter.create(this);
    filter.words.set(this.words);
    return filter;
  }
}

/**
 * A classic filter whose bits live in a SharedArrayBuffer. Adds use `Atomics.or`, a
 * read-modify-write that cannot lose a concurrent writer's bit (VictoriaMetrics' filter gets
 * the same guarantee from a compare-and-swap loop). Tests read plainly: an aligned 32-bit
 * load cannot tear, and a bit, once set, is never cleared.
 */
export class SharedBloomFilter extends BloomFilter {
  /** An empty shared filter of the given shape. */
  static create(shape: BloomShape): SharedBloomFilter {
    const bits = roundToWord(shape.bits);
    return new SharedBloomFilter(shape, new Uint32Array(new SharedArrayBuffer(bits / 8)));
  }

  /** Opens, in this thread, a filter another thread shared with {@link shared}. */
  static open(shared: SharedBloom): SharedBloomFilter {
    return new SharedBloomFilter(shared, new Uint32Array(shared.buffer));
  }

  /** The structured-clonable description to post to a worker. */
  shared(): SharedBloom {
    return { bits: this.bits, hashes: this.hashes, buffer: this.words.buffer as SharedArrayBuffer };
  }

  override addHashed(lo: number, hi: number): void {
    let x = lo;
    let y = hi;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      Atomics.or(this.words, bit >>> 5, 1 << (bit & 31));
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
  }

  override testAndAdd(key: Key): boolean {
    hashKey(key);
    let x = lastHash[0]!;
    let y = lastHash[1]!;
    let present = true;
    for (let i = 1; i <= this.hashes; i++) {
      const bit = (x * this.scale) >>> 0;
      const mask = 1 << (bit & 31);
      if ((Atomics.or(this.words, bit >>> 5, mask) & mask) === 0) present = false;
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return present;
  }
}

/** Number of set bits in `words` (SWAR popcount, 32 bits at a time). */
export function popcount(words: Uint32Array): number {
  let total = 0;
  for (let i = 0; i < words.length; i++) {
    let v = words[i]!;
    v = v - ((v >>> 1) & 0x55555555);
    v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
    total += Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
  }
  return total;
}

/** Swamidass & Baldi's estimate of distinct keys from m, k and the number of set bits. */
export function estimateCount(bits: number, hashes: number, ones: number): number {
  if (ones === 0) return 0;
  if (ones >= bits) return Infinity;
  return Math.round((-bits / hashes) * Math.log(1 - ones / bits));
}

export function checkCapacity(items: number, fp: number): void {
  if (!(Number.isFinite(items) && items >= 1 && fp > 0 && fp < 1)) {
    throw new BloomError("invalid_parameters", `capacity ${items}, false-positive rate ${fp}`);
  }
}

function checkShape(bits: number, hashes: number): void {
  if (!(Number.isInteger(bits) && bits >= 1 && bits <= MAX_BITS)) {
    throw new BloomError("invalid_parameters", `bits ${bits} (1..${MAX_BITS})`);
  }
  if (!(Number.isInteger(hashes) && hashes >= 1 && hashes <= 30)) {
    throw new BloomError("invalid_parameters", `hashes ${hashes} (1..30)`);
  }
}

function roundToWord(bits: number): number {
  return Math.ceil(bits / 32) * 32;
}
