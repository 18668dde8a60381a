/**
 * A query's view of the index: the day segments its range touches, listed and read through
 * the querier's caches, merged (the merge cached too), and the series its selectors match
 * with their chunks in range.
 *
 * It fails soft: a segment that cannot be decoded, or a series whose labels do not parse,
 * is left out (logged and counted by the read report, labels.ts) and the rest answers. A store
 * that is down or does not answer by its deadline fails the query at once with 503.
 */
import {
  IndexError,
  decodeSegment,
  listSegments,
  indexSegment,
  mergeIndexed,
  type IndexSegment,
  type IndexedSeries,
} from "@sieve/index";
import { matchesLabels, type Matcher } from "@sieve/logql";
import { STORAGE_ERRORS, isNotFound, isStoreFailure } from "@sieve/storage";
import type { LoadedSegment, QuerierParts, QueryContext, Selection } from "./context.js";
import { QueryError } from "./errors.js";

/** Listings of the index one query may retry when listed segments are gone (compacted). */
const MAX_RELISTS = 5;

/**
 * `error` as a query answers it: a store failure (down, frozen past its deadline, erroring)
 * is a 503 `store_unavailable` naming the store; anything else is unchanged.
 */
export function storeError(error: unknown): unknown {
  if (!isStoreFailure(error)) return error;
  const prefix = `${STORAGE_ERRORS.backend}: `;
  const detail = error.message.startsWith(prefix)
    ? error.message.slice(prefix.length)
    : error.message;
  const answer = new QueryError("store_unavailable", `object store unavailable: ${detail}`);
  answer.cause = error;
  return answer;
}

/** A listed segment that was deleted before it was read (compacted away since the listing). */
class SegmentGone extends Error {}

/**
 * The segment at `key`, without the series whose labels do not parse; empty when it
 * cannot be decoded. Each left-out part is reported; store failures are thrown as
 * {@link storeError}; a segment gone since the listing throws {@link SegmentGone} (not
 * cached: the caller lists the day again). A damaged segment stays damaged, so its empty
 * stand-in is cached like any segment and it is read once.
 */
async function loadSegment(
  parts: QuerierParts,
  tenant: string,
  key: string,
): Promise<LoadedSegment> {
  let bytes: Uint8Array;
  try {
    bytes = await parts.store.get(key);
  } catch (error) {
    if (!isNotFound(error)) throw storeError(error);
    throw new SegmentGone(key);
  }
  let segment: IndexSegment;
  try {
    segment = decodeSegment(bytes);
    if (segment.tenant !== tenant) {
      throw new IndexError("corrupt", `a segment of tenant ${JSON.stringify(segment.tenant)}`);
    }
  } catch (error) {
    if (!(error instanceof IndexError)) throw error;
    parts.labels.report.unreadableSegment(key, error);
    return { series: [], labels: [], bytes: bytes.byteLength };
  }
  const where = `segment ${key}`;
  const series: IndexedSeries[] = [];
  const labels: Readonly<Record<string, string>>[] = [];
  for (const s of indexSegment(tenant, segment)) {
    const parsed = parts.labels.tryOf(s.labels, where);
    if (parsed === undefined) continue;
    series.push(s);
    labels.push(parsed);
  }
  return { series, labels, bytes: bytes.byteLength };
}

/**
 * The segment at `key` from the cache, read and decoded once (see {@link loadSegment});
 * undefined when it was deleted since it was listed.
 */
export async function cachedSegment(
  parts: QuerierParts,
  tenant: string,
  key: string,
): Promise<LoadedSegment | undefined> {
  try {
    return (await parts.segments.get(key, () => loadSegment(parts, tenant, key))).value;
  } catch (error) {
    if (error instanceof SegmentGone) return undefined;
    throw error;
  }
}

/**
 * The keys of the tenant's segments of the days [from, through] touches, through the
 * querier's listings cache (listings.ts); `options.signal` cancels the store's calls, and is
 * read only when the store is called (a query's `signalOnUse()`).
 */
export function listedSegments(
  parts: QuerierParts,
  tenant: string,
  from: bigint,
  through: bigint,
  options?: { readonly signal?: AbortSignal | undefined },
): Promise<string[]> {
  const store = {
    list: (prefix: string) =>
      parts.listings.list(prefix, () => parts.store.list(prefix, { signal: options?.signal })),
    get: (key: string) => parts.store.get(key, { signal: options?.signal }),
  };
  return listSegments(store, tenant, from, through);
}

/** The series positions of `segment` by label name and value, made once. */
function postingsOf(segment: LoadedSegment): Map<string, Map<string, number[]>> {
  if (segment.postings !== undefined) return segment.postings;
  const postings = new Map<string, Map<string, number[]>>();
  segment.labels.forEach((labels, i) => {
    for (const [name, value] of Object.entries(labels)) {
      let values = postings.get(name);
      if (values === undefined) postings.set(name, (values = new Map<string, number[]>()));
      const list = values.get(value);
      if (list === undefined) values.set(value, [i]);
      else list.push(i);
    }
  });
  return (segment.postings = postings);
}

const NO_POSITIONS: readonly number[] = [];

/**
 * The positions of the series of `segment` some selector may match: for each selector the
 * shortest list of its `name="value"` matchers (a label equal to a non-empty value), in
 * order; undefined when a selector has none (every series must be tested).
 */
function candidates(
  segment: LoadedSegment,
  selectors: readonly (readonly Matcher[])[],
): readonly number[] | undefined {
  const lists: (readonly number[])[] = [];
  for (const matchers of selectors) {
    let shortest: readonly number[] | undefined;
    for (const m of matchers) {
      if (m.op !== "=" || m.value === "") continue;
      const list = postingsOf(segment).get(m.name)?.get(m.value) ?? NO_POSITIONS;
      if (shortest === undefined || list.length < shortest.length) shortest = list;
    }
    if (shortest === undefined) return undefined;
    lists.push(shortest);
  }
  if (lists.length === 1) return lists[0];
  return [...new Set(lists.flat())].sort((a, b) => a - b);
}

/**
 * The series of `segment` some of `selectors` matches, in segment order: tested from the
 * series an equality matcher names when each selector has one, else every series.
 */
export function seriesMatching(
  segment: LoadedSegment,
  selectors: readonly (readonly Matcher[])[],
): readonly IndexedSeries[] {
  const { series, labels } = segment;
  // Loops, not a closure a series: a needle over 25 segments tested 2,500 series.
  const out: IndexedSeries[] = [];
  const wanted = (i: number): void => {
    for (const matchers of selectors) {
      if (matchesLabels(matchers, labels[i]!)) {
        out.push(series[i]!);
        return;
      }
    }
  };
  const some = candidates(segment, selectors);
  if (some === undefined) for (let i = 0; i < series.length; i++) wanted(i);
  else for (const i of some) wanted(i);
  return out;
}

/** Every time an index holds: [first, last] ns. */
const ALL_TIME: readonly [bigint, bigint] = [-(2n ** 63n), 2n ** 63n - 1n];

/** Selections a segment keeps (distinct selectors asked of it) before it forgets them all. */
const MAX_SELECTIONS = 64;

/**
 * {@link seriesMatching}, kept on the segment with the span of the series' chunks, by the
 * selectors' text: a dashboard asks the same selectors of the same segments again and
 * again, and a wide needle spent a tenth of its time selecting and cutting 250 series
 * anew. Each selection holds no more than the segment's own series list.
 */
function selection(segment: LoadedSegment, selectors: readonly (readonly Matcher[])[]): Selection {
  let key = "";
  for (const matchers of selectors) {
    for (const m of matchers) key += `${m.name}\0${m.op}\0${m.value}\0`;
    key += "\n";
  }
  const kept = (segment.selections ??= new Map<string, Selection>()).get(key);
  if (kept !== undefined) return kept;
  const series = seriesMatching(segment, selectors);
  // From the widest span's far ends inwards.
  let [through, from] = ALL_TIME;
  for (const s of series) {
    for (const c of s.chunks) {
      if (c.ref.from < from) from = c.ref.from;
      if (c.ref.through > through) through = c.ref.through;
    }
  }
  if (segment.selections.size >= MAX_SELECTIONS) segment.selections.clear();
  const made = { series, from, through };
  segment.selections.set(key, made);
  return made;
}

/**
 * The series of `segment` (some of `selectors` matches, when given) with their chunks in
 * [from, through]: when the range holds every chunk of the selection, the selection's own
 * array (what `mergeIndexed` would answer, chunk by chunk), the same for every such query:
 * the planner and the bloom gateway keep what they make from it by its identity.
 */
function inRange(
  segment: LoadedSegment,
  from: bigint,
  through: bigint,
  selectors?: readonly (readonly Matcher[])[],
): readonly IndexedSeries[] {
  if (selectors === undefined) return mergeIndexed([segment.series], from, through);
  const chosen = selection(segment, selectors);
  if (from <= chosen.from && through >= chosen.through) return chosen.series;
  return mergeIndexed([chosen.series], from, through);
}

/**
 * The tenant's series and chunks over [from, through] (inclusive), from cached segments
 * and their cached merge: every series has labels that parse (see {@link loadSegment});
 * only those some of `selectors` matches when given, from the series an equality matcher
 * names when each selector has one.
 */
export async function readSeries(
  parts: QuerierParts,
  tenant: string,
  from: bigint,
  through: bigint,
  ctx: QueryContext,
  selectors?: readonly (readonly Matcher[])[],
): Promise<readonly IndexedSeries[]> {
  return ctx.stats.time("index", async () => {
    const list = async (): Promise<string[]> => {
      try {
        // The listing is this query's own (not a shared cache load): its deadline cancels it.
        return await ctx.race(listedSegments(parts, tenant, from, through, ctx.signalOnUse()));
      } catch (error) {
        if (error instanceof IndexError && error.code === "invalid_argument") {
          throw new QueryError("bad_request", error.message);
        }
        throw storeError(error);
      }
    };
    // A segment deleted between the listing and its read was merged away by the compactor,
    // which writes the merged segment before deleting: listed again, the day shows it.
    let keys = await list();
    for (let attempt = 0; ; attempt++) {
      let view: LoadedSegment;
      try {
        view = await ctx.race(indexView(parts, tenant, keys));
      } catch (error) {
        if (!(error instanceof SegmentGone)) throw error;
        if (attempt === MAX_RELISTS) {
          throw new QueryError("store_unavailable", "index segments kept disappearing: retry");
        }
        keys = await list();
        continue;
      }
      ctx.stats.segmentsRead += keys.length;
      return withoutExpired(parts, tenant, inRange(view, from, through, selectors));
    }
  });
}

/**
 * The segments at `keys` as one: a lone segment itself, several merged (every series
 * once, over all time), each from the segment cache. The merge is cached beside them,
 * under the keys joined (segments never change, so the same keys name the same merge), and
 * weighs what it holds, its segments' objects too: once made, its segments are not read
 * again and leave the cache in their turn. A query over a day of uncompacted flushes
 * merges dozens of segments, and every query over that day merged them again: on
 * bench:query's 25 it was a sixth of a needle's CPU. Throws {@link SegmentGone}.
 */
async function indexView(
  parts: QuerierParts,
  tenant: string,
  keys: readonly string[],
): Promise<LoadedSegment> {
  const segment = async (key: string): Promise<LoadedSegment> => {
    const value = await cachedSegment(parts, tenant, key);
    if (value === undefined) throw new SegmentGone(key);
    return value;
  };
  if (keys.length === 0) return { series: [], labels: [], bytes: 0 };
  if (keys.length === 1) return segment(keys[0]!);
  const merge = async (): Promise<LoadedSegment> => {
    const segments = await Promise.all(keys.map(segment));
    const series = mergeIndexed(
      segments.map((s) => s.series),
      ...ALL_TIME,
    );
    const labels = series.map((s) => parts.labels.tryOf(s.labels, "merged segments")!);
    let bytes = 0;
    for (const s of segments) bytes += s.bytes;
    return { series, labels, bytes };
  };
  return (await parts.segments.get(`${tenant}\0${keys.join("\0")}`, merge)).value;
}

/**
 * `series` without the chunks whose last line has passed its stream's retention (and
 * without the series left with none): what the index will hold once the compactor has
 * run, so that series, labels, stats and volume answer the same before and after.
 */
function withoutExpired(
  parts: QuerierParts,
  tenant: string,
  series: readonly IndexedSeries[],
): readonly IndexedSeries[] {
  const retention = parts.retention.of(tenant);
  if (!retention.expires) return series;
  const nowMs = Date.now();
  const out: IndexedSeries[] = [];
  for (const s of series) {
    const labels = parts.labels.tryOf(s.labels, "store");
    const cutoff = labels === undefined ? undefined : retention.cutoffNs(labels, nowMs);
    if (cutoff === undefined) {
      out.push(s);
      continue;
    }
    const chunks = s.chunks.filter((c) => c.ref.through >= cutoff);
    if (chunks.length > 0) out.push(chunks.length === s.chunks.length ? s : { ...s, chunks });
  }
  return out;
}
