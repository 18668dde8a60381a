/**
 * A small seeded PRNG for the fuzzers: every request is generated from its own generator,
 * seeded by (run seed, request index), so one failing request is replayed from those two
 * numbers alone, without replaying the requests before it.
 */

/** A deterministic random source (mulberry32: 32-bit state, good enough to pick cases). */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** The generator of request `index` of a run seeded with `seed`. */
  static forCase(seed: number, index: number): Rng {
    // splitmix-style mixing so neighbouring indexes start far apart.
    let h = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(index, 0xc2b2ae35)) >>> 0;
    h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
    h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
    return new Rng(h ^ (h >>> 16));
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One key of `weights`, each drawn in proportion to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    let r = this.next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, weight] of entries) {
      r -= weight;
      if (r < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /** `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = Math.floor(this.next() * 256);
    return out;
  }
}

/** Characters that matter to LogQL, JSON and URLs, plus awkward Unicode, for mutations. */
const NASTY = [
  ...Array.from("{}[]()|\"'`\\=~!,<>:.*+?^$#%&/ \t\n\r0123456789"),
  "\u0000",
  "\u007f",
  "\u00e9",
  "\u200b",
  "\ufeff",
  "\ud800",
  "\udfff",
  "\u{1f600}",
];

/** A random string of `length` characters, mostly from {@link NASTY}, some arbitrary code units. */
export function nastyString(rng: Rng, length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) {
    out += rng.chance(0.8) ? rng.pick(NASTY) : String.fromCharCode(rng.int(0, 0xffff));
  }
  return out;
}

/**
 * Mutates text the way a careless client or a fuzzer would: deletes, duplicates, inserts,
 * replaces or swaps a span, or truncates; `rounds` edits in a row.
 */
export function mutateText(rng: Rng, text: string, rounds = 1): string {
  let s = text;
  for (let round = 0; round < rounds; round++) {
    const at = rng.int(0, s.length);
    const span = rng.int(1, Math.max(1, Math.min(12, s.length - at)));
    switch (rng.pick(["delete", "duplicate", "insert", "replace", "truncate", "swap"] as const)) {
      case "delete":
        s = s.slice(0, at) + s.slice(at + span);
        break;
      case "duplicate":
        s = s.slice(0, at + span) + s.slice(at, at + span) + s.slice(at + span);
        break;
      case "insert":
        s = s.slice(0, at) + nastyString(rng, rng.int(1, 4)) + s.slice(at);
        break;
      case "replace":
        s = s.slice(0, at) + nastyString(rng, span) + s.slice(at + span);
        break;
      case "truncate":
        s = s.slice(0, at);
        break;
      case "swap": {
        const other = rng.int(0, s.length);
        const [a, b] = at < other ? [at, other] : [other, at];
        s = s.slice(0, a) + s.slice(b, b + span) + s.slice(a + span, b) + s.slice(a, a + span);
        break;
      }
    }
  }
  return s;
}

/** Flips, drops, inserts or truncates bytes of a binary body (protobuf, snappy, gzip). */
export function mutateBytes(rng: Rng, input: Uint8Array, rounds = 1): Uint8Array {
  let bytes = Uint8Array.from(input);
  for (let round = 0; round < rounds; round++) {
    const at = rng.int(0, Math.max(0, bytes.length - 1));
    switch (rng.pick(["flip", "drop", "insert", "truncate"] as const)) {
      case "flip":
        if (bytes.length > 0) bytes[at] = bytes[at]! ^ (1 << rng.int(0, 7));
        break;
      case "drop":
        bytes = Uint8Array.from([...bytes.subarray(0, at), ...bytes.subarray(at + 1)]);
        break;
      case "insert":
        bytes = Uint8Array.from([
          ...bytes.subarray(0, at),
          ...rng.bytes(rng.int(1, 8)),
          ...bytes.subarray(at),
        ]);
        break;
      case "truncate":
        bytes = bytes.slice(0, at);
        break;
    }
  }
  return bytes;
}
