/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention, delete requests and garbage collection. See README.md.
 *
 * Deletion's face so far: the delete API (`deleteApiPlugin` over a `DeleteRequestsStore`)
 * and the processor the compactor's loop calls (`DeletionProcessor.run(ctx)`; its context
 * and options types are in deletion/processor.ts, exported here once the loop imports them).
 */
export { loadConfig } from "./config.js";
export type { CompactorConfig } from "./config.js";
export { deleteApiPlugin } from "./deletion/http.js";
export { DeletionProcessor } from "./deletion/processor.js";
export { DeleteRequestsStore } from "./deletion/requests.js";
export { deletionMetrics } from "./deletion/registry.js";
