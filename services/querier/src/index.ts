/**
 * The querier: Loki's query API (`query_range`, `query`, `labels`, `label/<name>/values`,
 * `series`, `index/stats`) over Sieve's store and the ingesters' unflushed data, pruning
 * chunks with the bloom gateway.
 *
 * Its face is what other packages use (the `sieve` app and its benchmarks); the querier's
 * own tests and benchmarks import its modules directly. tests/faces.test.ts keeps it so.
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { InlineQueries } from "./inline.js";
import { ReadReport } from "./labels.js";
import type { QueryPool } from "./pool.js";
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

/**
 * The main thread's lane for needle queries beside `pool` (inline.ts): a querier over one
 * share of the caches (`pool.shared`), counting on the pool's metrics and read report;
 * `busy` says when the main thread has heavy work of its own (see InlineQueries).
 */
export function createInlineQueries(
  pool: QueryPool,
  deps: Omit<QuerierDeps, "config" | "metrics" | "report">,
  budgetMs: number,
  busy?: () => boolean,
): InlineQueries {
  const querier = new Querier({
    ...deps,
    config: pool.shared.config,
    ...(pool.metrics !== undefined && { metrics: pool.metrics }),
    report: pool.report,
  });
  return new InlineQueries(querier, budgetMs, busy === undefined ? {} : { busy });
}

export type { InlineQueries } from "./inline.js";
export type { QueryTask } from "./handler.js";
export type { Querier, ResultEntry } from "./querier.js";
export { querierPlugin } from "./http.js";
export { QueryPool } from "./pool.js";
export { skipIdleIngesters } from "./deps.js";
export type { WorkerSetup } from "./pool.js";
export { loadConfig, DEFAULT_CONFIG } from "./config.js";
export type { QuerierConfig } from "./config.js";
export type { StageSeconds } from "./stats.js";
