/**
 * The ingester: consumes queue partitions into per-stream head chunks and blooms, flushes
 * them to object storage (chunk, bloom block, flush manifest, index segment, then the
 * queue commit), recovers exactly-once after a crash, and serves its unflushed data to
 * queriers (in process or over HTTP). Its query contract (`IngesterQuerier`) is
 * `@sieve/proto`'s.
 *
 * Its face is what other packages use (the `sieve` app, the querier and their tests and
 * benchmarks); the ingester's own tests import its modules directly. tests/faces.test.ts
 * keeps it so.
 */
export { Ingester } from "./ingester.js";
export { createIngester } from "./http.js";
export type { IngesterService } from "./http.js";
export { IngesterHttpClient } from "./client.js";
export { loadConfig, DEFAULT_CONFIG } from "./config.js";
export type { IngesterConfig } from "./config.js";
export { createIngesterWorkers } from "./http.js";
export type { IngesterHandle } from "./workers.js";
/** Flush manifests, read by the compactor: a segment a live manifest lists is never deleted. */
export { MANIFESTS_PREFIX, decodeManifest, encodeManifest, manifestKey } from "./manifest.js";
export { recoverPartition } from "./recovery.js";
export { claimPartition } from "./ownership.js";
