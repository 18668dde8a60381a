/**
 * The narrow interfaces the querier needs of its neighbours, in the shapes the lead fixed
 * (/tmp/contracts.md): the ingesters' unflushed data and the bloom gateway's pruning. The
 * querier receives implementations in its constructor: `@sieve/ingester`'s in-process
 * querier or `IngesterHttpClient`, `@sieve/bloom-gateway`'s `BloomGateway` or
 * `BloomGatewayClient`. Declaring them here keeps the querier free of those packages.
 */
import type { BloomLocation, SegmentChunk } from "@sieve/index";
import type { BloomTest } from "@sieve/logql";
import type { ObjectStore } from "@sieve/storage";

/** A query of the ingesters' recent data. Times are Unix ns; [start, end). */
export interface IngesterQueryRequest {
  tenant: string;
  /** A LogQL stream selector, e.g. `{app="api", env=~"p.*"}`. */
  selector: string;
  start: bigint;
  end: bigint;
  direction: "forward" | "backward";
  /** Max entries per stream in `direction`; 0 = no limit (metric queries). */
  limit: number;
  /**
   * The whole log query (`{…} | pipeline`): the ingester keeps only the entries its
   * pipeline keeps before applying `limit`, as Loki's ingesters do. Entries come back raw.
   */
  query?: string;
}

/** One stream of an ingester's answer; entries sorted in the request's direction. */
export interface IngesterStream {
  /** Canonical label string. */
  labels: string;
  fingerprint: bigint;
  entries: { timestamp: bigint; line: string; structuredMetadata: Record<string, string> }[];
}

/** A series listing of the ingesters' recent data. */
export interface IngesterSeriesRequest {
  tenant: string;
  selector?: string;
  start: bigint;
  end: bigint;
}

/** What the querier asks of the ingesters (in-process or over HTTP). */
export interface IngesterQuerier {
  query(req: IngesterQueryRequest, options?: IngesterCallOptions): Promise<IngesterStream[]>;
  series(
    req: IngesterSeriesRequest,
    options?: IngesterCallOptions,
  ): Promise<{ labels: string; fingerprint: bigint }[]>;
}

/** How long an ingester call may take: the query's remaining deadline, and its abort. */
export interface IngesterCallOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

/** One series' chunks under one bloom, as the gateway receives them. */
export interface FilterSeries {
  fingerprint: bigint;
  /** Canonical stream labels (a test on a stream label cannot prune). */
  labels: string;
  bloom: BloomLocation;
  chunks: SegmentChunk[];
}

/** A request to prune chunk refs with the bloom test of a query. */
export interface FilterRequest {
  tenant: string;
  from: bigint;
  through: bigint;
  test: BloomTest;
  series: FilterSeries[];
}

/** What the gateway did. */
export interface FilterStats {
  series: number;
  seriesSkipped: number;
  chunks: number;
  chunksPruned: number;
  blocksRead: number;
  cacheHits: number;
  /** Reason → chunks kept because the gateway failed open. */
  failedOpen: Record<string, number>;
}

/** The refs that may match. */
export interface FilterResponse {
  series: { fingerprint: bigint; chunks: SegmentChunk[] }[];
  stats: FilterStats;
}

/** What the querier asks of the bloom gateway. */
export interface ChunkFilter {
  filterChunkRefs(req: FilterRequest): Promise<FilterResponse>;
}

/** What the querier needs of the object store: chunks and index segments. */
export type QuerierStore = Pick<ObjectStore, "get" | "list">;

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
};
