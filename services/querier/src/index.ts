/**
 * The querier: Loki's query API (`query_range`, `query`, `labels`, `label/<name>/values`,
 * `series`, `index/stats`) over Sieve's store and the ingesters' unflushed data, pruning
 * chunks with the bloom gateway.
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { ReadReport } from "./labels.js";
import { QuerierMetrics } from "./metrics.js";
import { Querier, type QuerierDeps } from "./querier.js";

/** Builds a querier; with a `registry`, its metrics are registered there. */
export function createQuerier(
  deps: Omit<QuerierDeps, "metrics" | "report"> & { registry?: Registry; logger?: Logger },
): Querier {
  const { registry, logger, ...rest } = deps;
  return new Querier({
    ...rest,
    ...(registry !== undefined && { metrics: new QuerierMetrics(registry) }),
    report: new ReadReport({
      ...(registry !== undefined && { registry }),
      ...(logger !== undefined && { logger }),
    }),
  });
}

export { Querier, TopEntries, parseSelector } from "./querier.js";
export type {
  QuerierDeps,
  LogQuery,
  LogResult,
  MetricRangeQuery,
  ResultEntry,
  IndexStats,
} from "./querier.js";
export { querierPlugin, createQuerierServer, FAKE_TENANT, tenantIdError } from "./http.js";
export type { QuerierHttpDeps, QueryRunner } from "./http.js";
export { handleQuery, answerOfError, errorAnswer, QUERY_ROUTES } from "./handler.js";
export type { QueryTask, QueryAnswer, QueryCounts, QueryRoute } from "./handler.js";
export { QueryPool, DEFAULT_WORKER_HEAP_MB } from "./pool.js";
export type { QueryPoolOptions, WorkerSetup, RemoteSetup } from "./pool.js";
export {
  loadConfig,
  limitsFor,
  DEFAULT_CONFIG,
  DEFAULT_QUERY_LIMITS,
  ConfigError,
  CONFIG_ERRORS,
  ENV_PREFIX,
} from "./config.js";
export type { QuerierConfig, QueryLimits, ConfigSources, ConfigErrorCode } from "./config.js";
export { QuerierMetrics } from "./metrics.js";
export { QueryStats } from "./stats.js";
export type { StageSeconds } from "./stats.js";
export { ObjectCache } from "./cache.js";
export type { CacheLookup } from "./cache.js";
export {
  QueryError,
  QUERY_ERROR_STATUS,
  ERR_DEADLINE_EXCEEDED,
  goDuration,
  promDuration,
} from "./errors.js";
export type { QueryErrorCode } from "./errors.js";
export {
  ParamError,
  parseTimestamp,
  parseBounds,
  parseRangeQuery,
  parseInstantQuery,
  parseSecondsOrDuration,
  parsePromDuration,
  seriesMatchers,
  defaultStep,
  DEFAULT_LIMIT,
  DEFAULT_SINCE_NS,
} from "./params.js";
export type { RangeQuery, InstantQuery, Direction } from "./params.js";
export { toStreams, categorize, FLAG_CATEGORIZE_LABELS } from "./marshal.js";
export type { LokiStream, StreamValue } from "./marshal.js";
export { KEEP_ALL_FILTER, NO_INGESTERS } from "./deps.js";
// The contracts with the ingesters and the gateway (IngesterQuerier, ChunkFilter) are
// defined once, in @sieve/proto.
export type { QuerierStore } from "./deps.js";
