/**
 * The deletion metrics, Loki's names under `sieve_` (`loki_compactor_delete_requests_*`,
 * `loki_compactor_deleted_lines`): requests received and processed, lines deleted,
 * failures, objects removed and bytes reclaimed, and the last successful run.
 */
import { Counter, Gauge, type Registry } from "prom-client";

/** The deletion metrics, registered once per registry. */
export class DeletionMetrics {
  readonly requestsReceived: Counter<"user">;
  readonly requestsProcessed: Counter<"user">;
  readonly deletedLines: Counter<"user">;
  readonly processingFails: Counter;
  readonly chunksRewritten: Counter;
  readonly objectsDeleted: Counter<"kind">;
  readonly bytesReclaimed: Counter;
  readonly pendingRequests: Gauge;
  readonly oldestPendingAgeSeconds: Gauge;
  readonly lastSuccessfulRun: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requestsReceived = new Counter({
      name: "sieve_compactor_delete_requests_received_total",
      help: "Delete requests received, per tenant (Loki's loki_compactor_delete_requests_received_total).",
      labelNames: ["user"],
      registers,
    });
    this.requestsProcessed = new Counter({
      name: "sieve_compactor_delete_requests_processed_total",
      help: "Delete requests processed, per tenant.",
      labelNames: ["user"],
      registers,
    });
    this.deletedLines = new Counter({
      name: "sieve_compactor_deleted_lines",
      help: "Lines removed from chunks by delete requests, per tenant (Loki's loki_compactor_deleted_lines).",
      labelNames: ["user"],
      registers,
    });
    this.processingFails = new Counter({
      name: "sieve_compactor_delete_processing_fails_total",
      help: "Runs of delete processing that failed (retried at the next run).",
      registers,
    });
    this.chunksRewritten = new Counter({
      name: "sieve_compactor_delete_chunks_rewritten_total",
      help: "Chunks rewritten without deleted lines (a chunk that lost every line is dropped instead).",
      registers,
    });
    this.objectsDeleted = new Counter({
      name: "sieve_compactor_delete_objects_deleted_total",
      help: "Objects removed by delete processing, by kind (chunk, segment).",
      labelNames: ["kind"],
      registers,
    });
    this.bytesReclaimed = new Counter({
      name: "sieve_compactor_delete_bytes_reclaimed_total",
      help: "Bytes of the old chunks removed, less the bytes of their rewrites.",
      registers,
    });
    this.pendingRequests = new Gauge({
      name: "sieve_compactor_pending_delete_requests_count",
      help: "Delete requests not yet processed (Loki's loki_compactor_pending_delete_requests_count).",
      registers,
    });
    this.oldestPendingAgeSeconds = new Gauge({
      name: "sieve_compactor_oldest_pending_delete_request_age_seconds",
      help: "Age of the oldest request not yet processed, past its cancel period.",
      registers,
    });
    this.lastSuccessfulRun = new Gauge({
      name: "sieve_compactor_delete_last_successful_run_timestamp_seconds",
      help: "Unix time of the last run of delete processing that completed.",
      registers,
    });
  }
}
