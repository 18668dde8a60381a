/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention and garbage collection, and the hook delete processing plugs into. See
 * README.md.
 */
export { Compactor, defaultInstanceId } from "./compactor.js";
export type { CompactorDeps, CompactorJob, JobContext } from "./compactor.js";
export { DEFAULT_CONFIG, ENV_PREFIX, loadConfig, retentionConfig } from "./config.js";
export type { CompactorConfig, ConfigSources } from "./config.js";
export { CompactorLock, LOCK_KEY, LockLostError, parseLease } from "./lock.js";
export type { LeaseRecord, LockOptions } from "./lock.js";
export { mergeDay } from "./merge.js";
export type { ExpiryTest, MergedDay } from "./merge.js";
export { CompactorMetrics } from "./metrics.js";
export type { DeleteReason, ObjectKind, RunOutcome } from "./metrics.js";
export {
  DEFAULT_RETENTION_LIMITS,
  MIN_RETENTION_PERIOD_MS,
  NO_RETENTION,
  Retention,
  TenantRetention,
  parseStreamRetention,
} from "./retention.js";
export type { RetentionConfig, RetentionLimits, StreamRetention } from "./retention.js";
export { runOnce } from "./run.js";
export type { RunDeps, RunReport } from "./run.js";
