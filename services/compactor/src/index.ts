/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention, delete requests and garbage collection. See README.md.
 */
export { Compactor } from "./compactor.js";
export { DEFAULT_CONFIG, loadConfig, retentionConfig } from "./config.js";
export type { CompactorConfig } from "./config.js";
export { deleteApiPlugin } from "./deletion/http.js";
export { DeletionProcessor } from "./deletion/processor.js";
export { DeleteRequestsStore } from "./deletion/requests.js";
export { deletionMetrics } from "./deletion/registry.js";
export { CompactorMetrics } from "./metrics.js";
export { runOnce } from "./run.js";
