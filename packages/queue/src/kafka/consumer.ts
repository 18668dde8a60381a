/**
 * The ingester's side of the queue on Kafka: a member of a consumer group, so each
 * partition has one owner, with automatic commits off; the ingester commits an offset
 * only once what lies below it is flushed. Where nothing was committed, it starts at the
 * earliest record.
 *
 * Ownership changes follow Kafka's eager protocol: when a rebalance starts, every owned
 * partition is revoked (the ingester flushes and commits them), and after the group is
 * joined again the new assignment is announced. kafkajs has no hook that holds the rejoin
 * until revocation is done (unlike Java's ConsumerRebalanceListener), so: when the
 * rebalance is noticed right after a batch (the heartbeat that follows it fails), the
 * revocation runs before the error reaches kafkajs and so before the rejoin; when it is
 * noticed while idle (kafkajs emits REBALANCING and rejoins at once), the revocation runs
 * alongside the rejoin, and a commit it makes after the group moved on is refused by the
 * broker. Either way no batch of the new assignment is delivered before the revocation
 * and the assignment callbacks complete, and nothing is lost: the new owner starts from
 * the last commit that succeeded (the ingester drops the duplicates this can replay).
 * A member that was dropped from the group (it missed its session timeout: a pause, a
 * frozen VM) rejoins under a new member id without any REBALANCING event; its partitions
 * may have had another owner meanwhile, so every one of them is revoked and, if assigned
 * again, announced as newly assigned (the ingester claims it again, see its ownership.ts).
 *
 * A failing `assigned` or handler is retried with backoff and jitter while its error is
 * retriable and the partition is still owned; the partitions' batches wait meanwhile, so
 * none is delivered to an ingester that has not taken the partition on. A non-retriable
 * failure halts the partition (paused in kafkajs, nothing resolved) until it is assigned
 * again. Every failure is told to the listener's `failed`.
 */
import type { Batch, Consumer } from "kafkajs";
import { QueueError } from "../errors.js";
import type {
  ConsumedBatch,
  ConsumedRecord,
  DeliveryFailure,
  DeliveryStage,
  PartitionListener,
  QueueConsumer,
  QueuePosition,
} from "../queue.js";
import { DeliveryReporter } from "../retry.js";
import { kafkaClient, kafkaError } from "./options.js";
import type { KafkaQueueOptions } from "./options.js";

/** Options of {@link KafkaQueueConsumer}. */
export interface KafkaConsumerOptions extends KafkaQueueOptions {
  /** Consumer group: one owner per partition among its members. */
  readonly groupId: string;
  /** Longest a fetch waits for new records; bounds how soon an idle member sees a rebalance. Default 500. */
  readonly maxWaitTimeMs?: number;
  /** A member that misses heartbeats this long is dropped from the group. Default 30000. */
  readonly sessionTimeoutMs?: number;
  /** Heartbeat period. Default 3000. */
  readonly heartbeatIntervalMs?: number;
  /** Partitions processed at once by one member. Default: all of them. */
  readonly partitionsConsumedConcurrently?: number;
  /** First pause before a failed handler or `assigned` is retried (doubling, with jitter). Default 100. */
  readonly retryBackoffMs?: number;
  /** Longest pause between retries. Default 5000 (well under the session timeout). */
  readonly maxRetryBackoffMs?: number;
}

/** kafkajs' own test for "the group is rebalancing" (consumer/runner.js isRebalancing). */
function isRebalancing(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return (
    type === "REBALANCE_IN_PROGRESS" ||
    type === "NOT_COORDINATOR_FOR_GROUP" ||
    type === "ILLEGAL_GENERATION"
  );
}

/** A {@link QueueConsumer} reading a Kafka topic as a member of a consumer group. */
export class KafkaQueueConsumer implements QueueConsumer {
  private readonly consumer: Consumer;
  private listener: PartitionListener | undefined;
  private readonly owned = new Set<number>();
  /** The member id of the last group join: a new one means the group dropped this member. */
  private memberId: string | undefined;
  /** Listener calls, in order; batches wait for it. */
  private ownership: Promise<void> = Promise.resolve();
  private running = false;
  private inFlight = 0;
  private idle: (() => void) | undefined;
  private readonly removeListeners: (() => void)[] = [];
  /** Owned partitions whose delivery stopped on a non-retriable error, until assigned again. */
  private readonly halted = new Set<number>();
  private readonly delivery = new DeliveryReporter(() => this.listener);
  private readonly abort = new AbortController();

  constructor(private readonly options: KafkaConsumerOptions) {
    if (options.groupId.length === 0) throw new QueueError("invalid_options", "empty groupId");
    this.consumer = kafkaClient(options).consumer({
      groupId: options.groupId,
      maxWaitTimeInMs: options.maxWaitTimeMs ?? 500,
      sessionTimeout: options.sessionTimeoutMs ?? 30_000,
      heartbeatInterval: options.heartbeatIntervalMs ?? 3000,
      allowAutoTopicCreation: false,
    });
  }

  /** Partitions this member owns now (after its last assignment). */
  get assignment(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  async start(
    handler: (batch: ConsumedBatch) => Promise<void>,
    listener?: PartitionListener,
  ): Promise<void> {
    if (this.running) throw new QueueError("invalid_options", "consumer already started");
    this.running = true;
    this.listener = listener;
    const { GROUP_JOIN, REBALANCING } = this.consumer.events;
    this.removeListeners.push(
      this.consumer.on(REBALANCING, () => {
        this.revokeAll();
      }),
      this.consumer.on(GROUP_JOIN, (event) => {
        const { memberId, memberAssignment } = event.payload;
        // Dropped and rejoined: nothing owned before is known to have stayed ours.
        if (this.memberId !== undefined && memberId !== this.memberId) this.revokeAll();
        this.memberId = memberId;
        this.reassign(memberAssignment[this.options.topic] ?? []);
      }),
    );
    try {
      await this.consumer.connect();
      await this.consumer.subscribe({ topics: [this.options.topic], fromBeginning: true });
      await this.consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently:
          this.options.partitionsConsumedConcurrently ?? this.options.partitions,
        eachBatch: async (payload) => {
          const { batch } = payload;
          await this.ownership;
          if (
            !this.isRunning() ||
            !payload.isRunning() ||
            payload.isStale() ||
            !this.owned.has(batch.partition)
          ) {
            return;
          }
          if (this.halted.has(batch.partition)) {
            // Stopped on a non-retriable error: fetch no more of it until it is reassigned.
            payload.pause();
            return;
          }
          if (batch.isEmpty()) return;
          const partition = batch.partition;
          // Set from the retry's callback (a rebalance), read after it.
          const membership = { lost: false };
          this.inFlight++;
          try {
            await this.attempt(
              [partition],
              "handler",
              async (attempt) => {
                if (attempt > 1) {
                  // Keep the membership alive while retrying; a rebalance ends the retries.
                  await payload.heartbeat().catch((error: unknown) => {
                    if (isRebalancing(error)) membership.lost = true;
                  });
                }
                await handler(toConsumedBatch(batch));
              },
              () => !membership.lost && payload.isRunning() && !payload.isStale(),
            );
          } catch (error) {
            if (membership.lost) {
              this.revokeAll();
              await this.ownership;
              throw error;
            }
            if (!this.isRunning() || !payload.isRunning() || payload.isStale()) throw error;
            // Not retriable (reported by attempt): stop the partition, resolve nothing.
            this.halted.add(partition);
            payload.pause();
            return;
          } finally {
            if (--this.inFlight === 0) this.idle?.();
          }
          payload.resolveOffset(batch.lastOffset());
          try {
            await payload.heartbeat();
          } catch (error) {
            if (isRebalancing(error)) {
              // Revoke now, while kafkajs has not yet rejoined the group.
              this.revokeAll();
              await this.ownership;
            }
            throw error;
          }
        },
      });
    } catch (error) {
      this.running = false;
      throw kafkaError("consumer start", error);
    }
  }

  private revokeAll(): void {
    if (this.owned.size === 0) return;
    const lost = this.assignment;
    this.owned.clear();
    this.enqueue("revoked", lost);
  }

  private reassign(partitions: readonly number[]): void {
    const next = new Set(partitions);
    const lost = [...this.owned].filter((p) => !next.has(p)).sort((a, b) => a - b);
    const gained = [...next].filter((p) => !this.owned.has(p)).sort((a, b) => a - b);
    this.owned.clear();
    for (const p of next) this.owned.add(p);
    // A partition assigned again starts over: a halted one is resumed.
    const resumed = gained.filter((p) => this.halted.delete(p));
    if (resumed.length > 0) {
      this.consumer.resume([{ topic: this.options.topic, partitions: resumed }]);
    }
    if (lost.length > 0) this.enqueue("revoked", lost);
    if (gained.length > 0) this.enqueue("assigned", gained);
  }

  /**
   * Queues a listener call after the previous ones (batches wait for the queue). `assigned`
   * is retried while retriable and the partitions are still owned; if it fails for good,
   * its partitions are halted (their batches are never handed to an ingester that has not
   * taken them on). `revoked` is not retried: the partitions are gone either way.
   */
  private enqueue(stage: "assigned" | "revoked", partitions: readonly number[]): void {
    const call = async (): Promise<void> => {
      const listener = this.listener;
      if (stage === "revoked") {
        try {
          await listener?.revoked?.(partitions);
        } catch (error) {
          for (const partition of partitions) {
            this.report({ partition, stage, error, attempt: 1, retrying: false });
          }
        }
        return;
      }
      if (listener?.assigned === undefined) return;
      try {
        await this.attempt(
          partitions,
          stage,
          () => listener.assigned?.(partitions) ?? Promise.resolve(),
          () => partitions.some((p) => this.owned.has(p)),
        );
      } catch {
        for (const p of partitions) if (this.owned.has(p)) this.halted.add(p);
      }
    };
    this.ownership = this.ownership.then(call);
  }

  /** Runs `call`, retrying while retriable and `more()`, reporting every failure. */
  private attempt(
    partitions: readonly number[],
    stage: DeliveryStage,
    call: (attempt: number) => Promise<void>,
    more: () => boolean,
  ): Promise<void> {
    return this.delivery.attempt(partitions, stage, call, {
      minBackoffMs: this.options.retryBackoffMs ?? 100,
      maxBackoffMs: this.options.maxRetryBackoffMs ?? 5000,
      signal: this.abort.signal,
      shouldRetry: () => this.isRunning() && more(),
    });
  }

  private report(failure: DeliveryFailure): void {
    this.delivery.report(failure);
  }

  async commit(partition: number, nextOffset: number): Promise<void> {
    if (!Number.isInteger(partition) || partition < 0 || partition >= this.options.partitions) {
      throw new QueueError(
        "invalid_partition",
        `${partition} not in 0..${this.options.partitions - 1}`,
      );
    }
    if (!Number.isSafeInteger(nextOffset) || nextOffset < 0) {
      throw new QueueError("invalid_offset", `commit ${nextOffset} to partition ${partition}`);
    }
    try {
      await this.consumer.commitOffsets([
        { topic: this.options.topic, partition, offset: String(nextOffset) },
      ]);
    } catch (error) {
      throw kafkaError(`commit ${this.options.topic}/${partition} at ${nextOffset}`, error);
    }
  }

  /**
   * The high watermarks and the group's committed offsets of the partitions owned now,
   * from an admin client of its own (a flush asks rarely: one connection per call rather
   * than one held for the process).
   */
  async positions(): Promise<ReadonlyMap<number, QueuePosition>> {
    const owned = this.assignment;
    if (owned.length === 0) return new Map();
    const { topic, groupId } = this.options;
    const admin = kafkaClient(this.options).admin();
    try {
      await admin.connect();
      const [ends, groups] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId, topics: [topic] }),
      ]);
      const committed = new Map<number, number>();
      for (const t of groups) {
        for (const p of t.partitions) committed.set(p.partition, Number(p.offset));
      }
      const positions = new Map<number, QueuePosition>();
      for (const o of ends) {
        if (!owned.includes(o.partition)) continue;
        // Nothing committed, or committed below what retention kept: it starts at the low.
        const at = Math.max(committed.get(o.partition) ?? -1, Number(o.low));
        positions.set(o.partition, { end: Number(o.high), committed: at });
      }
      return positions;
    } catch (error) {
      throw kafkaError(`positions in ${topic}`, error);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /** Read through a method: `running` changes while a batch awaits. */
  private isRunning(): boolean {
    return this.running;
  }

  /**
   * Stops delivering, waits for running handlers, revokes every owned partition while
   * still a member of the group (so the ingester's final commits count), then leaves
   * the group and disconnects.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.abort.abort(new QueueError("closed", "consumer stopped"));
    this.consumer.pause([{ topic: this.options.topic }]);
    if (this.inFlight > 0) {
      await new Promise<void>((resolve) => (this.idle = resolve));
      this.idle = undefined;
    }
    this.revokeAll();
    await this.ownership;
    await this.consumer.stop();
    await this.consumer.disconnect();
    for (const remove of this.removeListeners.splice(0)) remove();
  }
}

function toConsumedBatch(batch: Batch): ConsumedBatch {
  const partition = batch.partition;
  const records: ConsumedRecord[] = batch.messages.map((m) => ({
    partition,
    offset: Number(m.offset),
    key: m.key ?? Buffer.alloc(0),
    value: m.value ?? Buffer.alloc(0),
  }));
  return { partition, records };
}
