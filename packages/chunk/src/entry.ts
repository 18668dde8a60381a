import type { Label } from "@sieve/labels";

/**
 * One structured metadata pair of an entry, as Loki's push API carries them: the one
 * `{name, value}` type of `@sieve/labels`, under the name the chunk format gives it.
 */
export type { Label as MetadataPair } from "@sieve/labels";

/** One log entry of a stream. */
export interface Entry {
  /** Unix nanoseconds, a signed 64-bit value. */
  readonly timestamp: bigint;
  /** The log line. */
  readonly line: string;
  /** Structured metadata pairs, in the order they were pushed (may be empty). */
  readonly structuredMetadata: readonly Label[];
}

/**
 * An entry whose line is also at hand as UTF-8 bytes, `source[lineStart, lineEnd)` (the
 * ingester's, read from queue records): a builder copies those bytes and does not read
 * `line`, unless they are not UTF-8: a chunk holds UTF-8 only, so `line` (its U+FFFD) is
 * written then.
 */
export interface EntryWithBytes extends Entry {
  readonly source: Buffer;
  readonly lineStart: number;
  readonly lineEnd: number;
}

/** True when `a` and `b` are exact duplicates: same timestamp, line and metadata, in order. */
export function sameEntry(a: Entry, b: Entry): boolean {
  if (a.timestamp !== b.timestamp || a.line !== b.line) return false;
  const am = a.structuredMetadata;
  const bm = b.structuredMetadata;
  if (am.length !== bm.length) return false;
  for (let i = 0; i < am.length; i++) {
    if (am[i]!.name !== bm[i]!.name || am[i]!.value !== bm[i]!.value) return false;
  }
  return true;
}
