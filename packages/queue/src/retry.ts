/**
 * A consumer's delivery retries: every failure told to its listener, each recovery once.
 * The retry itself (which errors, what backoff) is `@sieve/kit`'s, shared with the ingester.
 */
import { retryRetriable } from "@sieve/kit";
import type { RetryOptions } from "@sieve/kit";
import type { DeliveryFailure, DeliveryStage, PartitionListener } from "./queue.js";

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
