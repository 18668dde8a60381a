import { chunkKey, type ChunkRef } from "@sieve/chunk";
import { IndexError } from "./errors.js";
import {
  dayOf,
  decodeSegment,
  segmentDayPrefix,
  type BloomLocation,
  type IndexSegment,
  type SegmentChunk,
  type SegmentSeries,
} from "./segment.js";

/** What the index reader needs of an object store: list by prefix and get. */
export interface SegmentStore {
  /** Keys under `prefix`, in any order. */
  list(prefix: string): Promise<readonly string[]>;
  get(key: string): Promise<Uint8Array>;
}

/** A chunk as a querier gets it from the index: its ref, key, and where its bloom is. */
export interface IndexedChunk {
  readonly ref: ChunkRef;
  readonly key: string;
  readonly bytes: number;
  readonly entries: number;
  /** Whether the chunk's prefixed tokens are in its bloom. */
  readonly prefixed: boolean;
  /** UTF-8 bytes of the chunk's lines; absent when its segment predates version 3. */
  readonly lineBytes?: number;
  readonly bloom: BloomLocation;
  /** The segment's own record of the chunk (what a bloom gateway is sent). */
  readonly listed: SegmentChunk;
}

/** A series and its chunks in a time range, merged over segments. */
export interface IndexedSeries {
  readonly fingerprint: bigint;
  readonly labels: string;
  /** Ordered by from, through, checksum; each chunk once. */
  readonly chunks: readonly IndexedChunk[];
}

/** Days a query may span (a bound on listing, not on retention): 400. */
export const DEFAULT_MAX_QUERY_DAYS = 400;

/** The UTC days that [from, through] (ns, inclusive) touches, oldest first. */
export function daysOverlapping(
  from: bigint,
  through: bigint,
  maxDays = DEFAULT_MAX_QUERY_DAYS,
): number[] {
  if (through < from)
    throw new IndexError("invalid_argument", `through ${through} before from ${from}`);
  const first = Math.max(0, dayOf(from));
  const last = dayOf(through);
  if (last - first + 1 > maxDays)
    throw new IndexError("invalid_argument", `${last - first + 1} days (max ${maxDays})`);
  const days: number[] = [];
  for (let day = first; day <= last; day++) days.push(day);
  return days;
}

/** Keys of a tenant's segments for the days [from, through] touches, sorted (oldest first). */
export async function listSegments(
  store: SegmentStore,
  tenant: string,
  from: bigint,
  through: bigint,
  maxDays = DEFAULT_MAX_QUERY_DAYS,
): Promise<string[]> {
  const keys: string[] = [];
  for (const day of daysOverlapping(from, through, maxDays)) {
    const prefix = segmentDayPrefix(tenant, day);
    for (const key of await store.list(prefix)) {
      if (key.startsWith(prefix) && !key.slice(prefix.length).includes("/")) keys.push(key);
    }
  }
  return keys.sort();
}

/**
 * Series → chunk refs over [from, through] from decoded segments of one tenant: chunks
 * outside the range are left out, a chunk listed twice (a chunk across midnight is in both
 * days' segments; a replayed flush writes it again) appears once, preferring a listing whose
 * bloom is in a block. A segment of another tenant is `invalid_argument`.
 */
export function mergeSegments(
  tenant: string,
  segments: readonly IndexSegment[],
  from: bigint,
  through: bigint,
): IndexedSeries[] {
  return mergeIndexed(
    segments.map((segment) => indexSegment(tenant, segment)),
    from,
    through,
  );
}

/**
 * A decoded segment's series with every chunk's {@link IndexedChunk} built, each series
 * once (a segment lists a series once per bloom location), its chunks deduplicated and in
 * order, the series by fingerprint: what a querier caches, so that a query only picks and
 * cuts ({@link mergeIndexed}). A segment of another tenant is `invalid_argument`.
 */
export function indexSegment(tenant: string, segment: IndexSegment): IndexedSeries[] {
  if (segment.tenant !== tenant) {
    throw new IndexError(
      "invalid_argument",
      `a segment of tenant ${JSON.stringify(segment.tenant)}`,
    );
  }
  const listed: IndexedSeries[] = segment.series.map((s) => ({
    fingerprint: s.fingerprint,
    labels: s.labels,
    chunks: s.chunks.map((c) => indexed(tenant, s, c)),
  }));
  // Each series listed once (the usual segment: its series sorted by fingerprint): only
  // its own chunks to order and deduplicate (a segment is indexed whole at its first read).
  for (let i = 1; i < listed.length; i++) {
    if (listed[i]!.fingerprint <= listed[i - 1]!.fingerprint) return regrouped(listed);
  }
  return listed.flatMap((s) =>
    s.chunks.length === 0 ? [] : [{ ...s, chunks: ordered(s.chunks) }],
  );
}

/**
 * A segment's series listed out of order or more than once, each once in fingerprint
 * order: a series' listings merged as {@link mergeIndexed} merges segments.
 */
function regrouped(listed: IndexedSeries[]): IndexedSeries[] {
  // Stable: a series' listings keep their order, which decides between equal chunks.
  listed.sort((a, b) => compare(a.fingerprint, b.fingerprint));
  const out: IndexedSeries[] = [];
  for (let i = 0; i < listed.length;) {
    let j = i + 1;
    while (j < listed.length && listed[j]!.fingerprint === listed[i]!.fingerprint) j++;
    const parts = listed.slice(i, j).map((s) => ({ ...s, chunks: ordered(s.chunks) }));
    const series = mergeSeries(parts, MIN_TS, MAX_TS);
    if (series !== undefined) out.push(series);
    i = j;
  }
  return out;
}

const MIN_TS = -(2n ** 63n);
const MAX_TS = 2n ** 63n - 1n;

/** By from, through, checksum: the order of a series' chunks. */
function byRef(a: IndexedChunk, b: IndexedChunk): number {
  return (
    compare(a.ref.from, b.ref.from) ||
    compare(a.ref.through, b.ref.through) ||
    a.ref.checksum - b.ref.checksum
  );
}

/**
 * One series' chunks in {@link byRef} order, a chunk listed twice once, preferring a
 * listing whose bloom is in a block (as merge keeps them).
 */
function ordered(chunks: readonly IndexedChunk[]): readonly IndexedChunk[] {
  let inOrder = true;
  for (let i = 1; i < chunks.length && inOrder; i++)
    inOrder = byRef(chunks[i - 1]!, chunks[i]!) < 0;
  if (inOrder) return chunks;
  const out: IndexedChunk[] = [];
  for (const c of [...chunks].sort(byRef)) {
    const last = out[out.length - 1];
    if (last === undefined || byRef(last, c) !== 0) out.push(c);
    else if (last.bloom.kind === "missing" && c.bloom.kind === "block") out[out.length - 1] = c;
  }
  return out;
}

/**
 * The series of indexed segments ({@link indexSegment}) over [from, through]: a series of
 * several segments once, a chunk listed twice once (preferring a listing whose bloom is in
 * a block), chunks outside the range left out. The chunk objects are the segments' own,
 * and so is a series whose chunks are all in range and in no other segment.
 *
 * Each segment's series are in ascending fingerprint order, each once, as
 * {@link indexSegment} gives them (or any selection of them, in order): the segments are
 * merged side by side, series by series, never through a map. A query over a day of
 * uncompacted flushes merges dozens of segments; the map per series this replaced was 15%
 * of a needle's CPU on bench:query's 25 segments.
 */
export function mergeIndexed(
  segments: readonly (readonly IndexedSeries[])[],
  from: bigint,
  through: bigint,
): IndexedSeries[] {
  const out: IndexedSeries[] = [];
  const heads = new Array<number>(segments.length).fill(0);
  const parts: IndexedSeries[] = [];
  for (;;) {
    // The next series: the smallest fingerprint at the segments' heads.
    let next: bigint | undefined;
    for (let k = 0; k < segments.length; k++) {
      const s = segments[k]![heads[k]!];
      if (s !== undefined && (next === undefined || s.fingerprint < next)) next = s.fingerprint;
    }
    if (next === undefined) return out;
    parts.length = 0;
    for (let k = 0; k < segments.length; k++) {
      const s = segments[k]![heads[k]!];
      if (s !== undefined && s.fingerprint === next) {
        parts.push(s);
        heads[k]!++;
      }
    }
    const series = mergeSeries(parts, from, through);
    if (series !== undefined) out.push(series);
  }
}

/**
 * One series' listings, in segment order, as one over [from, through]; undefined when it
 * has no chunk there. Each listing's chunks are in order already: only where two listings
 * meet can the order break (or a chunk repeat), and only then are the chunks sorted.
 */
function mergeSeries(
  parts: readonly IndexedSeries[],
  from: bigint,
  through: bigint,
): IndexedSeries | undefined {
  let labels: string | undefined;
  let chunks: IndexedChunk[] | undefined;
  let inOrder = true;
  for (const s of parts) {
    let first = true;
    for (const c of s.chunks) {
      if (c.ref.through < from || c.ref.from > through) continue;
      if (chunks === undefined) {
        labels = s.labels;
        chunks = [];
      } else if (first && inOrder) inOrder = byRef(chunks[chunks.length - 1]!, c) < 0;
      first = false;
      chunks.push(c);
    }
  }
  if (chunks === undefined) return undefined;
  const only = parts.length === 1 ? parts[0]! : undefined;
  if (only !== undefined && chunks.length === only.chunks.length) return only;
  return {
    fingerprint: parts[0]!.fingerprint,
    labels: labels!,
    chunks: inOrder ? chunks : ordered(chunks),
  };
}

function indexed(tenant: string, s: SegmentSeries, c: SegmentChunk): IndexedChunk {
  const ref: ChunkRef = {
    tenant,
    fingerprint: s.fingerprint,
    from: c.from,
    through: c.through,
    checksum: c.checksum,
  };
  return new ListedChunk(ref, s.bloom, c);
}

/**
 * An {@link IndexedChunk} as a class: its key is made when read (a plan keeps every chunk
 * in range, a query fetches a few), on the prototype, so that making one costs 0.04 µs
 * where an object literal with a getter cost 0.8 (a segment of 5,500 chunks is indexed
 * whole at its first read).
 */
class ListedChunk implements IndexedChunk {
  readonly bytes: number;
  readonly entries: number;
  readonly prefixed: boolean;
  readonly lineBytes?: number;
  #key: string | undefined;

  constructor(
    readonly ref: ChunkRef,
    readonly bloom: BloomLocation,
    readonly listed: SegmentChunk,
  ) {
    this.bytes = listed.bytes;
    this.entries = listed.entries;
    this.prefixed = listed.prefixed;
    if (listed.lineBytes !== undefined) this.lineBytes = listed.lineBytes;
  }

  get key(): string {
    return (this.#key ??= chunkKey(this.ref));
  }
}

function compare(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A querier's whole read of the index: list the tenant's segments of the days the range
 * touches, decode each (damage throws an {@link IndexError} naming the key), merge.
 */
export async function readIndex(
  store: SegmentStore,
  tenant: string,
  from: bigint,
  through: bigint,
  maxDays = DEFAULT_MAX_QUERY_DAYS,
): Promise<IndexedSeries[]> {
  const keys = await listSegments(store, tenant, from, through, maxDays);
  const segments: IndexSegment[] = [];
  for (const key of keys) {
    try {
      segments.push(decodeSegment(await store.get(key)));
    } catch (error) {
      if (!(error instanceof IndexError)) throw error;
      const wrapped = new IndexError(error.code, `${key}: ${error.message}`);
      wrapped.cause = error;
      throw wrapped;
    }
  }
  return mergeSegments(tenant, segments, from, through);
}

/**
 * Splits one flush's series into a segment per UTC day their chunks touch: a chunk across
 * midnight goes into both days' segments (the reader keeps it once).
 */
export function segmentsForFlush(tenant: string, series: readonly SegmentSeries[]): IndexSegment[] {
  const byDay = new Map<number, Map<bigint, SegmentSeries>>();
  for (const s of series) {
    for (const c of s.chunks) {
      const first = Math.max(0, dayOf(c.from));
      const last = dayOf(c.through);
      if (last - first >= DEFAULT_MAX_QUERY_DAYS) {
        throw new IndexError("invalid_argument", `a chunk across ${last - first + 1} days`);
      }
      for (let day = first; day <= last; day++) {
        let ofDay = byDay.get(day);
        if (ofDay === undefined) {
          ofDay = new Map<bigint, SegmentSeries>();
          byDay.set(day, ofDay);
        }
        const seen = ofDay.get(s.fingerprint);
        ofDay.set(s.fingerprint, { ...s, chunks: seen === undefined ? [c] : [...seen.chunks, c] });
      }
    }
  }
  return [...byDay.entries()]
    .sort(([a], [b]) => a - b)
    .map(([day, m]) => ({ tenant, day, series: [...m.values()] }));
}
