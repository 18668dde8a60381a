import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** What the compactor deletes: index segments, chunk objects, bloom blocks. */
export type ObjectKind = "segment" | "chunk" | "bloom";

/**
 * Why an object was deleted: merged into a new segment (`compaction`), its data expired
 * (`retention`), or nothing referenced it past the grace period (`orphan`).
 */
export type DeleteReason = "compaction" | "retention" | "orphan";

/** How a run ended. */
export type RunOutcome = "success" | "failure" | "lock_lost";

/** The compactor's Prometheus metrics (`sieve_compactor_*`). */
export class CompactorMetrics {
  readonly objectsDeleted: Counter<"kind" | "reason">;
  readonly bytesReclaimed: Counter<"kind" | "reason">;
  /** Segments merged away (inputs of a merge or a retention rewrite). */
  readonly segmentsCompacted: Counter;
  /** Segments written by merges and rewrites. */
  readonly segmentsWritten: Counter;
  /** Chunk index entries left out because their data expired. */
  readonly chunksExpired: Counter;
  readonly runs: Counter<"outcome">;
  readonly runDuration: Histogram<"outcome">;
  readonly lastSuccessfulRun: Gauge;
  readonly lockHeld: Gauge;
  readonly jobRuns: Counter<"job" | "outcome">;

  constructor(registry?: Registry) {
    const registers = registry === undefined ? [] : [registry];
    this.objectsDeleted = new Counter({
      name: "sieve_compactor_objects_deleted_total",
      help: "Objects deleted, by kind (segment, chunk, bloom) and reason (compaction, retention, orphan).",
      labelNames: ["kind", "reason"],
      registers,
    });
    this.bytesReclaimed = new Counter({
      name: "sieve_compactor_bytes_reclaimed_total",
      help: "Bytes of the objects deleted, by kind and reason.",
      labelNames: ["kind", "reason"],
      registers,
    });
    this.segmentsCompacted = new Counter({
      name: "sieve_compactor_segments_compacted_total",
      help: "Index segments merged into new ones (and then deleted).",
      registers,
    });
    this.segmentsWritten = new Counter({
      name: "sieve_compactor_segments_written_total",
      help: "Index segments written by merges and retention rewrites.",
      registers,
    });
    this.chunksExpired = new Counter({
      name: "sieve_compactor_chunks_expired_total",
      help: "Chunk index entries removed because the retention period of their stream passed.",
      registers,
    });
    this.runs = new Counter({
      name: "sieve_compactor_runs_total",
      help: "Compactor runs, by outcome (success, failure, lock_lost).",
      labelNames: ["outcome"],
      registers,
    });
    this.runDuration = new Histogram({
      name: "sieve_compactor_run_duration_seconds",
      help: "Duration of compactor runs, by outcome.",
      labelNames: ["outcome"],
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers,
    });
    this.lastSuccessfulRun = new Gauge({
      name: "sieve_compactor_last_successful_run_timestamp_seconds",
      help: "Unix time the last successful run ended.",
      registers,
    });
    this.lockHeld = new Gauge({
      name: "sieve_compactor_lock_held",
      help: "1 while this compactor holds the store's compactor lock, else 0.",
      registers,
    });
    this.jobRuns = new Counter({
      name: "sieve_compactor_job_runs_total",
      help: "Runs of the jobs plugged into the compactor (delete processing), by job and outcome.",
      labelNames: ["job", "outcome"],
      registers,
    });
  }

  /** Counts one deleted object. */
  deleted(kind: ObjectKind, reason: DeleteReason, bytes: number): void {
    this.objectsDeleted.inc({ kind, reason });
    this.bytesReclaimed.inc({ kind, reason }, bytes);
  }
}
