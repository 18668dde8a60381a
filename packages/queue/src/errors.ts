/**
 * Every way the queue can refuse a call or find its files wrong, as one table: the code is
 * what callers switch on, the text is the start of the message. `retriable` says whether
 * the same call may succeed later (the distributor answers 5xx and the client retries).
 */
export const QUEUE_ERRORS = {
  invalid_options: { message: "invalid queue options", retriable: false },
  invalid_partition: { message: "partition out of range", retriable: false },
  record_too_large: { message: "record larger than the configured maximum", retriable: false },
  invalid_offset: { message: "offset out of range", retriable: false },
  closed: { message: "queue is closed", retriable: false },
  locked: { message: "write-ahead log directory is in use by another process", retriable: false },
  partitions_mismatch: {
    message: "partition count differs from the one the queue was created with",
    retriable: false,
  },
  bad_magic: { message: "not a Sieve write-ahead log file", retriable: false },
  unsupported_version: { message: "unsupported write-ahead log format version", retriable: false },
  corrupt: { message: "write-ahead log is corrupt", retriable: false },
  write_failed: { message: "write-ahead log write failed", retriable: true },
  kafka_unavailable: { message: "kafka request failed", retriable: true },
  kafka_brokers_unset: {
    message:
      "KAFKA_BROKERS is not set: start Kafka with `sh scripts/kafka.sh start` and export KAFKA_BROKERS=127.0.0.1:9092",
    retriable: false,
  },
} as const satisfies Record<string, { message: string; retriable: boolean }>;

/** A code of {@link QUEUE_ERRORS}. */
export type QueueErrorCode = keyof typeof QUEUE_ERRORS;

/** The one error type the queue throws or rejects with. */
export class QueueError extends Error {
  override readonly name = "QueueError";
  /** Whether retrying the same call later may succeed. */
  readonly retriable: boolean;

  constructor(
    readonly code: QueueErrorCode,
    detail?: string,
    options?: { cause?: unknown },
  ) {
    const base = QUEUE_ERRORS[code].message;
    super(detail === undefined ? base : `${base}: ${detail}`, options);
    this.retriable = QUEUE_ERRORS[code].retriable;
  }
}
