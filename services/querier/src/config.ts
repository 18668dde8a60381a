import { availableParallelism } from "node:os";
import {
  ConfigError,
  checkRange,
  defineSchema,
  forTenant,
  sectionLoader,
  tenantIdError,
  tenantViews,
} from "@sieve/config";
import type { SectionLoader, SectionSources } from "@sieve/config";

/**
 * Per-tenant query limits, Loki's where Loki has one (`limits_config`). Durations in
 * milliseconds, 0 = no limit.
 */
export interface QueryLimits {
  /** Loki's `max_query_length` (721h): longest `end - start` of a query. */
  readonly maxQueryLengthMs: number;
  /** Loki's `max_entries_limit_per_query` (5000): largest `limit` of a log query. */
  readonly maxEntriesLimitPerQuery: number;
  /** Loki's `max_chunks_per_query` (2,000,000): chunk refs a query may match in the index. */
  readonly maxChunksPerQuery: number;
  /** Loki's `query_timeout` (1m): a query running longer is stopped with 504. */
  readonly queryTimeoutMs: number;
  /**
   * No longer read: metric queries are pushed down and hold partial aggregates, bounded by
   * LogQL's `maxSamples`, not entries. Kept so that files and overrides naming it still load.
   */
  readonly maxMetricQueryEntries: number;
  /**
   * Sieve's bound on the bytes one query holds (256 MiB): pipeline output kept for the
   * answer, rows held for metric evaluation, entries received from the ingesters. Past
   * it the query is refused with 400 instead of exhausting its worker's heap.
   */
  readonly maxQueryMemoryBytes: number;
  /** Loki's `max_concurrent_tail_requests` (10): tails a tenant may hold open at once. */
  readonly maxConcurrentTailRequests: number;
  /** Loki's `volume_enabled` (true in Loki 3): `index/volume[_range]` answer; off, 404. */
  readonly volumeEnabled: boolean;
  /** Loki's `volume_max_series` (1000): names a volume query may accumulate (400 past it). */
  readonly volumeMaxSeries: number;
  /**
   * Loki's `deletion_mode` (`filter-and-delete`): `disabled` (no delete API, no filtering),
   * `filter-only` (requests hide lines from queries, nothing is rewritten) or
   * `filter-and-delete` (hidden until the compactor has rewritten the chunks without them).
   */
  readonly deletionMode: DeletionMode;
}

/** Loki's deletion modes (`pkg/compactor/deletionmode`). */
export const DELETION_MODES = ["disabled", "filter-only", "filter-and-delete"] as const;
/** One of {@link DELETION_MODES}. */
export type DeletionMode = (typeof DELETION_MODES)[number];

/** Loki's defaults. */
export const DEFAULT_QUERY_LIMITS: QueryLimits = {
  maxQueryLengthMs: 721 * 3_600_000,
  maxEntriesLimitPerQuery: 5000,
  maxChunksPerQuery: 2_000_000,
  queryTimeoutMs: 60_000,
  maxMetricQueryEntries: 10_000_000,
  maxQueryMemoryBytes: 256 * 1024 * 1024,
  maxConcurrentTailRequests: 10,
  volumeEnabled: true,
  volumeMaxSeries: 1000,
  deletionMode: "filter-and-delete",
};

/** The querier's configuration. Sizes in bytes. */
export interface QuerierConfig {
  /**
   * Whether X-Scope-OrgID is required. Off: every query is tenant `fake`. The `sieve`
   * command sets it from the top-level `authEnabled`; this section's own key (older) still
   * wins when given.
   */
  readonly authEnabled: boolean;
  /**
   * Loki's `query_store_only`: a lone querier (`sieve querier`) reads only the object
   * store, on purpose. Off, it refuses to start without ingester addresses, since it would
   * silently miss every entry not yet flushed.
   */
  readonly queryStoreOnly: boolean;
  /** Chunk fetches in flight per query (the bounded pool). */
  readonly maxConcurrentFetches: number;
  /**
   * Loki's `multi_tenant_queries_enabled`: with auth on, `X-Scope-OrgID: a|b` reads tenants
   * `a` and `b` together, each stream and series labelled `__tenant_id__`. Off, such a
   * header is refused (400) as an invalid tenant ID.
   */
  readonly multiTenantQueriesEnabled: boolean;
  /** Byte budget of the chunk cache (chunk objects and their decompressed symbol sections), shared by all queries. */
  readonly chunkCacheBytes: number;
  /** Byte budget of the index segment cache (by encoded size), merges of segments included. */
  readonly segmentCacheBytes: number;
  /**
   * Days of index each query worker loads before it takes queries (the segments of the
   * last `queryReadyDays` × 24 hours), with the bloom blocks they name (up to half the
   * worker's bloom cache) and their chunks' ends (up to three quarters of its chunk-end
   * cache): Loki's `query_ready_num_days`. 0: everything is read at first use.
   */
  readonly queryReadyDays: number;
  /**
   * Worker threads that run queries, one query each (see pool.ts); 0 runs them on the
   * main thread, unisolated (for debugging and benchmarks of the evaluation alone).
   */
  readonly workers: number;
  /** V8 heap cap of each query worker, MiB: a query past it gets a 400, nothing else dies. */
  readonly workerHeapMb: number;
  /**
   * With `workers` > 0: a needle query (a log query with a structured-metadata test) begins on the main
   * thread, one at a time, and goes to a worker past this many milliseconds or 2,000
   * chunks in range (inline.ts); 0: every query runs on a worker.
   */
  readonly inlineBudgetMs: number;
  /**
   * Loki's `split_queries_by_interval`: a metric range query's steps are cut at multiples
   * of this, and the parts run `splitConcurrency` at a time; 0 does not split.
   */
  readonly splitQueriesByIntervalMs: number;
  /** Parts of one split query evaluated at once (the bounded pool of its worker). */
  readonly splitConcurrency: number;
  /** Limits of every tenant. */
  readonly limits: QueryLimits;
  /** Per-tenant changes to `limits`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<QueryLimits>>>;
  /** Loki's `tail_max_duration` (1h): a tail open longer is closed. */
  readonly tailMaxDurationMs: number;
  /**
   * Bytes a tail's WebSocket may hold unsent: past it the client is blocked, new lines are
   * dropped and listed in `dropped_entries`.
   */
  readonly tailMaxBufferedBytes: number;
  /** A tail's client blocked this long is closed (Loki's ingesters: 15 s). */
  readonly tailSlowReaderMs: number;
  /**
   * How long a tenant's delete requests, read from the store for query-time filtering, are
   * reused (Loki's querier caches them 5 min); 0 reads them for every query.
   */
  readonly deleteRequestsCacheMs: number;
}

/** Defaults that work with no file. */
export const DEFAULT_CONFIG: QuerierConfig = {
  authEnabled: false,
  queryStoreOnly: false,
  maxConcurrentFetches: 8,
  multiTenantQueriesEnabled: false,
  chunkCacheBytes: 256 * 1024 * 1024,
  segmentCacheBytes: 64 * 1024 * 1024,
  queryReadyDays: 1,
  workers: availableParallelism(),
  workerHeapMb: 1024,
  inlineBudgetMs: 5,
  splitQueriesByIntervalMs: 3_600_000,
  splitConcurrency: 4,
  limits: DEFAULT_QUERY_LIMITS,
  overrides: {},
  tailMaxDurationMs: 3_600_000,
  tailMaxBufferedBytes: 1024 * 1024,
  tailSlowReaderMs: 15_000,
  deleteRequestsCacheMs: 10_000,
};

// The shared configuration errors: re-exported so importers of this package keep working.
export { CONFIG_ERRORS, ConfigError } from "@sieve/config";
export type { ConfigErrorCode } from "@sieve/config";

/**
 * Where configuration comes from: the file (read here, or already read by the `sieve`
 * command), values inherited from the top level, and the environment (default `process.env`).
 */
export type ConfigSources = SectionSources;

/** Every number is an integer ≥ 0 (a limit of 0 is no limit); any tenant may have overrides. */
const SCHEMA = defineSchema({
  section: "querier",
  defaults: DEFAULT_CONFIG,
  group: "limits",
  min: 0,
  tenantError: tenantIdError,
  shownDefaults: { workers: "one per core" },
  docs: {
    authEnabled:
      "require `X-Scope-OrgID` (off: every query reads tenant `fake`); older than the top-level `authEnabled`, which it overrides here",
    queryStoreOnly:
      "`sieve querier` reads only the object store, on purpose (Loki's `query_store_only`); off, it needs `cluster.ingesterUrls`",
    maxConcurrentFetches: "chunk fetches in flight per query, ahead of the reader (bounded pool)",
    multiTenantQueriesEnabled:
      "with `authEnabled`, `X-Scope-OrgID: a|b` reads both tenants, each stream and series labelled `__tenant_id__` (Loki's `multi_tenant_queries_enabled`); off: refused with 400",
    chunkCacheBytes:
      "byte budget of the LRU of fetched chunks (each with its decompressed symbol table), shared by every query; an eighth of it holds chunk ends (footer and symbol filter) of chunks a needle read no further",
    segmentCacheBytes:
      "byte budget of the LRU of decoded index segments (by their encoded size) and of the merges of several (each weighed as the segments it holds)",
    queryReadyDays:
      "days of index each query worker loads before it takes queries (the segments of the last N × 24 h), with their bloom blocks (up to half its bloom cache) and chunk ends (up to three quarters of its chunk-end cache) (`query_ready_num_days`); 0 = read at first use",
    workers: "worker threads running queries, one query each; 0: on the main thread",
    workerHeapMb: "V8 heap cap of each query worker, MiB (a query past it gets a 400)",
    inlineBudgetMs:
      "with `workers` > 0, needle queries (a metadata test) begin on the main thread, one at a time; past this many ms or 2,000 chunks in range, on a worker; 0 = none",
    splitQueriesByIntervalMs:
      "a metric range query is cut at multiples of this, its parts evaluated apart (`split_queries_by_interval`); 0 = no split",
    splitConcurrency: "parts of one split metric query evaluated at once (bounded pool)",
    limits: {
      maxQueryLengthMs: "longest `end - start` (`max_query_length`); 0 = no limit",
      maxEntriesLimitPerQuery: "largest `limit` of a log query (`max_entries_limit_per_query`)",
      maxChunksPerQuery: "chunk refs a query may match in the index (`max_chunks_per_query`)",
      queryTimeoutMs: "a query running longer answers 504 (`query_timeout`); 0 = none",
      maxMetricQueryEntries:
        "no longer read: metric queries are pushed down and hold partial aggregates (LogQL's `maxSamples`), not entries; kept so older files load",
      maxQueryMemoryBytes:
        "bytes a query may hold: lines kept for the answer, rows for metric evaluation, entries from the ingesters (400 past it); 0 = no limit",
      maxConcurrentTailRequests:
        "tails (`/loki/api/v1/tail`) a tenant may hold open on this querier (`max_concurrent_tail_requests`); 0 = no limit",
      volumeEnabled: "`index/volume` and `index/volume_range` answer (`volume_enabled`); off: 404",
      volumeMaxSeries:
        "series (or labels) a volume query may group by before it is refused (`volume_max_series`); 0 = no limit",
      deletionMode:
        "`disabled`, `filter-only` or `filter-and-delete` (`deletion_mode`): whether the delete API answers, and whether the compactor rewrites chunks or queries only hide the lines",
    },
    tailMaxDurationMs: "a tail open longer is closed (`tail_max_duration`); 0 = no limit",
    tailMaxBufferedBytes:
      "bytes a tail's WebSocket may hold unsent; past it new lines are dropped and listed in `dropped_entries`",
    tailSlowReaderMs: "a tail's client that stays blocked this long is closed (1011)",
    deleteRequestsCacheMs:
      "how long a tenant's delete requests are reused by query-time filtering before being read again; 0 = every query",
  },
});

/**
 * Environment variables override the file: `SIEVE_QUERIER_` + the option's path in
 * UPPER_SNAKE_CASE (`SIEVE_QUERIER_CHUNK_CACHE_BYTES=1073741824`,
 * `SIEVE_QUERIER_LIMITS_MAX_QUERY_LENGTH_MS=3600000`).
 */
export const ENV_PREFIX = SCHEMA.envPrefix;

/** Counts and budgets must be > 0; `workers` 0 runs queries on the main thread. */
function validate(config: QuerierConfig): void {
  checkRange("maxConcurrentFetches", config.maxConcurrentFetches, 1);
  checkRange("chunkCacheBytes", config.chunkCacheBytes, 1);
  checkRange("segmentCacheBytes", config.segmentCacheBytes, 1);
  checkRange("queryReadyDays", config.queryReadyDays, 0, 31);
  checkRange("workers", config.workers, 0, 256);
  checkRange("workerHeapMb", config.workerHeapMb, 64);
  checkRange("tailMaxBufferedBytes", config.tailMaxBufferedBytes, 1);
  checkRange("tailSlowReaderMs", config.tailSlowReaderMs, 1);
  checkRange("splitConcurrency", config.splitConcurrency, 1, 64);
  for (const [path, limits] of tenantViews("limits", config.limits, config.overrides)) {
    if (!(DELETION_MODES as readonly string[]).includes(limits.deletionMode)) {
      throw new ConfigError("invalid_value", `${path}.deletionMode`, DELETION_MODES.join(", "));
    }
  }
}

/**
 * Reads the configuration: defaults, then the file's `querier` section, then the
 * environment; validates it and throws a {@link ConfigError} naming the first bad option.
 * Carries its schema (`loadConfig.schema`) for the `sieve` command.
 */
export const loadConfig: SectionLoader<QuerierConfig> = sectionLoader(SCHEMA, validate);

/** The limits of one tenant: the overrides over the defaults. */
export function limitsFor(config: QuerierConfig, tenant: string): QueryLimits {
  return forTenant(config.limits, config.overrides, tenant);
}

/**
 * The limits of a read across tenants: each the smallest positive one of `all` (0, no
 * limit, only when every tenant has none), as Loki's `SmallestPositiveNonZeroIntPerTenant`;
 * a switch is on only when it is on for every tenant.
 */
export function smallestLimits(all: readonly QueryLimits[]): QueryLimits {
  const out: Record<string, number | boolean | string> = {};
  for (const key of Object.keys(DEFAULT_QUERY_LIMITS) as (keyof QueryLimits)[]) {
    const values = all.map((l) => l[key]);
    if (typeof DEFAULT_QUERY_LIMITS[key] === "string") {
      // deletionMode: read per tenant (a read across tenants filters each tenant's own).
      out[key] = values[0] ?? DEFAULT_QUERY_LIMITS[key];
      continue;
    }
    if (typeof DEFAULT_QUERY_LIMITS[key] === "boolean") {
      out[key] = values.every((v) => v === true);
      continue;
    }
    const positive = values.filter((v): v is number => typeof v === "number" && v > 0);
    out[key] = positive.length === 0 ? 0 : Math.min(...positive);
  }
  return out as unknown as QueryLimits;
}
