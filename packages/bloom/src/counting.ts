import { checkCapacity, optimalBits } from "./classic.js";
import { BloomError } from "./errors.js";
import { hashKey, lastHash, type Key } from "./hash.js";

/** A counter stuck at this value has overflowed: it is never incremented or decremented. */
export const SATURATED = 15;

/** Parameters that fully describe a counting filter's shape. */
export interface CountingShape {
  /** Number of 4-bit counters, m (even: two to a byte). */
  readonly counters: number;
  /** Number of counters per key, k. */
  readonly hashes: number;
}

/**
 * A counting Bloom filter (Fan et al., "Summary Cache", 2000): m 4-bit counters, two to a
 * byte (low nibble first), so keys can be removed. Positions as in {@link BloomFilter}.
 *
 * Counters saturate at 15 and then stay there: a decrement of a counter that overflowed
 * could bring it to zero while keys that set it remain, a false negative. The price is
 * that a saturated counter never clears; with k at the optimum a counter reaches 15 with
 * probability about 1e-15 a position (Fan et al., section V.C).
 */
export class CountingBloomFilter implements CountingShape {
  readonly counters: number;
  readonly hashes: number;
  /** Two counters a byte: counter c is the low nibble of byte c/2 when c is even. */
  readonly nibbles: Uint8Array;
  private readonly scale: number;

  /** An empty filter of the given shape, or one over existing counters (deserialisation). */
  constructor(shape: CountingShape, nibbles?: Uint8Array) {
    const { counters, hashes } = shape;
    if (!(
      Number.isInteger(counters) &&
      counters >= 2 &&
      counters % 2 === 0 &&
      counters < 2 ** 32
    )) {
      throw new BloomError("invalid_parameters", `counters ${counters} (even, 2..2^32)`);
    }
    if (!(Number.isInteger(hashes) && hashes >= 1 && hashes <= 30)) {
      throw new BloomError("invalid_parameters", `hashes ${hashes} (1..30)`);
    }
    this.counters = counters;
    this.hashes = hashes;
    this.nibbles = nibbles ?? new Uint8Array(counters / 2);
    if (this.nibbles.length !== counters / 2) {
      throw new BloomError("invalid_parameters", `expected ${counters / 2} bytes of counters`);
    }
    this.scale = counters / 2 ** 32;
  }

  /** Sized for `items` keys at false-positive rate `fp`: as many counters as a classic filter has bits. */
  static forCapacity(items: number, fp: number): CountingBloomFilter {
    checkCapacity(items, fp);
    const counters = optimalBits(items, fp);
    const hashes = Math.min(30, Math.max(1, Math.round((counters / items) * Math.LN2)));
    return new CountingBloomFilter({ counters, hashes });
  }

  /** Adds `key` (again, if it was added before: removal then needs as many removes). */
  add(key: Key): void {
    hashKey(key);
    let x = lastHash[0]!;
    let y = lastHash[1]!;
    const nibbles = this.nibbles;
    for (let i = 1; i <= this.hashes; i++) {
      const c = (x * this.scale) >>> 0;
      const shift = (c & 1) << 2;
      const byte = nibbles[c >>> 1]!;
      if (((byte >>> shift) & 0xf) !== SATURATED) nibbles[c >>> 1] = byte + (1 << shift);
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
  }

  /** Whether `key` may be present: false means certainly not. */
  test(key: Key): boolean {
    hashKey(key);
    return this.testHashed(lastHash[0]!, lastHash[1]!);
  }

  /** {@link test} for a hash given as two 32-bit halves. */
  testHashed(lo: number, hi: number): boolean {
    let x = lo;
    let y = hi;
    for (let i = 1; i <= this.hashes; i++) {
      const c = (x * this.scale) >>> 0;
      if (((this.nibbles[c >>> 1]! >>> ((c & 1) << 2)) & 0xf) === 0) return false;
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return true;
  }

  /**
   * Removes one earlier add of `key`. Answers false, changing nothing, when the key is
   * certainly absent. Removing a key that was never added (but tests present by a false
   * positive) can remove other keys: only remove what you added.
   */
  remove(key: Key): boolean {
    if (!this.test(key)) return false;
    let x = lastHash[0]!;
    let y = lastHash[1]!;
    const nibbles = this.nibbles;
    for (let i = 1; i <= this.hashes; i++) {
      const c = (x * this.scale) >>> 0;
      const shift = (c & 1) << 2;
      const byte = nibbles[c >>> 1]!;
      const counter = (byte >>> shift) & 0xf;
      // test() saw every counter above zero; a repeated position may reach zero here.
      if (counter !== SATURATED && counter !== 0) nibbles[c >>> 1] = byte - (1 << shift);
      x = (x + y) >>> 0;
      y = (y + i) >>> 0;
    }
    return true;
  }

  /** The counter at `index`, for inspection and tests. */
  counterAt(index: number): number {
    return (this.nibbles[index >>> 1]! >>> ((index & 1) << 2)) & 0xf;
  }

  /** Memory of the counters in bytes. */
  get byteLength(): number {
    return this.nibbles.byteLength;
  }
}
