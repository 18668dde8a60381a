/**
 * Retrying what may succeed later, and only that: one classification of errors and one
 * backoff (p-retry's exponential backoff with jitter) shared by the queue consumers and
 * the ingester, so a programming error is reported once instead of retried forever.
 */
import pRetry from "p-retry";
import type { DeliveryFailure, DeliveryStage, PartitionListener } from "./queue.js";

/** Errors of the JavaScript engine: a bug or a malformed value, never fixed by waiting. */
const PROGRAMMING_ERRORS = [TypeError, RangeError, SyntaxError, ReferenceError, EvalError];

/**
 * Whether retrying the call that threw `error` may succeed. An error that says so itself
 * (`retriable`, as QueueError and kafkajs' errors do) decides; engine errors (TypeError,
 * RangeError, …) are bugs or malformed data and are not retriable; anything else (I/O,
 * network, object store) is, as a failure of something outside this process.
 */
export function isRetriable(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const own = (error as { retriable?: unknown }).retriable;
  if (typeof own === "boolean") return own;
  return !PROGRAMMING_ERRORS.some((type) => error instanceof type);
}

/** Options of {@link retryRetriable}. */
export interface RetryOptions {
  /** First pause; each next one doubles, times a random factor in [1, 2) (jitter). */
  readonly minBackoffMs: number;
  /** Longest pause. */
  readonly maxBackoffMs: number;
  /** Stops retrying: the call rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Extra condition for another attempt (e.g. "still running"), checked after each failure. */
  readonly shouldRetry?: () => boolean;
  /**
   * Told of every failed attempt, before the pause; `retrying` says whether another
   * attempt follows (false: the call rejects with `error`).
   */
  readonly onFailure?: (error: unknown, attempt: number, retrying: boolean) => void;
}

/**
 * Runs `call` until it resolves, retrying failures that {@link isRetriable} accepts with
 * exponential backoff and jitter, without an attempt limit; rejects with the first
 * non-retriable failure (or when `shouldRetry` says stop, or on abort).
 */
export function retryRetriable<T>(
  call: (attempt: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const more = (error: unknown): boolean =>
    isRetriable(error) && (options.shouldRetry?.() ?? true) && options.signal?.aborted !== true;
  return pRetry(call, {
    retries: Number.POSITIVE_INFINITY,
    factor: 2,
    minTimeout: options.minBackoffMs,
    maxTimeout: options.maxBackoffMs,
    randomize: true,
    unref: true,
    ...(options.signal !== undefined && { signal: options.signal }),
    onFailedAttempt: ({ error, attemptNumber }) => {
      // Stopping is not a failure of the call (it may even have succeeded just before).
      if (options.signal?.aborted === true) return;
      options.onFailure?.(error, attemptNumber, more(error));
    },
    shouldRetry: ({ error }) => more(error),
  });
}

/**
 * A consumer's account of its partitions' delivery: every failure is told (`failed`), and
 * the first success after one (`recovered`); {@link attempt} retries a delivery step with
 * {@link retryRetriable}. One for the write-ahead log and Kafka consumers alike.
 */
export class DeliveryReporter {
  /** Partitions whose last attempt failed, so the next success is told as `recovered`. */
  private readonly failing = new Set<number>();

  constructor(
    /** Where failures and recoveries go (the consumer's current listener, read each time). */
    private readonly listener: () => Pick<PartitionListener, "failed" | "recovered"> | undefined,
    /** Told of each failure too (e.g. the WAL's `onError` option). */
    private readonly onFailure?: (failure: DeliveryFailure) => void,
  ) {}

  /** Tells of one failed attempt. */
  report(failure: DeliveryFailure): void {
    this.failing.add(failure.partition);
    this.onFailure?.(failure);
    this.listener()?.failed?.(failure);
  }

  /**
   * Runs `call` for `partitions`, retrying while it is retriable and `retry` allows
   * (backoff, abort and condition), telling every failure; then tells the recoveries.
   */
  async attempt(
    partitions: readonly number[],
    stage: DeliveryStage,
    call: (attempt: number) => Promise<void>,
    retry: Omit<RetryOptions, "onFailure">,
  ): Promise<void> {
    await retryRetriable(call, {
      ...retry,
      onFailure: (error, attempt, retrying) => {
        for (const partition of partitions) {
          this.report({ partition, stage, error, attempt, retrying });
        }
      },
    });
    for (const partition of partitions) {
      if (this.failing.delete(partition)) this.listener()?.recovered?.(partition);
    }
  }
}
