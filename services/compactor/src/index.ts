/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention, delete requests and garbage collection. See README.md.
 */
export {
  deleteApiPlugin,
  DEFAULT_CANCEL_PERIOD_MS,
  DELETION_NOT_AVAILABLE,
} from "./deletion/http.js";
export type { DeleteApiDeps } from "./deletion/http.js";
export { DeletionProcessor, LeaseLostError, replacementId } from "./deletion/processor.js";
export type {
  DeletionOptions,
  DeletionRunContext,
  DeletionRunResult,
} from "./deletion/processor.js";
export { DeleteRequestsStore, TENANTS_PREFIX } from "./deletion/requests.js";
export type { NewDeleteRequest, TaggedRequest } from "./deletion/requests.js";
export { DeletionMetrics } from "./deletion/metrics.js";
export { deletionMetrics } from "./deletion/registry.js";
export { DeleteApiError, parseAddParams, parseDeleteTime, goDuration } from "./deletion/params.js";
export { liveManifestSegments, MANIFESTS_PREFIX } from "./deletion/manifests.js";
