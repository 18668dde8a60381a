import { hashKey, lastHash } from "@sieve/bloom";

/**
 * The distinct tokens of one chunk as a bloom builder keeps them until flush: each token's
 * UTF-8 bytes in one growing byte array and its xxhash64 (the hash the filters take) in an
 * open-addressing table, instead of a `Set<string>`. A token costs its bytes plus ~24 bytes
 * of table, and no object for the collector to trace: the string sets of 500 streams' heads
 * were most of an ingester's garbage collection. The hash is computed once, when a token is
 * first seen; an exact-size filter and the chunk-prefixed tokens are then made from the
 * stored hashes ({@link forEachHash}).
 *
 * Two tokens are the same when their bytes are: a 64-bit hash collision keeps both.
 */
export class TokenSet {
  /** Slots of three words: hash low, hash high, token index + 1 (0: empty). */
  private slots: Uint32Array;
  private mask: number;
  private count = 0;
  private bytes: Uint8Array;
  private used = 0;
  /** Token i's bytes are [ends[i-1] (0 for i = 0), ends[i]). */
  private ends: Uint32Array;
  /** Once {@link seal}ed: token i's hash halves at [2i, 2i+1], and no table. */
  private hashes: Uint32Array | undefined;

  constructor(capacity = 16) {
    let size = 16;
    while (size < 2 * capacity) size *= 2;
    this.slots = new Uint32Array(3 * size);
    this.mask = size - 1;
    this.bytes = new Uint8Array(16 * capacity);
    this.ends = new Uint32Array(capacity);
  }

  /** Distinct tokens held. */
  get size(): number {
    return this.count;
  }

  /** Bytes held (token bytes, ends and table), for memory accounting. */
  get byteLength(): number {
    return this.slots.byteLength + this.bytes.byteLength + this.ends.byteLength;
  }

  /**
   * Adds the token whose UTF-8 bytes are `key[0, length)`, hashing them; answers false (and
   * leaves {@link lastHash} undefined in meaning) when it is held already. After true,
   * `lastHash` holds the token's hash: a caller filling a filter on arrival reuses it.
   */
  add(key: Uint8Array, length = key.length): boolean {
    const k = length === key.length ? key : key.subarray(0, length);
    hashKey(k);
    return this.addHashed(lastHash[0]!, lastHash[1]!, k);
  }

  /**
   * Drops the table and trims the arrays to what the tokens use: a chunk's set once the
   * chunk is cut is only read (its hashes and bytes), until its bloom is written. Halves
   * what a cut chunk's tokens hold. Adding to a sealed set throws.
   */
  seal(): void {
    if (this.hashes !== undefined) return;
    const hashes = new Uint32Array(2 * this.count);
    const slots = this.slots;
    for (let at = 0; at < slots.length; at += 3) {
      const index = slots[at + 2]!;
      if (index === 0) continue;
      hashes[2 * (index - 1)] = slots[at]!;
      hashes[2 * (index - 1) + 1] = slots[at + 1]!;
    }
    this.hashes = hashes;
    this.slots = new Uint32Array(0);
    this.bytes = this.bytes.slice(0, this.used);
    this.ends = this.ends.slice(0, this.count);
  }

  /** {@link add} for a token already hashed as `lo`/`hi`. */
  addHashed(lo: number, hi: number, key: Uint8Array): boolean {
    if (this.hashes !== undefined) throw new Error("TokenSet: add after seal");
    const slots = this.slots;
    let i = lo & this.mask;
    for (;;) {
      const at = 3 * i;
      const index = slots[at + 2]!;
      if (index === 0) break;
      if (slots[at] === lo >>> 0 && slots[at + 1] === hi >>> 0 && this.equals(index - 1, key)) {
        return false;
      }
      i = (i + 1) & this.mask;
    }
    this.store(key);
    slots[3 * i] = lo;
    slots[3 * i + 1] = hi;
    slots[3 * i + 2] = this.count;
    if (2 * this.count > this.mask + 1) this.rehash();
    return true;
  }

  /** Calls `visit` with each distinct token's hash halves. */
  forEachHash(visit: (lo: number, hi: number) => void): void {
    const hashes = this.hashes;
    if (hashes !== undefined) {
      for (let i = 0; i < hashes.length; i += 2) visit(hashes[i]!, hashes[i + 1]!);
      return;
    }
    const slots = this.slots;
    for (let at = 0; at < slots.length; at += 3) {
      if (slots[at + 2] !== 0) visit(slots[at]!, slots[at + 1]!);
    }
  }

  /** Calls `visit` with each distinct token's hash halves and bytes (a view, valid during the call). */
  forEach(visit: (lo: number, hi: number, bytes: Uint8Array) => void): void {
    const hashes = this.hashes;
    if (hashes !== undefined) {
      let start = 0;
      for (let i = 0; i < this.count; i++) {
        const end = this.ends[i]!;
        visit(hashes[2 * i]!, hashes[2 * i + 1]!, this.bytes.subarray(start, end));
        start = end;
      }
      return;
    }
    const slots = this.slots;
    for (let at = 0; at < slots.length; at += 3) {
      const index = slots[at + 2]!;
      if (index === 0) continue;
      const start = index === 1 ? 0 : this.ends[index - 2]!;
      visit(slots[at]!, slots[at + 1]!, this.bytes.subarray(start, this.ends[index - 1]));
    }
  }

  /** Calls `visit` with each distinct token's bytes (a view, valid during the call), in arrival order. */
  forEachToken(visit: (bytes: Uint8Array) => void): void {
    let start = 0;
    for (let i = 0; i < this.count; i++) {
      const end = this.ends[i]!;
      visit(this.bytes.subarray(start, end));
      start = end;
    }
  }

  private equals(index: number, key: Uint8Array): boolean {
    const start = index === 0 ? 0 : this.ends[index - 1]!;
    const end = this.ends[index]!;
    if (end - start !== key.length) return false;
    const bytes = this.bytes;
    for (let j = 0; j < key.length; j++) if (bytes[start + j] !== key[j]) return false;
    return true;
  }

  /** Appends `key` as token number `count` (then counts it). */
  private store(key: Uint8Array): void {
    if (this.used + key.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(2 * this.bytes.length, this.used + key.length));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.bytes.set(key, this.used);
    this.used += key.length;
    if (this.count === this.ends.length) {
      const grown = new Uint32Array(Math.max(8, 2 * this.ends.length));
      grown.set(this.ends);
      this.ends = grown;
    }
    this.ends[this.count++] = this.used;
  }

  /** Doubles the table: every slot is placed again by its stored hash. */
  private rehash(): void {
    const old = this.slots;
    const size = 2 * (this.mask + 1);
    const slots = new Uint32Array(3 * size);
    const mask = size - 1;
    for (let at = 0; at < old.length; at += 3) {
      if (old[at + 2] === 0) continue;
      let i = old[at]! & mask;
      while (slots[3 * i + 2] !== 0) i = (i + 1) & mask;
      slots[3 * i] = old[at]!;
      slots[3 * i + 1] = old[at + 1]!;
      slots[3 * i + 2] = old[at + 2]!;
    }
    this.slots = slots;
    this.mask = mask;
  }
}
