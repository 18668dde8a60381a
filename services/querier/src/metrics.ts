import { Counter, Gauge, Histogram } from "prom-client";
import type { Registry } from "prom-client";

/** The querier's Prometheus metrics, registered on the registry it is given. */
export class QuerierMetrics {
  /** HTTP request latency, by route and status code. */
  readonly requestDuration: Histogram<"route" | "status_code">;
  /** Chunk refs a query found in range in the index. */
  readonly chunksInRange: Counter;
  /** Chunk refs the bloom gateway pruned. */
  readonly chunksPruned: Counter;
  /** Chunks read (cache or store). */
  readonly chunksFetched: Counter;
  /** Bytes read from the object store (chunk cache misses). */
  readonly bytesFetched: Counter;
  /** Lines decoded from chunks. */
  readonly linesScanned: Counter;
  /** Chunk refs the bloom gateway pruned, by tenant: the denominator of the observed FPR. */
  readonly bloomPrunedChunks: Counter<"tenant">;
  /**
   * Chunks a bloom test kept that held no entry passing it, by tenant (audit.ts): the
   * observed false-positive rate is fp / (fp + pruned), blooms having no false negatives.
   */
  readonly falsePositiveChunks: Counter<"tenant">;
  /**
   * Needle queries begun on the main thread (inline.ts), by outcome: `answered` there, or
   * `over_budget` and answered by a query worker.
   */
  readonly inlineQueries: Counter<"outcome">;
  /** Tails open now (Loki's `loki_querier_tail_active`). */
  readonly tailsActive: Gauge;
  /** Tails ended by the server, by reason (`TAIL_CLOSE` in tail.ts). */
  readonly tailsClosed: Counter<"reason">;
  /** Tail lines dropped because their client did not read (listed in `dropped_entries`). */
  readonly tailDroppedLines: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requestDuration = new Histogram({
      name: "sieve_querier_request_duration_seconds",
      help: "Query API request latency.",
      labelNames: ["route", "status_code"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.chunksInRange = new Counter({
      name: "sieve_querier_chunks_in_range_total",
      help: "Chunk refs queries found in range in the index.",
      registers,
    });
    this.chunksPruned = new Counter({
      name: "sieve_querier_chunks_pruned_total",
      help: "Chunk refs the bloom gateway pruned.",
      registers,
    });
    this.chunksFetched = new Counter({
      name: "sieve_querier_chunks_fetched_total",
      help: "Chunks read from the cache or the object store.",
      registers,
    });
    this.bytesFetched = new Counter({
      name: "sieve_querier_bytes_fetched_total",
      help: "Chunk bytes read from the object store (cache misses).",
      registers,
    });
    this.linesScanned = new Counter({
      name: "sieve_querier_lines_scanned_total",
      help: "Lines decoded from chunks.",
      registers,
    });
    this.bloomPrunedChunks = new Counter({
      name: "sieve_querier_bloom_pruned_chunks_total",
      help: "Chunk refs the bloom gateway pruned, by tenant.",
      labelNames: ["tenant"],
      registers,
    });
    this.falsePositiveChunks = new Counter({
      name: "sieve_querier_bloom_false_positive_chunks_total",
      help: "Chunks a bloom test kept that held no entry passing it (read whole), by tenant.",
      labelNames: ["tenant"],
      registers,
    });
    this.inlineQueries = new Counter({
      name: "sieve_querier_inline_queries_total",
      help: "Needle queries begun on the main thread, by outcome (answered there, or over_budget and answered by a query worker).",
      labelNames: ["outcome"],
      registers,
    });
    this.tailsActive = new Gauge({
      name: "sieve_querier_tail_active",
      help: "Tails (WebSocket) open now.",
      registers,
    });
    this.tailsClosed = new Counter({
      name: "sieve_querier_tail_closed_total",
      help: "Tails the server ended, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.tailDroppedLines = new Counter({
      name: "sieve_querier_tail_dropped_lines_total",
      help: "Tail lines dropped because the client did not read them in time.",
      registers,
    });
  }
}
