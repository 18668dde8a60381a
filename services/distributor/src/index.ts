/**
 * The distributor: Loki's push API (`POST /loki/api/v1/push`, JSON or protobuf+snappy),
 * Loki's validation and per-tenant limits, and durable writes to the queue, one record per
 * stream on the partition of its fingerprint.
 */
export { createDistributorServer, distributorPlugin, FAKE_TENANT } from "./http.js";
export type { DistributorHttpDeps } from "./http.js";
export { Distributor } from "./distributor.js";
export type { DistributorDeps, PushResult } from "./distributor.js";
export { loadConfig, DEFAULT_CONFIG, ConfigError, CONFIG_ERRORS, ENV_PREFIX } from "./config.js";
export type { DistributorConfig, ConfigSources, ConfigErrorCode } from "./config.js";
export { DEFAULT_LIMITS, OverridableLimits, TokenBucket } from "./limits.js";
export type { Limits, TenantLimits } from "./limits.js";
export { DistributorMetrics } from "./metrics.js";
export { REASONS, tenantIdError } from "./validation.js";
export type { Reason, Rejection } from "./validation.js";
export { decodeJsonPush, decodeProtobufPush, DecodeError } from "./decode.js";
export type { IncomingStream, IncomingEntry, DecodeErrorCode } from "./decode.js";
