/**
 * The plan of a query: index (segments cached) → series matching the selectors → chunk
 * refs in range → pruned by the bloom gateway when the query has a bloom test.
 *
 * It fails soft: a segment that cannot be decoded, or a series whose labels do not parse,
 * is left out (logged and counted by the {@link ReadReport}) and the rest answers; a
 * bloom gateway that fails keeps every ref (invariant 1), logged and counted by reason. A
 * store that is down or does not answer by its deadline fails the query at once with 503.
 */
import {
  IndexError,
  decodeSegment,
  listSegments,
  mergeSegments,
  type IndexSegment,
  type IndexedChunk,
  type IndexedSeries,
  type SegmentChunk,
} from "@sieve/index";
import { matchesLabels, withoutLineTests, type BloomTest, type Matcher } from "@sieve/logql";
import { STORAGE_ERRORS, isNotFound, isStoreFailure } from "@sieve/storage";
import type { QuerierParts, QueryContext } from "./context.js";
import type { FilterResponse, FilterSeries } from "@sieve/proto";
import { QueryError, maxChunks } from "./errors.js";
import type { ReadReport } from "./labels.js";

/** A chunk the plan will read, with its series. */
export interface PlannedChunk {
  readonly chunk: IndexedChunk;
  readonly labels: Readonly<Record<string, string>>;
}

function bloomGroup(c: IndexedChunk): string {
  return c.bloom.kind === "block"
    ? `b\u0000${c.bloom.key}\u0000${c.bloom.offset}`
    : `m\u0000${c.bloom.reason}`;
}

/** Whether the chunk's bloom holds line n-grams (its index entry says). */
function lined(c: IndexedChunk): boolean {
  return c.bloom.kind === "block" && c.bloom.ngrams !== undefined;
}

function chunkId(fp: bigint, c: { from: bigint; through: bigint; checksum: number }): string {
  return `${fp}:${c.from}:${c.through}:${c.checksum}`;
}

function segmentChunk(c: IndexedChunk): SegmentChunk {
  return {
    from: c.ref.from,
    through: c.ref.through,
    checksum: c.ref.checksum,
    bytes: c.bytes,
    entries: c.entries,
    prefixed: c.prefixed,
  };
}

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

/**
 * The segment at `key`, without the series whose labels do not parse; empty when it
 * cannot be decoded or is gone (compacted away since the listing). Each left-out part is
 * reported; store failures are thrown as {@link storeError}. A damaged segment stays
 * damaged, so its empty stand-in is cached like any segment and it is read once.
 */
async function loadSegment(
  parts: QuerierParts,
  tenant: string,
  key: string,
): Promise<{ segment: IndexSegment; bytes: number }> {
  let bytes: Uint8Array;
  try {
    bytes = await parts.store.get(key);
  } catch (error) {
    if (!isNotFound(error)) throw storeError(error);
    parts.labels.report.unreadableSegment(key, error);
    return { segment: { tenant, day: 0, series: [] }, bytes: 0 };
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
    return { segment: { tenant, day: 0, series: [] }, bytes: bytes.byteLength };
  }
  const where = `segment ${key}`;
  const readable = segment.series.filter((s) => parts.labels.tryOf(s.labels, where) !== undefined);
  if (readable.length < segment.series.length) segment = { ...segment, series: readable };
  return { segment, bytes: bytes.byteLength };
}

/**
 * The tenant's series and chunks over [from, through] (inclusive), from cached segments:
 * every series has labels that parse (see {@link loadSegment}); only those `wanted`
 * accepts when given, chosen before the segments are merged (the merge builds every
 * chunk's ref: for a one-service query over 500 series it was most of the index stage).
 */
export async function readSeries(
  parts: QuerierParts,
  tenant: string,
  from: bigint,
  through: bigint,
  ctx: QueryContext,
  wanted?: (labels: Readonly<Record<string, string>>) => boolean,
): Promise<IndexedSeries[]> {
  return ctx.stats.time("index", async () => {
    let keys: string[];
    try {
      // The listing is this query's own (not a shared cache load): its deadline cancels it.
      const { signal } = ctx;
      const store = {
        list: (prefix: string) => parts.store.list(prefix, { signal }),
        get: (key: string) => parts.store.get(key, { signal }),
      };
      keys = await ctx.race(listSegments(store, tenant, from, through));
    } catch (error) {
      if (error instanceof IndexError && error.code === "invalid_argument") {
        throw new QueryError("bad_request", error.message);
      }
      throw storeError(error);
    }
    const segments = await ctx.race(
      Promise.all(
        keys.map(async (key) => {
          const { value } = await parts.segments.get(key, () => loadSegment(parts, tenant, key));
          return value.segment;
        }),
      ),
    );
    ctx.stats.segmentsRead += segments.length;
    const chosen =
      wanted === undefined
        ? segments
        : segments.map((segment) => ({
            ...segment,
            series: segment.series.filter((s) => {
              const labels = parts.labels.tryOf(s.labels, "store");
              return labels !== undefined && wanted(labels);
            }),
          }));
    return mergeSegments(tenant, chosen, from, through);
  });
}

/**
 * The fail-open reason of an error thrown by the bloom step (the gateway's reason names):
 * `timeout` when it ran out of time, `gateway_error` for anything else the call threw.
 */
function failOpenReason(error: unknown): string {
  return error instanceof Error && error.name === "TimeoutError" ? "timeout" : "gateway_error";
}

/** Reports a failed bloom step: `chunks` refs kept untested. */
function reportFailOpen(
  report: ReadReport,
  tenant: string,
  chunks: number,
  error: unknown,
): Record<string, number> {
  const reason = failOpenReason(error);
  report.failedOpen(reason, chunks, tenant, error);
  return { [reason]: chunks };
}

/**
 * Index → series matching any of `selectors` → chunks in [from, through] → pruned by the
 * gateway when the query has a bloom test. Refuses more chunks than `maxChunksPerQuery`.
 */
export async function plan(
  parts: QuerierParts,
  tenant: string,
  selectors: readonly (readonly Matcher[])[],
  from: bigint,
  through: bigint,
  queryTest: BloomTest,
  ctx: QueryContext,
): Promise<PlannedChunk[]> {
  const matches = (labels: Readonly<Record<string, string>>): boolean =>
    selectors.some((m) => matchesLabels(m, labels));
  const all = await readSeries(parts, tenant, from, through, ctx, matches);
  const matched: { series: IndexedSeries; labels: Readonly<Record<string, string>> }[] = [];
  let inRange = 0;
  for (const s of all) {
    const labels = parts.labels.tryOf(s.labels, "store");
    if (labels === undefined) continue;
    matched.push({ series: s, labels });
    inRange += s.chunks.length;
  }
  const stats = ctx.stats;
  stats.seriesMatched = matched.length;
  stats.chunksInRange = inRange;
  parts.metrics?.chunksInRange.inc(inRange);
  const max = ctx.limits.maxChunksPerQuery;
  if (max > 0 && inRange > max) throw maxChunks(max, inRange);
  // Line leaves test the n-grams a bloom holds: over series none of whose blooms have them
  // (the index says which), only the metadata part can prune, and a chunk whose bloom has
  // none is not sent when the metadata part is nothing (a plain `|= "x"`).
  const metadataOnly = withoutLineTests(queryTest);
  const test =
    metadataOnly !== queryTest && matched.some(({ series }) => series.chunks.some(lined))
      ? queryTest
      : metadataOnly;
  if (test.kind === "all" || inRange === 0) {
    return matched.flatMap(({ series, labels }) =>
      series.chunks.map((chunk) => ({ chunk, labels })),
    );
  }
  stats.bloomsUsed = true;
  const groups = new Map<string, FilterSeries & { chunks: SegmentChunk[] }>();
  const kept = new Set<string>();
  let sent = 0;
  for (const { series } of matched) {
    for (const c of series.chunks) {
      if (metadataOnly.kind === "all" && !lined(c)) {
        kept.add(chunkId(series.fingerprint, c.ref));
        continue;
      }
      sent++;
      const key = `${series.fingerprint}\u0000${bloomGroup(c)}`;
      let g = groups.get(key);
      if (g === undefined) {
        g = {
          fingerprint: series.fingerprint,
          labels: series.labels,
          bloom: c.bloom,
          chunks: [],
        };
        groups.set(key, g);
      }
      g.chunks.push(segmentChunk(c));
    }
  }
  let response: FilterResponse;
  try {
    response = await stats.time("blooms", () =>
      ctx.race(
        parts.chunkFilter.filterChunkRefs({
          tenant,
          from,
          through,
          test,
          series: [...groups.values()],
        }),
      ),
    );
  } catch (error) {
    if (error instanceof QueryError) throw error; // the query's own deadline
    // Invariant 1: a gateway that fails means "may match", never "no match".
    stats.bloom = {
      series: groups.size,
      seriesSkipped: 0,
      chunks: sent,
      chunksPruned: 0,
      chunksPrunedByLine: 0,
      blocksRead: 0,
      cacheHits: 0,
      failedOpen: reportFailOpen(parts.labels.report, tenant, sent, error),
    };
    return matched.flatMap(({ series, labels }) =>
      series.chunks.map((chunk) => ({ chunk, labels })),
    );
  }
  stats.bloom = response.stats;
  for (const [reason, chunks] of Object.entries(response.stats.failedOpen)) {
    parts.labels.report.failedOpen(reason, chunks, tenant);
  }
  for (const s of response.series) for (const c of s.chunks) kept.add(chunkId(s.fingerprint, c));
  const out: PlannedChunk[] = [];
  for (const { series, labels } of matched) {
    for (const chunk of series.chunks) {
      if (kept.has(chunkId(series.fingerprint, chunk.ref))) out.push({ chunk, labels });
    }
  }
  stats.chunksPrunedByBlooms = inRange - out.length;
  parts.metrics?.chunksPruned.inc(inRange - out.length);
  return out;
}
