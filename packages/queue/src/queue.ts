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

/** A partition's offsets in the queue. */
export interface QueuePosition {
  /** The offset the next record appended will get: every record below it was acknowledged. */
  readonly end: number;
  /** The committed offset: a consumer starts there; -1 when nothing was committed. */
  readonly committed: number;
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

/**
 * Where delivering a partition failed: its `assigned` or `revoked` callback, reading it,
 * or the handler.
 */
export type DeliveryStage = "assigned" | "revoked" | "read" | "handler";

/** A failed attempt to deliver a partition, as the consumer tells its listener. */
export interface DeliveryFailure {
  readonly partition: number;
  readonly stage: DeliveryStage;
  readonly error: unknown;
  /** 1 for the first failure of this call, then 2, 3, … */
  readonly attempt: number;
  /**
   * True: the same call is made again after a backoff with jitter, and no later batch of
   * the partition is delivered before it succeeds. False: the error is not retriable
   * (see `isRetriable`) and delivery of the partition has stopped until it is assigned
   * again (the consumer is restarted, or Kafka rebalances).
   */
  readonly retrying: boolean;
}

/** What a consumer tells the ingester about partition ownership (Kafka rebalances) and delivery. */
export interface PartitionListener {
  /**
   * Called before the first batch of newly owned partitions. A retriable failure is
   * retried (the partitions' batches wait); a non-retriable one stops their delivery.
   */
  assigned?(partitions: readonly number[]): Promise<void>;
  /** Called before partitions are taken away: flush and commit them now. */
  revoked?(partitions: readonly number[]): Promise<void>;
  /** Told of every failed delivery attempt (for logs, metrics and readiness). */
  failed?(failure: DeliveryFailure): void;
  /** Delivery of `partition` succeeded again after {@link failed} was told of a failure. */
  recovered?(partition: number): void;
}

/** The ingester's side. */
export interface QueueConsumer {
  /**
   * Starts delivering the records of the partitions this consumer owns, each from its
   * committed offset, in order within a partition; the next batch of a partition is
   * delivered only after `handler` resolves for the previous one; a batch whose handler
   * rejects is delivered again after a backoff with jitter while the error is retriable,
   * and the partition stops otherwise (the listener's `failed` is told either way).
   * Resolves once running.
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
  /**
   * Where each partition this consumer owns stands now: what a flush waits to be delivered
   * so that it covers everything acknowledged before it was asked for.
   */
  positions(): Promise<ReadonlyMap<number, QueuePosition>>;
  /** Stops delivering; resolves when no handler is running. */
  stop(): Promise<void>;
}
