/**
 * The queue between distributors and ingesters, as both sides see it. Records are opaque
 * bytes (the distributor encodes them with `@sieve/proto`), keyed by stream fingerprint,
 * in numbered partitions; each partition is an ordered log with dense offsets.
 * Two implementations: a local write-ahead log (single process) and Kafka.
 */

/** A record to append. */
export interface OutgoingRecord {
  /** 0 ≤ partition < `partitions`; the distributor picks it from the fingerprint. */
  readonly partition: number;
  /** The stream fingerprint, 8 bytes big-endian; Kafka's message key. */
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/** A record read back, with its place in the partition. */
export interface ConsumedRecord {
  readonly partition: number;
  /** Offset of this record in its partition: dense, starting at 0, never reused. */
  readonly offset: number;
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/** The distributor's side. */
export interface QueueWriter {
  /** How many partitions records are spread over. */
  readonly partitions: number;
  /**
   * Appends records; resolves only when every one of them is durable (fsynced, or
   * acknowledged by all in-sync Kafka replicas). Rejects if any is not: the caller then
   * answers 5xx and the client retries (the ingester drops exact duplicates).
   */
  append(records: readonly OutgoingRecord[]): Promise<void>;
  close(): Promise<void>;
}

/** A batch of consecutive records of one partition, in offset order. */
export interface ConsumedBatch {
  readonly partition: number;
  readonly records: readonly ConsumedRecord[];
}

/** What a consumer tells the ingester about partition ownership (Kafka rebalances). */
export interface PartitionListener {
  /** Called before the first batch of newly owned partitions. */
  assigned?(partitions: readonly number[]): Promise<void>;
  /** Called before partitions are taken away: flush and commit them now. */
  revoked?(partitions: readonly number[]): Promise<void>;
}

/** The ingester's side. */
export interface QueueConsumer {
  /**
   * Starts delivering the records of the partitions this consumer owns, each from its
   * committed offset, in order within a partition; the next batch of a partition is
   * delivered only after `handler` resolves for the previous one. Resolves once running.
   */
  start(
    handler: (batch: ConsumedBatch) => Promise<void>,
    listener?: PartitionListener,
  ): Promise<void>;
  /**
   * Records that every record of `partition` below `nextOffset` is stored elsewhere and
   * need not be replayed; a restart resumes from the last committed offset.
   */
  commit(partition: number, nextOffset: number): Promise<void>;
  /** Stops delivering; resolves when no handler is running. */
  stop(): Promise<void>;
}
