/**
 * The bloom gateway: prunes a query's chunk refs with the series' blooms (Loki's
 * FilterChunkRefs). In process (`BloomGateway`), over HTTP (`bloomGatewayPlugin`,
 * `POST /bloomgateway/v1/filter`, protobuf) and as a client of several gateways routed by
 * jump hash (`BloomGatewayClient`). Fails open: a ref it cannot test is kept. Its
 * contract (`ChunkFilter`, `FilterRequest`, …) is `@sieve/proto`'s.
 *
 * Its face is what other packages use (the `sieve` app, the querier and their tests and
 * benchmarks); the gateway's own tests import its modules directly. tests/faces.test.ts
 * keeps it so.
 */
export { BloomGateway } from "./gateway.js";
export { BloomGatewayClient } from "./client.js";
export { bloomGatewayPlugin, createBloomGatewayServer } from "./http.js";
export { loadConfig, DEFAULT_CONFIG } from "./config.js";
export type { BloomGatewayConfig } from "./config.js";
