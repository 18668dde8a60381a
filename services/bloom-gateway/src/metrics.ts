import { Counter, Gauge, Histogram } from "prom-client";
import type { Registry } from "prom-client";
import type { BloomCacheStats } from "./cache.js";

const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
];

/** The bloom gateway's Prometheus metrics, registered on the registry it is given. */
export class BloomGatewayMetrics {
  /** Time to filter one request in the gateway. */
  readonly filterDuration: Histogram;
  /** HTTP request latency, by status code. */
  readonly requestDuration: Histogram<"status_code">;
  /** Series seen, by outcome: `skipped` (the series test failed) or `kept`. */
  readonly series: Counter<"outcome">;
  /** Chunks seen, by outcome: `kept` or `pruned`. */
  readonly chunks: Counter<"outcome">;
  /** Chunks kept untested, by fail-open reason (reasons.ts). */
  readonly failedOpenChunks: Counter<"reason">;
  /** Bloom lookups, by how the cache served them: `hit`, `miss`, `inflight`. */
  readonly cacheRequests: Counter<"result">;
  /** Reads of bloom blocks (or single records) from the object store, by outcome. */
  readonly storeReadDuration: Histogram<"outcome">;

  constructor(registry: Registry, cacheStats: () => BloomCacheStats) {
    const registers = [registry];
    this.filterDuration = new Histogram({
      name: "sieve_bloom_gateway_filter_duration_seconds",
      help: "Time to filter one request's chunk refs.",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.requestDuration = new Histogram({
      name: "sieve_bloom_gateway_request_duration_seconds",
      help: "Filter request latency over HTTP.",
      labelNames: ["status_code"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.series = new Counter({
      name: "sieve_bloom_gateway_series_total",
      help: "Series filtered, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.chunks = new Counter({
      name: "sieve_bloom_gateway_chunks_total",
      help: "Chunk refs filtered, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.failedOpenChunks = new Counter({
      name: "sieve_bloom_gateway_failed_open_chunks_total",
      help: "Chunk refs kept untested, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.cacheRequests = new Counter({
      name: "sieve_bloom_gateway_cache_requests_total",
      help: "Bloom lookups, by how the cache served them.",
      labelNames: ["result"],
      registers,
    });
    this.storeReadDuration = new Histogram({
      name: "sieve_bloom_gateway_store_read_duration_seconds",
      help: "Reads of bloom records from the object store, by outcome.",
      labelNames: ["outcome"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    new Gauge({
      name: "sieve_bloom_gateway_cache_bytes",
      help: "Bytes held by the bloom cache.",
      registers,
      collect() {
        this.set(cacheStats().bytes);
      },
    });
    new Gauge({
      name: "sieve_bloom_gateway_cache_entries",
      help: "Bloom blocks and single series blooms held by the bloom cache.",
      registers,
      collect() {
        this.set(cacheStats().entries);
      },
    });
    new Counter({
      name: "sieve_bloom_gateway_cache_evictions_total",
      help: "Blocks and blooms evicted to stay under the cache's byte budget.",
      registers,
      collect() {
        this.reset();
        this.inc(cacheStats().evictions);
      },
    });
  }
}
