import { BloomError } from "./errors.js";
import { hashKey, lastHash, mix32, type Key } from "./hash.js";

/** Parameters that fully describe a ribbon filter's shape. */
export interface RibbonShape {
  /** Solution slots, m (at least {@link RIBBON_WIDTH}, a multiple of 8). */
  readonly slots: number;
  /** Fingerprint bits a key, r (1..16): the false-positive rate is 2^-r. */
  readonly bits: number;
  /** What the key's hash is mixed with; a failed construction retries with another. */
  readonly seed: number;
}

/** The lowest false-positive rate a ribbon filter is built for: 16 fingerprint bits. */
export const RIBBON_MIN_RATE = 2 ** -16;
/** Coefficient bits a key, w: each key's equation spans 64 consecutive slots. */
export const RIBBON_WIDTH = 64;
/** The largest filter, in slots (2^28 slots of 16 bits is 512 MiB). */
const MAX_SLOTS = 2 ** 28;
/** Seeds tried at one size before the size grows. */
const SEEDS_PER_SIZE = 3;
/** Attempts in all before a construction gives up (never seen: each size is likelier). */
const MAX_ATTEMPTS = 48;

/**
 * Slots per key, 1 + ε, for `count` keys. Measured here with w = 64 and random keys (seeds
 * tried after a failure, on average): at ε = 0.05, 0.07 retries at 5,000 keys, 0.18 at
 * 10,000, 0.45 at 20,000 and (ε 0.062) 50,000, for 7.35 bits a key at r = 7; at ε = 0.08,
 * 7.56 bits and almost no retries; at ε = 0.04, a retry at 20,000 keys. A retry costs one
 * more elimination (0.6 ms for 5,000 keys). The band needs more room as it grows (ε ∝
 * log n / w, Dillinger and Walzer, section 4), so ε grows a little past 20,000 keys.
 */
function overhead(count: number): number {
  return count <= 20_000 ? 0.05 : 0.05 + 0.03 * Math.log10(count / 20_000);
}

/**
 * A standard ribbon filter (Dillinger and Walzer, "Ribbon filter: practically smaller than
 * Bloom and Xor", 2021): a static filter built once from all its keys. Each key is an
 * equation over GF(2): its hash picks a start slot s, a 64-bit coefficient row c (bit 0
 * set) and an r-bit fingerprint f, and the filter stores r-bit values Z with
 * XOR{ Z[s+j] : bit j of c } = f for every key. Construction solves the banded system by
 * Gaussian elimination (each key inserted in O(w) expected row operations) and back
 * substitution; a lookup XORs the slots its row selects and compares with its fingerprint,
 * which a key that was not added matches with probability 2^-r.
 *
 * At r bits it takes about 1.05·r bits a key where a Bloom filter with the same rate takes
 * 1.44·r: for Sieve's fp 0.01 (r = 7, a rate of 0.78%), 7.4 bits a key instead of 9.6.
 * Written here because no npm package builds one from precomputed hashes (the filters
 * here hash each token once, with xxhash64, and keep the halves); the rows are two 32-bit
 * halves because JavaScript has no cheap 64-bit integers.
 */
export class RibbonFilter implements RibbonShape {
  readonly slots: number;
  readonly bits: number;
  readonly seed: number;
  /**
   * Z as serialised, bit-sliced: r columns of m/8 bytes, column j holding bit j of every
   * slot's value (slot i at bit i mod 8 of the column's byte i/8). A lookup reads its 64
   * slots' bits of one column at a time and stops at the first that disagrees with its
   * fingerprint: an absent key reads two columns on average, not the ~32 values its row
   * selects (a test with hashing went from 162 to 113 ns, a Bloom filter's 92). Read as it
   * is, so a filter read from a block needs no unpacking.
   */
  readonly values: Uint8Array;
  /**
   * `values`, read in place: a filter deserialised from a block copies nothing. A window
   * reads a ninth byte only when its start is not a multiple of 8, and then (start ≤
   * slots − 64) that byte is still in its column: no read passes the values, and the view
   * ends with them so that one would throw.
   */
  private readonly view: DataView;

  /** A filter over solved, packed `values` (built by {@link fromHashes} or deserialised). */
  constructor(shape: RibbonShape, values: Uint8Array) {
    const { slots, bits, seed } = shape;
    if (!(Number.isInteger(slots) && slots >= RIBBON_WIDTH && slots <= MAX_SLOTS)) {
      throw new BloomError("invalid_parameters", `slots ${slots} (${RIBBON_WIDTH}..${MAX_SLOTS})`);
    }
    if (!(Number.isInteger(bits) && bits >= 1 && bits <= 16)) {
      throw new BloomError("invalid_parameters", `fingerprint bits ${bits} (1..16)`);
    }
    if (!(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32)) {
      throw new BloomError("invalid_parameters", `seed ${seed}`);
    }
    if (slots % 8 !== 0) throw new BloomError("invalid_parameters", `slots ${slots} (× 8)`);
    const length = (slots / 8) * bits;
    if (values.length !== length) {
      throw new BloomError("invalid_parameters", `${values.length} bytes for ${slots} slots`);
    }
    this.slots = slots;
    this.bits = bits;
    this.seed = seed;
    this.values = values;
    this.view = new DataView(values.buffer, values.byteOffset, length);
  }

  /** Fingerprint bits for a rate of at most `fp`: ceil(log2(1/fp)), at most 16. */
  static bitsFor(fp: number): number {
    if (!(fp > 0 && fp < 1)) throw new BloomError("invalid_parameters", `rate ${fp} (0..1)`);
    const bits = Math.max(1, Math.ceil(-Math.log2(fp) - 1e-9));
    if (bits > 16) throw new BloomError("invalid_parameters", `rate ${fp} needs ${bits} bits (16)`);
    return bits;
  }

  /** The bytes {@link fromHashes} will most likely take for `count` keys at `fp`, values only. */
  static bytesFor(count: number, fp: number): number {
    return (slotsFor(count, overhead(count)) / 8) * RibbonFilter.bitsFor(fp);
  }

  /**
   * The filter of the keys whose xxhash64 halves are `lo[i]`, `hi[i]` for i < count, at a
   * rate of at most `fp` (see {@link bitsFor}). Equal hashes are one key. Throws
   * `invalid_parameters` when the filter would pass {@link MAX_SLOTS}.
   */
  static fromHashes(lo: Uint32Array, hi: Uint32Array, count: number, fp: number): RibbonFilter {
    const bits = RibbonFilter.bitsFor(fp);
    if (!(Number.isInteger(count) && count >= 0 && count <= lo.length && count <= hi.length)) {
      throw new BloomError("invalid_parameters", `count ${count}`);
    }
    let epsilon = overhead(count);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (attempt > 0 && attempt % SEEDS_PER_SIZE === 0) epsilon += 0.04;
      const slots = slotsFor(count, epsilon);
      if (slots > MAX_SLOTS) {
        throw new BloomError("invalid_parameters", `${count} keys need ${slots} slots`);
      }
      const values = solve(lo, hi, count, { slots, bits, seed: attempt });
      if (values !== undefined) {
        return new RibbonFilter({ slots, bits, seed: attempt }, columns(values, bits));
      }
    }
    throw new BloomError("invalid_parameters", `no solution for ${count} keys`);
  }

  /** The filter of `keys` (hashed here) at a rate of at most `fp`. */
  static fromKeys(keys: readonly Key[], fp: number): RibbonFilter {
    const lo = new Uint32Array(keys.length);
    const hi = new Uint32Array(keys.length);
    keys.forEach((key, i) => {
      hashKey(key);
      lo[i] = lastHash[0]!;
      hi[i] = lastHash[1]!;
    });
    return RibbonFilter.fromHashes(lo, hi, keys.length, fp);
  }

  /** Whether `key` may have been added: false means certainly not. */
  test(key: Key): boolean {
    hashKey(key);
    return this.testHashed(lastHash[0]!, lastHash[1]!);
  }

  /** {@link test} for a hash given as two 32-bit halves. */
  testHashed(lo: number, hi: number): boolean {
    return ribbonLookup(this.view, 0, this.slots, this.bits, this.seed, lo, hi);
  }

  /** The rate at which a key that was not added passes: 2^-r. */
  estimatedFalsePositiveRate(): number {
    return 2 ** -this.bits;
  }

  /** Bytes of the values as serialised: r bits a slot. */
  get byteLength(): number {
    return this.values.length;
  }
}

/**
 * {@link RibbonFilter.testHashed} of the filter of shape (`slots`, `bits`, `seed`) whose
 * values start at byte `offset` of `view`: for a caller that keeps many filters' shapes in
 * flat arrays and reads their values where they lie (the bloom gateway's tables), without
 * going through each filter's object to its values.
 */
export function ribbonLookup(
  view: DataView,
  offset: number,
  slots: number,
  bits: number,
  seed: number,
  lo: number,
  hi: number,
): boolean {
  const columnBytes = slots >>> 3;
  const start = startOf(lo, seed, slots - RIBBON_WIDTH + 1);
  const cl = rowLow(lo, hi, seed);
  const ch = rowHigh(lo, hi, seed);
  const f = fingerprintOf(lo, hi, seed);
  const shift = start & 7;
  let at = offset + (start >>> 3);
  for (let j = 0; j < bits; j++, at += columnBytes) {
    // The column's bits of slots [start, start + 64), as two 32-bit halves.
    const a = view.getUint32(at, true);
    const b = view.getUint32(at + 4, true);
    let w0 = a;
    let w1 = b;
    if (shift !== 0) {
      w0 = (a >>> shift) | (b << (32 - shift));
      w1 = (b >>> shift) | (view.getUint8(at + 8) << (32 - shift));
    }
    let x = (w0 & cl) ^ (w1 & ch);
    x ^= x >>> 16;
    x ^= x >>> 8;
    x ^= x >>> 4;
    if (((0x6996 >>> (x & 0xf)) & 1) !== ((f >>> j) & 1)) return false;
  }
  return true;
}

/** Slots for `count` keys with `epsilon` spare: at least {@link RIBBON_WIDTH}, a multiple of 8. */
function slotsFor(count: number, epsilon: number): number {
  return Math.max(RIBBON_WIDTH, Math.ceil((count * (1 + epsilon)) / 8) * 8);
}

/** `values`, `bits` bits each, bit-sliced into columns (the serialised layout). */
function columns(values: Uint8Array | Uint16Array, bits: number): Uint8Array {
  const columnBytes = values.length / 8;
  const out = new Uint8Array(columnBytes * bits);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    const bit = 1 << (i & 7);
    for (let j = 0, at = i >>> 3; j < bits; j++, at += columnBytes) {
      if ((v >>> j) & 1) out[at] = out[at]! | bit;
    }
  }
  return out;
}

/**
 * Z for the keys, or undefined when this seed's equations are inconsistent (two keys whose
 * rows reduce to the same row with different fingerprints: try another seed or size).
 */
function solve(
  lo: Uint32Array,
  hi: Uint32Array,
  count: number,
  shape: RibbonShape,
): Uint8Array | Uint16Array | undefined {
  const { slots, bits, seed } = shape;
  const span = slots - RIBBON_WIDTH + 1;
  const mask = 2 ** bits - 1;
  // Row i of the band, normalised so that its bit 0 (column i) is set; 0 when empty.
  const rowLo = new Int32Array(slots);
  const rowHi = new Int32Array(slots);
  const rhs = new Uint16Array(slots);
  for (let k = 0; k < count; k++) {
    const a = lo[k]!;
    const b = hi[k]!;
    let i = startOf(a, seed, span);
    let cl = rowLow(a, b, seed);
    let ch = rowHigh(a, b, seed);
    let f = fingerprintOf(a, b, seed) & mask;
    for (;;) {
      const rl = rowLo[i]!;
      const rh = rowHi[i]!;
      if (rl === 0 && rh === 0) {
        rowLo[i] = cl;
        rowHi[i] = ch;
        rhs[i] = f;
        break;
      }
      cl ^= rl;
      ch ^= rh;
      f ^= rhs[i]!;
      if (cl === 0 && ch === 0) {
        if (f === 0) break; // the same equation again: an equal hash
        return undefined;
      }
      // Shift the row right to its lowest set bit; it moves down the band by as much.
      let shift: number;
      if (cl !== 0) {
        shift = 31 - Math.clz32(cl & -cl);
        if (shift !== 0) {
          cl = (cl >>> shift) | (ch << (32 - shift));
          ch = ch >>> shift;
        }
      } else {
        shift = 63 - Math.clz32(ch & -ch);
        cl = ch >>> (shift - 32);
        ch = 0;
      }
      i += shift;
    }
  }
  const z = bits <= 8 ? new Uint8Array(slots) : new Uint16Array(slots);
  for (let i = slots - 1; i >= 0; i--) {
    const rl = rowLo[i]!;
    const rh = rowHi[i]!;
    if (rl === 0 && rh === 0) {
      // A free slot: any value solves; a mixed one keeps lookups of absent keys uniform.
      z[i] = mix32(i ^ seed ^ 0x2545f491) & mask;
      continue;
    }
    let acc = rhs[i]!;
    let x = rl & ~1;
    while (x !== 0) {
      const t = x & -x;
      acc ^= z[i + 31 - Math.clz32(t)]!;
      x ^= t;
    }
    x = rh;
    while (x !== 0) {
      const t = x & -x;
      acc ^= z[i + 63 - Math.clz32(t)]!;
      x ^= t;
    }
    z[i] = acc;
  }
  return z;
}

/** The key's start slot in [0, span): a multiply-shift of its mixed low half. */
function startOf(lo: number, seed: number, span: number): number {
  return Math.floor((mix32(lo ^ seed) * span) / 4294967296);
}

/** Bits 0..31 of the key's row; bit 0 is always set. */
function rowLow(lo: number, hi: number, seed: number): number {
  return mix32(hi ^ Math.imul(seed, 0x9e3779b9)) | 1;
}

/** Bits 32..63 of the key's row. */
function rowHigh(lo: number, hi: number, seed: number): number {
  return mix32(hi ^ lo ^ 0x7f4a7c15 ^ seed) | 0;
}

/** The key's fingerprint, before masking to r bits. */
function fingerprintOf(lo: number, hi: number, seed: number): number {
  return mix32((lo + Math.imul(hi, 0x27d4eb2f) + seed) | 0);
}
