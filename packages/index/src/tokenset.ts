import { hashKey, lastHash } from "@sieve/bloom";

/**
 * The distinct tokens of one chunk as a bloom builder keeps them until flush: each token's
 * xxhash64 (the hash the filters take) in an open-addressing table, instead of a
 * `Set<string>`. A token costs 12 bytes of table and no object for the collector to trace:
 * the string sets of 500 streams' heads were most of an ingester's garbage collection. A
 * token is hashed once, when added; an exact-size filter and the chunk-prefixed tokens are
 * then made from the stored hashes ({@link forEachHash}).
 *
 * Tokens are told apart by their 64-bit hash alone: a filter sees nothing else, so two
 * tokens whose hashes collide are one key to it either way. (Until chunk tokens were keyed
 * by checksum the set kept each token's bytes too, to prefix them at flush.)
 */
export class TokenSet {
  /** Slots of three words: hash low, hash high, token index + 1 (0: empty). */
  private slots: Uint32Array;
  private mask: number;
  private count = 0;
  /** Once {@link seal}ed: token i's hash halves at [2i, 2i+1], and no table. */
  private hashes: Uint32Array | undefined;

  constructor(capacity = 16) {
    let size = 16;
    while (size < 2 * capacity) size *= 2;
    this.slots = new Uint32Array(3 * size);
    this.mask = size - 1;
  }

  /** Distinct tokens held. */
  get size(): number {
    return this.count;
  }

  /** Bytes held (the table, or the sealed hashes), for memory accounting. */
  get byteLength(): number {
    return this.slots.byteLength + (this.hashes?.byteLength ?? 0);
  }

  /**
   * Adds the token whose UTF-8 bytes are `key[0, length)`, hashing them; answers false (and
   * leaves {@link lastHash} undefined in meaning) when it is held already. After true,
   * `lastHash` holds the token's hash: a caller filling a filter on arrival reuses it.
   */
  add(key: Uint8Array, length = key.length): boolean {
    hashKey(length === key.length ? key : key.subarray(0, length));
    return this.addHashed(lastHash[0]!, lastHash[1]!);
  }

  /**
   * Drops the table for the hashes alone, in arrival order: a chunk's set once the chunk is
   * cut is only read, until its bloom is written. A third of what the table held. Adding to
   * a sealed set throws.
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
  }

  /** {@link add} for a token already hashed as `lo`/`hi`. */
  addHashed(lo: number, hi: number): boolean {
    if (this.hashes !== undefined) throw new Error("TokenSet: add after seal");
    const slots = this.slots;
    let i = lo & this.mask;
    for (;;) {
      const at = 3 * i;
      if (slots[at + 2] === 0) break;
      if (slots[at] === lo >>> 0 && slots[at + 1] === hi >>> 0) return false;
      i = (i + 1) & this.mask;
    }
    slots[3 * i] = lo;
    slots[3 * i + 1] = hi;
    slots[3 * i + 2] = ++this.count;
    if (2 * this.count > this.mask + 1) this.rehash();
    return true;
  }

  /** Calls `visit` with each distinct token's hash halves (in arrival order once sealed). */
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
