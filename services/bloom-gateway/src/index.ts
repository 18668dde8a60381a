/**
 * The bloom gateway: prunes a query's chunk refs with the series' blooms (Loki's
 * FilterChunkRefs). In process (`BloomGateway`), over HTTP (`bloomGatewayPlugin`,
 * `POST /bloomgateway/v1/filter`, protobuf) and as a client of several gateways routed by
 * jump hash (`BloomGatewayClient`). Fails open: a ref it cannot test is kept.
 */
export { BloomGateway, emptyStats, addStats, failOpen } from "./gateway.js";
// The contract's types are defined once, in @sieve/proto; re-exported for the gateway's users.
export type {
  ChunkFilter,
  FilterRequest,
  FilterResponse,
  FilterSeries,
  FilterStats,
} from "@sieve/proto";
export { BloomGatewayClient, DEFAULT_CLIENT_TIMEOUT_MS } from "./client.js";
export type { BloomGatewayClientOptions } from "./client.js";
export {
  bloomGatewayPlugin,
  createBloomGatewayServer,
  parseFilterRequest,
  FILTER_PATH,
  PROTOBUF_TYPE,
} from "./http.js";
export type { BloomGatewayHttpDeps } from "./http.js";
export { BloomCache, BloomReadError } from "./cache.js";
export type { BloomCacheStats, BloomCacheOptions, CacheSource, FallbackReason } from "./cache.js";
export { loadConfig, DEFAULT_CONFIG, ConfigError, CONFIG_ERRORS, ENV_PREFIX } from "./config.js";
export type { BloomGatewayConfig, ConfigSources, ConfigErrorCode } from "./config.js";
export { BloomGatewayMetrics } from "./metrics.js";
export { FAIL_OPEN_REASONS } from "./reasons.js";
export type { FailOpenReason } from "./reasons.js";
export { GatewayError, GATEWAY_ERRORS } from "./errors.js";
export type { GatewayErrorCode } from "./errors.js";
export { jumpHash } from "./jump.js";
