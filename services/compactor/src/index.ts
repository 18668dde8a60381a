/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention, delete requests and garbage collection. See README.md.
 */
export { loadConfig, DEFAULT_CONFIG } from "./config.js";
export type { CompactorConfig } from "./config.js";
export { deleteApiPlugin } from "./deletion/http.js";
export type { DeleteApiDeps } from "./deletion/http.js";
export { DeletionProcessor, LeaseLostError } from "./deletion/processor.js";
export type {
  DeletionOptions,
  DeletionRunContext,
  DeletionRunResult,
} from "./deletion/processor.js";
export { DeleteRequestsStore } from "./deletion/requests.js";
export { deletionMetrics } from "./deletion/registry.js";
