import { Counter, Gauge, Histogram } from "prom-client";
import type { Registry } from "prom-client";
import type { FlushStream } from "./flush.js";
import type { FlushReason } from "./head.js";

/** The ingester's Prometheus metrics, registered on the registry it is given. */
export class IngesterMetrics {
  /** Chunks flushed, by reason (a key of FLUSH_REASONS). */
  readonly chunksFlushed: Counter<"reason">;
  /** Bytes of flushed chunk objects, by reason. */
  readonly chunkBytes: Counter<"reason">;
  /** Raw (uncompressed) line bytes of flushed chunks. */
  readonly chunkRawBytes: Counter;
  /** Entries in flushed chunks. */
  readonly chunkEntries: Counter;
  /** Bytes of bloom blocks written. */
  readonly bloomBytes: Counter;
  /** Series blooms recorded as missing, by reason (a key of MISSING_REASONS). */
  readonly bloomsMissing: Counter<"reason">;
  /** Tokens produced by entries (before the per-chunk dedupe). */
  readonly tokensAdded: Counter;
  /** Index segments written. */
  readonly segmentsWritten: Counter;
  /** Partition flushes (chunk objects → blooms → manifest → segments → commit), by outcome. */
  readonly flushDuration: Histogram<"outcome">;
  /** Flush attempts that failed and will be retried. */
  readonly flushFailures: Counter;
  /** Head chunks in memory (open, not yet cut). */
  readonly headsInMemory: Gauge;
  /** Cut chunks waiting for or in their flush. */
  readonly chunksFlushing: Gauge;
  readonly headBytes: Gauge;
  /** Records consumed, by partition. */
  readonly recordsConsumed: Counter;
  /** Entries appended to heads. */
  readonly entriesAppended: Counter;
  /** Entries dropped, by reason (`duplicate`, `invalid_entry`). */
  readonly entriesDropped: Counter<"reason">;
  /** Records dropped: undecodable (`corrupt_record`) or already flushed before a crash (`replayed`). */
  readonly recordsDropped: Counter<"reason">;
  /** Records consumed but not yet committed, by partition: next offset − committed offset. */
  readonly queueLag: Gauge<"partition">;
  /**
   * Flush manifests found at partition assignment, by outcome: `complete` (decided, its
   * records skipped on replay), `discarded` (undecided, its records replayed).
   */
  readonly manifestsRecovered: Counter<"outcome">;
  /**
   * Flushes refused because another ingester claimed the partition (ownership.ts), by
   * where: `decide` (the flush's decision was refused: nothing of it became visible) or
   * `commit` (a revocation's commit skipped, the partition already claimed).
   */
  readonly flushesFenced: Counter<"at">;
  /** Failed deliveries and flushes, by stage and reason (a key of FAILURE_REASONS). */
  readonly failures: Counter<"stage" | "reason">;
  /** Ingester queries, by outcome (`ok`, `timeout`, `canceled`, `error`). */
  readonly queries: Counter<"outcome">;
  /** What the streams' patterns hold (estimated bytes), measured against patternMemoryBytes. */
  readonly patternBytes: Gauge;
  /** Streams with patterns. */
  readonly patternStreams: Gauge;
  /** Streams whose patterns were dropped to keep within patternMemoryBytes. */
  readonly patternStreamsEvicted: Counter;
  /** Lines no pattern learned from, by reason (a key of `@sieve/drain`'s SKIP_REASONS). */
  readonly patternLinesSkipped: Counter<"reason">;

  constructor(registry: Registry) {
    const registers = [registry];
    this.chunksFlushed = new Counter({
      name: "sieve_ingester_chunks_flushed_total",
      help: "Chunks flushed, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.chunkBytes = new Counter({
      name: "sieve_ingester_chunk_bytes_total",
      help: "Bytes of flushed chunk objects, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.chunkRawBytes = new Counter({
      name: "sieve_ingester_chunk_uncompressed_bytes_total",
      help: "Uncompressed payload bytes of flushed chunks.",
      registers,
    });
    this.chunkEntries = new Counter({
      name: "sieve_ingester_chunk_entries_total",
      help: "Entries in flushed chunks.",
      registers,
    });
    this.bloomBytes = new Counter({
      name: "sieve_ingester_bloom_bytes_total",
      help: "Bytes of bloom blocks written.",
      registers,
    });
    this.bloomsMissing = new Counter({
      name: "sieve_ingester_blooms_missing_total",
      help: "Series blooms recorded as missing, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.tokensAdded = new Counter({
      name: "sieve_ingester_bloom_tokens_added_total",
      help: "Bloom tokens produced by entries.",
      registers,
    });
    this.segmentsWritten = new Counter({
      name: "sieve_ingester_index_segments_written_total",
      help: "Index segments written.",
      registers,
    });
    this.flushDuration = new Histogram({
      name: "sieve_ingester_flush_duration_seconds",
      help: "Time of one partition flush, from the first chunk write to the commit.",
      labelNames: ["outcome"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.flushFailures = new Counter({
      name: "sieve_ingester_flush_failures_total",
      help: "Flush attempts that failed and are retried.",
      registers,
    });
    this.headsInMemory = new Gauge({
      name: "sieve_ingester_heads_in_memory",
      help: "Open head chunks.",
      registers,
    });
    this.chunksFlushing = new Gauge({
      name: "sieve_ingester_chunks_flushing",
      help: "Cut chunks waiting for or in their flush.",
      registers,
    });
    this.headBytes = new Gauge({
      name: "sieve_ingester_head_bytes",
      help: "What the heads hold, as measured against memoryBudgetBytes (estimated bytes).",
      registers,
    });
    this.recordsConsumed = new Counter({
      name: "sieve_ingester_records_consumed_total",
      help: "Queue records consumed.",
      registers,
    });
    this.entriesAppended = new Counter({
      name: "sieve_ingester_entries_appended_total",
      help: "Entries appended to head chunks.",
      registers,
    });
    this.entriesDropped = new Counter({
      name: "sieve_ingester_entries_dropped_total",
      help: "Entries dropped, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.recordsDropped = new Counter({
      name: "sieve_ingester_records_dropped_total",
      help: "Queue records dropped, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.queueLag = new Gauge({
      name: "sieve_ingester_queue_lag_records",
      help: "Records consumed but not committed (held in memory), by partition.",
      labelNames: ["partition"],
      registers,
    });
    this.failures = new Counter({
      name: "sieve_ingester_failures_total",
      help: "Failed queue deliveries (assigned, revoked, read, handler) and flushes, by stage and reason.",
      labelNames: ["stage", "reason"],
      registers,
    });
    this.queries = new Counter({
      name: "sieve_ingester_queries_total",
      help: "Queries of unflushed data, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.manifestsRecovered = new Counter({
      name: "sieve_ingester_manifests_recovered_total",
      help: "Flush manifests found at partition assignment, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.flushesFenced = new Counter({
      name: "sieve_ingester_flushes_fenced_total",
      help: "Flushes refused because another ingester claimed the partition, by where.",
      labelNames: ["at"],
      registers,
    });
    this.patternBytes = new Gauge({
      name: "sieve_ingester_pattern_bytes",
      help: "What the streams' patterns hold, as measured against patternMemoryBytes (estimated bytes).",
      registers,
    });
    this.patternStreams = new Gauge({
      name: "sieve_ingester_pattern_streams",
      help: "Streams with patterns.",
      registers,
    });
    this.patternStreamsEvicted = new Counter({
      name: "sieve_ingester_pattern_streams_evicted_total",
      help: "Streams whose patterns were dropped to keep within patternMemoryBytes.",
      registers,
    });
    this.patternLinesSkipped = new Counter({
      name: "sieve_ingester_pattern_lines_skipped_total",
      help: "Lines no pattern learned from, by reason.",
      labelNames: ["reason"],
      registers,
    });
  }

  /**
   * Counts the chunks of a flush that succeeded (by reason), their bytes and entries, and
   * its missing blooms; returns the chunks per reason, for the flush's log line.
   */
  flushed(streams: readonly FlushStream[]): Partial<Record<FlushReason, number>> {
    const reasons: Partial<Record<FlushReason, number>> = {};
    for (const s of streams) {
      for (const c of s.chunks) {
        this.chunksFlushed.inc({ reason: c.reason });
        this.chunkBytes.inc({ reason: c.reason }, c.encoded.bytes.length);
        this.chunkRawBytes.inc(c.encoded.uncompressedBytes);
        this.chunkEntries.inc(c.encoded.entryCount);
        reasons[c.reason] = (reasons[c.reason] ?? 0) + 1;
      }
      if (s.bloom?.status === "missing") this.bloomsMissing.inc({ reason: s.bloom.reason });
      if (s.bloom === undefined) this.bloomsMissing.inc({ reason: "disabled" });
    }
    return reasons;
  }
}
