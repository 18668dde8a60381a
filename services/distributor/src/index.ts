/**
 * The distributor: Loki's push API (`POST /loki/api/v1/push`, JSON or protobuf+snappy),
 * Loki's validation and per-tenant limits, and durable writes to the queue, one record per
 * stream on the partition of its fingerprint.
 *
 * Its face is what other packages use (the `sieve` app); the distributor's own tests and
 * benchmarks import its modules directly. tests/faces.test.ts keeps it so.
 */
export { distributorPlugin } from "./http.js";
export { loadConfig } from "./config.js";
export type { DistributorConfig } from "./config.js";
