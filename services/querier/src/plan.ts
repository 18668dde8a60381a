/**
 * The plan of a query: index (segments cached) → series matching the selectors → chunk
 * refs in range → pruned by the bloom gateway when the query has a bloom test.
 */
import {
  IndexError,
  decodeSegment,
  listSegments,
  mergeSegments,
  type IndexedChunk,
  type IndexedSeries,
  type SegmentChunk,
} from "@sieve/index";
import { matchesLabels, type BloomTest, type Matcher } from "@sieve/logql";
import type { QuerierParts, QueryContext } from "./context.js";
import type { FilterResponse, FilterSeries } from "./deps.js";
import { QueryError, maxChunks } from "./errors.js";

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

/** The tenant's series and chunks over [from, through] (inclusive), from cached segments. */
export async function readSeries(
  parts: QuerierParts,
  tenant: string,
  from: bigint,
  through: bigint,
  ctx: QueryContext,
): Promise<IndexedSeries[]> {
  return ctx.stats.time("index", async () => {
    let keys: string[];
    try {
      keys = await ctx.race(listSegments(parts.store, tenant, from, through));
    } catch (error) {
      if (error instanceof IndexError && error.code === "invalid_argument") {
        throw new QueryError("bad_request", error.message);
      }
      throw error;
    }
    const segments = await ctx.race(
      Promise.all(
        keys.map(async (key) => {
          const { value } = await parts.segments.get(key, async () => {
            const bytes = await parts.store.get(key);
            try {
              return { segment: decodeSegment(bytes), bytes: bytes.byteLength };
            } catch (error) {
              if (error instanceof IndexError) {
                const wrapped = new IndexError(error.code, `${key}: ${error.message}`);
                wrapped.cause = error;
                throw wrapped;
              }
              throw error;
            }
          });
          return value.segment;
        }),
      ),
    );
    ctx.stats.segmentsRead += segments.length;
    return mergeSegments(tenant, segments, from, through);
  });
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
  test: BloomTest,
  ctx: QueryContext,
): Promise<PlannedChunk[]> {
  const all = await readSeries(parts, tenant, from, through, ctx);
  const matched: { series: IndexedSeries; labels: Readonly<Record<string, string>> }[] = [];
  let inRange = 0;
  for (const s of all) {
    const labels = parts.labels.of(s.labels);
    if (!selectors.some((m) => matchesLabels(m, labels))) continue;
    matched.push({ series: s, labels });
    inRange += s.chunks.length;
  }
  const stats = ctx.stats;
  stats.seriesMatched = matched.length;
  stats.chunksInRange = inRange;
  parts.metrics?.chunksInRange.inc(inRange);
  const max = ctx.limits.maxChunksPerQuery;
  if (max > 0 && inRange > max) throw maxChunks(max, inRange);
  if (test.kind === "all" || inRange === 0) {
    return matched.flatMap(({ series, labels }) =>
      series.chunks.map((chunk) => ({ chunk, labels })),
    );
  }
  stats.bloomsUsed = true;
  const groups = new Map<string, FilterSeries>();
  for (const { series } of matched) {
    for (const c of series.chunks) {
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
      chunks: inRange,
      chunksPruned: 0,
      blocksRead: 0,
      cacheHits: 0,
      failedOpen: { gateway_error: inRange },
    };
    return matched.flatMap(({ series, labels }) =>
      series.chunks.map((chunk) => ({ chunk, labels })),
    );
  }
  stats.bloom = response.stats;
  const kept = new Set<string>();
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
