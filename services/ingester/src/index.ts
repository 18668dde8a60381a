/**
 * The ingester: consumes queue partitions into per-stream head chunks and blooms, flushes
 * them to object storage (chunk, bloom block, flush manifest, index segment, then the
 * queue commit), recovers exactly-once after a crash, and serves its unflushed data to
 * queriers (in process or over HTTP).
 */
export { Ingester } from "./ingester.js";
export type { IngesterDeps } from "./ingester.js";
export type {
  IngesterCallOptions,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeriesRequest,
  IngesterStream,
} from "./query.js";
export { createIngester, createIngesterServer, TIMEOUT_HEADER } from "./http.js";
export type {
  IngesterService,
  IngesterServiceDeps,
  IngesterPluginOptions,
  IngesterRoutes,
} from "./http.js";
export { QUERY_SLICE_MS } from "./query.js";
export { FAILURE_REASONS } from "./health.js";
export type { FailureReason, FailureStage } from "./health.js";
export { IngesterHttpClient } from "./client.js";
export type { IngesterHttpClientOptions } from "./client.js";
export {
  loadConfig,
  validateConfig,
  tenantBlooms,
  DEFAULT_CONFIG,
  ConfigError,
  CONFIG_ERRORS,
  ENV_PREFIX,
} from "./config.js";
export type {
  IngesterConfig,
  TenantBloomConfig,
  ConfigSources,
  ConfigErrorCode,
} from "./config.js";
export { IngesterMetrics } from "./metrics.js";
export { FLUSH_REASONS } from "./head.js";
export type { FlushReason } from "./head.js";
export { IngesterError, INGESTER_ERRORS } from "./errors.js";
export type { IngesterErrorCode } from "./errors.js";
export {
  MANIFEST_VERSION,
  manifestKey,
  manifestPrefix,
  encodeManifest,
  decodeManifest,
} from "./manifest.js";
export type { FlushManifest, ManifestStream } from "./manifest.js";
export { bloomBlockKey } from "./flush.js";
export { recoverPartition } from "./recovery.js";
export type { FlushStore } from "./flush.js";
