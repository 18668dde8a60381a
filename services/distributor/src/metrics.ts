import { Counter, Gauge, Histogram } from "prom-client";
import type { Registry } from "prom-client";

/** The distributor's Prometheus metrics, registered on the registry it is given. */
export class DistributorMetrics {
  /** Lines accepted into the queue, by tenant. */
  readonly receivedLines: Counter<"tenant">;
  /** Raw line bytes accepted into the queue, by tenant. */
  readonly receivedBytes: Counter<"tenant">;
  /** Lines refused, by tenant and reason (a snake_case reason of validation.ts). */
  readonly discardedLines: Counter<"tenant" | "reason">;
  /** Bytes refused (line plus structured metadata), by tenant and reason. */
  readonly discardedBytes: Counter<"tenant" | "reason">;
  /** Push request latency, by status code. */
  readonly requestDuration: Histogram<"status_code">;
  /** Time for the queue to accept a request's records durably, by outcome. */
  readonly queueWriteDuration: Histogram<"outcome">;
  /** Tenants holding limiter state (evicted when idle). */
  readonly tenants: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.receivedLines = new Counter({
      name: "sieve_distributor_lines_received_total",
      help: "Lines accepted into the queue.",
      labelNames: ["tenant"],
      registers,
    });
    this.receivedBytes = new Counter({
      name: "sieve_distributor_bytes_received_total",
      help: "Raw line bytes accepted into the queue.",
      labelNames: ["tenant"],
      registers,
    });
    this.discardedLines = new Counter({
      name: "sieve_discarded_lines_total",
      help: "Lines refused, by reason.",
      labelNames: ["tenant", "reason"],
      registers,
    });
    this.discardedBytes = new Counter({
      name: "sieve_discarded_bytes_total",
      help: "Bytes (line and structured metadata) refused, by reason.",
      labelNames: ["tenant", "reason"],
      registers,
    });
    this.requestDuration = new Histogram({
      name: "sieve_distributor_request_duration_seconds",
      help: "Push request latency.",
      labelNames: ["status_code"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.queueWriteDuration = new Histogram({
      name: "sieve_queue_write_duration_seconds",
      help: "Time for the queue to accept a push's records durably.",
      labelNames: ["outcome"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.tenants = new Gauge({
      name: "sieve_distributor_tenants",
      help: "Tenants holding limiter state in this distributor.",
      registers,
    });
  }
}
