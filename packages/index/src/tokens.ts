/*
 * Tokens that go into a series' bloom, as Loki 3.3+ makes them
 * (pkg/storage/bloom/v1/tokenizer.go, StructuredMetadataTokenizer): for a structured metadata
 * pair name=value on a line of chunk c, the tokens
 *
 *   name   name=value   prefix(c)+name   prefix(c)+name=value
 *
 * The unprefixed pair lets a gateway skip a whole series; the prefixed pair, single chunks.
 *
 * Every filter takes a token as its xxhash64, two 32-bit halves (lo, hi). A chunk's tokens
 * are keyed by the chunk's CRC-32C, c.checksum (blooms whose flags have bit 2 set: every
 * bloom written since it existed): the token's own halves XORed with two words mixed from
 * the checksum,
 *
 *   (lo ^ mix32(checksum ^ 0x9e3779b9), hi ^ mix32(checksum ^ 0x7f4a7c15))
 *
 * (mix32 is murmur3's 32-bit finaliser), so testing a chunk hashes nothing: the gateway
 * hashes each token of a query once and tests every chunk with two XORs. Chunks of one bloom
 * with equal checksums (a 2^-32 chance a pair) share their keys: a false positive, never a
 * false negative.
 *
 * Blooms written before bit 2 prefix a token as Loki's prefixForChunkRef does: 20 bytes,
 * from as a big-endian int64, through as a big-endian int64, checksum as a big-endian uint32
 * (Loki's from and through are milliseconds, Sieve's nanoseconds, so the bytes differ from
 * Loki's for the same chunk), followed by the token's UTF-8 bytes, hashed as bytes. Testing
 * a chunk that way wrote its two bigints and hashed a key per token: on bench:query's data,
 * 858 such chunks a needle, a third of the bloom gateway's time (reading each chunk's
 * bigints was most of it). Readers still test those blooms so.
 */
import { mix32 } from "@sieve/bloom";
import { IndexError } from "./errors.js";

/** What identifies a chunk inside its series: the parts of its `ChunkRef` that prefix tokens. */
export interface ChunkIdentity {
  /** Earliest entry timestamp, ns. */
  readonly from: bigint;
  /** Latest entry timestamp, ns. */
  readonly through: bigint;
  /** CRC-32C of the chunk object. */
  readonly checksum: number;
}

/** One structured metadata pair of an entry: the one `{name, value}` type of `@sieve/labels`. */
export type { Label as MetadataPair } from "@sieve/labels";

/** Line n-grams: `length` code points, starting every `skip + 1` code points (Loki's n and skip). */
export interface NgramOptions {
  readonly length: number;
  readonly skip: number;
}

/**
 * Which structured-metadata tokens a bloom holds: `name` (keys) and `name=value` (values),
 * and how its chunks' tokens are keyed (see the top of this file). Both kinds by default;
 * a bloom without one kind answers "may match" to the tests that need it.
 */
export interface MetadataTokens {
  readonly keys: boolean;
  readonly values: boolean;
  /** Chunk tokens keyed by the chunk's checksum; false or absent: by Loki's 20-byte prefix (older blooms). */
  readonly checksumKeys?: boolean;
}

/** Both kinds, chunk tokens prefixed: every bloom written before either choice existed. */
export const ALL_METADATA_TOKENS: MetadataTokens = { keys: true, values: true };

/**
 * The flags byte of bloom records and index segments: bit 0 no keys, bit 1 no values,
 * bit 2 chunk tokens keyed by checksum.
 */
export function metadataTokenFlags(t: MetadataTokens): number {
  return (t.keys ? 0 : 1) | (t.values ? 0 : 2) | (t.checksumKeys === true ? 4 : 0);
}

/** Each flags byte's meaning, made once: a gateway decodes one a bloom record. */
const BY_FLAGS: readonly MetadataTokens[] = Array.from({ length: 8 }, (_, flags) =>
  flags === 0
    ? ALL_METADATA_TOKENS
    : {
        keys: (flags & 1) === 0,
        values: (flags & 2) === 0,
        ...((flags & 4) !== 0 && { checksumKeys: true }),
      },
);

/** What a flags byte says; undefined when it has a bit nobody defined. */
export function metadataTokensOf(flags: number): MetadataTokens | undefined {
  return BY_FLAGS[flags];
}

/** The word XORed into the low half of a token's hash to key it to a chunk with `checksum`. */
export function chunkKeyLow(checksum: number): number {
  return mix32((checksum ^ 0x9e3779b9) >>> 0);
}

/** The word XORed into the high half of a token's hash to key it to a chunk with `checksum`. */
export function chunkKeyHigh(checksum: number): number {
  return mix32((checksum ^ 0x7f4a7c15) >>> 0);
}

/** Bytes of a chunk prefix: two int64 and a uint32. */
export const CHUNK_PREFIX_BYTES = 20;

/** The 20-byte prefix of `chunk`'s tokens (see the top of this file). */
export function chunkPrefix(chunk: ChunkIdentity): Uint8Array {
  const out = new Uint8Array(CHUNK_PREFIX_BYTES);
  writeChunkPrefix(chunk, out);
  return out;
}

const prefixScratch = new Uint8Array(CHUNK_PREFIX_BYTES);
const prefixView = new DataView(prefixScratch.buffer);

/**
 * Writes `chunk`'s prefix into out[0, 20), through one view made once rather than a view a
 * call (a gateway writes a prefix for every chunk it tests chunk by chunk).
 */
export function writeChunkPrefix(chunk: ChunkIdentity, out: Uint8Array): void {
  prefixView.setBigInt64(0, chunk.from, false);
  prefixView.setBigInt64(8, chunk.through, false);
  prefixView.setUint32(16, chunk.checksum >>> 0, false);
  out.set(prefixScratch);
}

const encoder = new TextEncoder();

/** `prefix` followed by the UTF-8 bytes of `token`: the key a prefixed token is hashed as. */
export function prefixToken(prefix: Uint8Array, token: string): Uint8Array {
  const out = new Uint8Array(prefix.length + token.length * 3);
  out.set(prefix);
  const { written } = encoder.encodeInto(token, out.subarray(prefix.length));
  return out.subarray(0, prefix.length + written);
}

/** The series-level (unprefixed) tokens of a pair: `name` and `name=value`. */
export function seriesTokens(name: string, value: string): [string, string] {
  return [name, `${name}=${value}`];
}

/** The chunk-level tokens of a pair in `chunk`: `name` and `name=value`, prefixed. */
export function chunkTokens(
  chunk: ChunkIdentity,
  name: string,
  value: string,
): [Uint8Array, Uint8Array] {
  const prefix = chunkPrefix(chunk);
  return [prefixToken(prefix, name), prefixToken(prefix, `${name}=${value}`)];
}

/** Checks n-gram options; a bad value is `invalid_argument`. */
export function checkNgramOptions(options: NgramOptions): void {
  const { length, skip } = options;
  if (!(Number.isInteger(length) && length >= 1 && length <= 64)) {
    throw new IndexError("invalid_argument", `n-gram length ${length} (1..64)`);
  }
  if (!(Number.isInteger(skip) && skip >= 0 && skip <= 64)) {
    throw new IndexError("invalid_argument", `n-gram skip ${skip} (0..64)`);
  }
}

/**
 * Calls `visit` with each n-gram of `line`: the `length` code points starting at code point
 * 0, skip+1, 2(skip+1), … while a whole n-gram fits (Loki's ngram tokenizer). Lines without
 * surrogate pairs (nearly all) are cut with `substring`, no per-code-point work.
 */
export function forEachNgram(
  line: string,
  options: NgramOptions,
  visit: (gram: string) => void,
): void {
  const { length, skip } = options;
  const step = skip + 1;
  if (!/[\uD800-\uDFFF]/.test(line)) {
    for (let i = 0; i + length <= line.length; i += step) visit(line.substring(i, i + length));
    return;
  }
  const starts: number[] = [];
  for (let i = 0; i < line.length; i++) {
    starts.push(i);
    const unit = line.charCodeAt(i);
    if (unit >= 0xd800 && unit < 0xdc00 && i + 1 < line.length) {
      const next = line.charCodeAt(i + 1);
      if (next >= 0xdc00 && next < 0xe000) i++;
    }
  }
  starts.push(line.length);
  for (let i = 0; i + length < starts.length; i += step) {
    visit(line.substring(starts[i]!, starts[i + length]));
  }
}

/** A lone surrogate: a UTF-16 unit no code point of its own. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The read side of {@link forEachNgram}: what the tokens of any line holding `literal`
 * include. A line's n-grams start every skip+1 code points from the line's start, and the
 * literal may sit at any code point p, so there is one list per offset o in 0..skip: the
 * n-grams of the literal from its code point o on, every skip+1 (Loki's "or" of offsets).
 * A line holding the literal at p produced every n-gram of the list whose o + p is a
 * multiple of skip+1. The line may match when every n-gram of some list is in its bloom.
 *
 * Undefined, "cannot tell", when a list would be empty (the literal has fewer than length
 * + skip code points), or when the literal holds a lone surrogate: a UTF-16 substring can
 * cut a pair the line's tokenizer kept whole. Without one, the literal's code points are
 * the line's wherever it occurs.
 */
export function literalNgrams(literal: string, options: NgramOptions): string[][] | undefined {
  const { length, skip } = options;
  if (LONE_SURROGATE.test(literal)) return undefined;
  const points = Array.from(literal);
  if (points.length < length + skip) return undefined;
  const lists: string[][] = [];
  let rest = literal;
  for (let o = 0; o <= skip; o++) {
    const list: string[] = [];
    forEachNgram(rest, options, (gram) => list.push(gram));
    lists.push(list);
    rest = rest.slice(points[o]!.length);
  }
  return lists;
}

/** The n-grams of `line`, in order (see {@link forEachNgram}). */
export function lineNgrams(line: string, options: NgramOptions): string[] {
  checkNgramOptions(options);
  const out: string[] = [];
  forEachNgram(line, options, (gram) => out.push(gram));
  return out;
}
