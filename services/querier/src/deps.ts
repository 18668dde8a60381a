/**
 * What the querier needs of its neighbours. The two internal APIs, the ingesters'
 * unflushed data (`IngesterQuerier`) and the bloom gateway's pruning (`ChunkFilter`), are
 * defined once in `@sieve/proto`, which both sides import; the querier receives
 * implementations in its constructor (`@sieve/ingester`'s `Ingester` or
 * `IngesterHttpClient`, `@sieve/bloom-gateway`'s `BloomGateway` or `BloomGatewayClient`).
 * Here: the querier's own narrow view of the object store, and the stand-ins it uses when
 * it has no gateway or no ingesters.
 */
import type { SegmentChunk } from "@sieve/index";
import type { ChunkFilter, IngesterQuerier } from "@sieve/proto";
import type { ObjectStore } from "@sieve/storage";
import { memoryMayHold } from "@sieve/kit";
import { QueryError } from "./errors.js";

/** What the querier needs of the object store: chunks and index segments. */
export type QuerierStore = Pick<ObjectStore, "get" | "getRange" | "getTail" | "list">;

/**
 * A filter that keeps every ref: the honest answer when blooms are turned off (and what
 * the querier behaves like when a gateway fails open on everything).
 */
export const KEEP_ALL_FILTER: ChunkFilter = {
  filterChunkRefs(req) {
    let chunks = 0;
    const bySeries = new Map<bigint, SegmentChunk[]>();
    for (const s of req.series) {
      chunks += s.chunks.length;
      const kept = bySeries.get(s.fingerprint);
      if (kept === undefined) bySeries.set(s.fingerprint, [...s.chunks]);
      else kept.push(...s.chunks);
    }
    return Promise.resolve({
      series: [...bySeries].map(([fingerprint, kept]) => ({ fingerprint, chunks: kept })),
      stats: {
        series: req.series.length,
        seriesSkipped: 0,
        chunks,
        chunksPruned: 0,
        chunksPrunedByLine: 0,
        blocksRead: 0,
        cacheHits: 0,
        failedOpen: {},
      },
    });
  },
};

/** An ingester set with no data: for a querier over the store alone. */
export const NO_INGESTERS: IngesterQuerier = {
  query: () => Promise.resolve([]),
  series: () => Promise.resolve([]),
  volume: () => Promise.resolve([]),
  stats: () => Promise.resolve({ streams: 0, chunks: 0, bytes: 0, entries: 0 }),
  patterns: () => Promise.resolve([]),
  querySample: () => Promise.resolve([]),
};

/**
 * `ingesters` that in-process ingesters' watermarks (kit's `MemoryWatermark`, `memory`)
 * spare a call whose range none of them can hold: its empty answer is made here, without
 * the hop to every ingest worker and back (~0.15 ms of a needle over flushed data). The
 * querier has parsed the request already, so nothing the ingesters would refuse is
 * answered empty. Patterns outlive the heads: always asked.
 */
export function skipIdleIngesters(
  ingesters: IngesterQuerier,
  memory: SharedArrayBuffer,
): IngesterQuerier {
  // Ranges end inclusive for some calls: one nanosecond more is asked either way.
  const idle = (req: { readonly end: bigint }): boolean => !memoryMayHold(memory, req.end + 1n);
  return {
    query: (req, options) => (idle(req) ? Promise.resolve([]) : ingesters.query(req, options)),
    series: (req, options) => (idle(req) ? Promise.resolve([]) : ingesters.series(req, options)),
    volume: (req, options) => (idle(req) ? Promise.resolve([]) : ingesters.volume(req, options)),
    stats: (req, options) =>
      idle(req) ? NO_INGESTERS.stats(req, options) : ingesters.stats(req, options),
    patterns: (req, options) => ingesters.patterns(req, options),
    querySample: (req, options) =>
      idle(req) ? Promise.resolve([]) : ingesters.querySample(req, options),
  };
}

/**
 * The ingesters as a query sees them: a refusal of theirs that is the query's fault (a 4xx
 * but 499, e.g. past a LogQL bound or `maxBytes` while running its pipeline) is a 400 in
 * their words, as the worker's port already makes it (query-worker.ts); anything else
 * stays Sieve's (a 500).
 */
export function ingesterRefusalsAs400(ingesters: IngesterQuerier): IngesterQuerier {
  const refusal = (error: unknown): never => {
    const status = (error as { status?: unknown } | undefined)?.status;
    if (
      !(error instanceof QueryError) &&
      typeof status === "number" &&
      status >= 400 &&
      status < 499
    ) {
      throw new QueryError("bad_request", (error as Error).message);
    }
    throw error;
  };
  return {
    query: (req, options) => ingesters.query(req, options).catch(refusal),
    series: (req, options) => ingesters.series(req, options).catch(refusal),
    volume: (req, options) => ingesters.volume(req, options).catch(refusal),
    stats: (req, options) => ingesters.stats(req, options).catch(refusal),
    patterns: (req, options) => ingesters.patterns(req, options).catch(refusal),
    querySample: (req, options) => ingesters.querySample(req, options).catch(refusal),
  };
}
