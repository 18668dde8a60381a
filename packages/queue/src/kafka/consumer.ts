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
 */
import type { Batch, Consumer } from "kafkajs";
import { QueueError } from "../errors.js";
import type { ConsumedBatch, ConsumedRecord, PartitionListener, QueueConsumer } from "../queue.js";
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
  /** Listener calls, in order; batches wait for it. */
  private ownership: Promise<void> = Promise.resolve();
  private running = false;
  private inFlight = 0;
  private idle: (() => void) | undefined;
  private readonly removeListeners: (() => void)[] = [];

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
        this.reassign(event.payload.memberAssignment[this.options.topic] ?? []);
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
          if (batch.isEmpty()) return;
          this.inFlight++;
          try {
            await handler(toConsumedBatch(batch));
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
    this.enqueue(() => this.listener?.revoked?.(lost));
  }

  private reassign(partitions: readonly number[]): void {
    const next = new Set(partitions);
    const lost = [...this.owned].filter((p) => !next.has(p)).sort((a, b) => a - b);
    const gained = [...next].filter((p) => !this.owned.has(p)).sort((a, b) => a - b);
    this.owned.clear();
    for (const p of next) this.owned.add(p);
    if (lost.length > 0) this.enqueue(() => this.listener?.revoked?.(lost));
    if (gained.length > 0) this.enqueue(() => this.listener?.assigned?.(gained));
  }

  private enqueue(call: () => Promise<void> | undefined): void {
    // A failing listener must not wedge delivery; kafkajs would not see the error anyway.
    this.ownership = this.ownership.then(call).catch(() => undefined);
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
