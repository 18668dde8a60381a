/**
 * The distributor's side of the queue on Kafka: an idempotent producer with acks=all, so
 * an append resolves only once every in-sync replica has the records, and a retry after
 * a lost response is not written twice. Appends that arrive while a send is in flight
 * are sent together by the next one, as the write-ahead log group-commits.
 */
import type { Admin, Message, Producer } from "kafkajs";
import { Partitioners } from "kafkajs";
import { QueueError } from "../errors.js";
import type { OutgoingRecord, QueueWriter } from "../queue.js";
import { kafkaClient, kafkaError } from "./options.js";
import type { KafkaQueueOptions } from "./options.js";

/** Options of {@link KafkaQueueWriter.connect}. Sizes in bytes. */
export interface KafkaWriterOptions extends KafkaQueueOptions {
  /** Replication factor used when the topic is created. Default 1 (single broker). */
  readonly replicationFactor?: number;
  /** Largest key + value accepted by `append`. Default 8 MiB. */
  readonly maxRecordBytes?: number;
  /** Appends are merged into one send until it holds this many bytes. Default 4 MiB. */
  readonly maxSendBytes?: number;
}

interface Pending {
  readonly messages: (Message & { partition: number })[];
  readonly bytes: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

const MAX_KEY_BYTES = 0xffff;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A {@link QueueWriter} producing to a Kafka topic. */
export class KafkaQueueWriter implements QueueWriter {
  private pending: Pending[] = [];
  private sending: Promise<void> | undefined;
  private closed = false;

  private constructor(
    private readonly producer: Producer,
    readonly topic: string,
    readonly partitions: number,
    private readonly maxRecordBytes: number,
    private readonly maxSendBytes: number,
  ) {}

  /**
   * Creates the topic if it is missing (failing with `partitions_mismatch` if it exists
   * with another partition count) and connects an idempotent producer.
   */
  static async connect(options: KafkaWriterOptions): Promise<KafkaQueueWriter> {
    const maxRecordBytes = options.maxRecordBytes ?? 8 * 1024 * 1024;
    const maxSendBytes = options.maxSendBytes ?? 4 * 1024 * 1024;
    if (!Number.isSafeInteger(maxRecordBytes) || maxRecordBytes < 1) {
      throw new QueueError("invalid_options", "maxRecordBytes must be positive");
    }
    if (!Number.isSafeInteger(maxSendBytes) || maxSendBytes < 1) {
      throw new QueueError("invalid_options", "maxSendBytes must be positive");
    }
    const kafka = kafkaClient(options);
    const admin = kafka.admin();
    try {
      await admin.connect();
      await ensureTopic(admin, options, Math.max(maxRecordBytes, maxSendBytes) + 64 * 1024);
    } catch (error) {
      throw kafkaError(`topic ${options.topic}`, error);
    } finally {
      await admin.disconnect();
    }
    const producer = kafka.producer({
      idempotent: true,
      // Idempotence keeps order only with one request in flight per connection in kafkajs.
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    try {
      await producer.connect();
    } catch (error) {
      throw kafkaError("producer connect", error);
    }
    return new KafkaQueueWriter(
      producer,
      options.topic,
      options.partitions,
      maxRecordBytes,
      maxSendBytes,
    );
  }

  /** Validates every record first, then resolves once all are acknowledged by all in-sync replicas. */
  append(records: readonly OutgoingRecord[]): Promise<void> {
    if (this.closed) return Promise.reject(new QueueError("closed"));
    const messages: Pending["messages"] = [];
    let bytes = 0;
    for (const record of records) {
      if (
        !Number.isInteger(record.partition) ||
        record.partition < 0 ||
        record.partition >= this.partitions
      ) {
        return Promise.reject(
          new QueueError(
            "invalid_partition",
            `${record.partition} not in 0..${this.partitions - 1}`,
          ),
        );
      }
      const size = record.key.length + record.value.length;
      if (record.key.length > MAX_KEY_BYTES || size > this.maxRecordBytes) {
        return Promise.reject(
          new QueueError("record_too_large", `${size} bytes, maximum ${this.maxRecordBytes}`),
        );
      }
      bytes += size;
      messages.push({
        partition: record.partition,
        key: asBuffer(record.key),
        value: asBuffer(record.value),
      });
    }
    if (messages.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.pending.push({ messages, bytes, resolve, reject });
      this.sending ??= this.sendLoop();
    });
  }

  private async sendLoop(): Promise<void> {
    // Let every append made in the current tick join the first send.
    await Promise.resolve();
    while (this.pending.length > 0) {
      let bytes = 0;
      let take = 0;
      while (
        take < this.pending.length &&
        (take === 0 || bytes + this.pending[take]!.bytes <= this.maxSendBytes)
      ) {
        bytes += this.pending[take]!.bytes;
        take++;
      }
      const batch = this.pending.splice(0, take);
      try {
        await this.producer.send({
          topic: this.topic,
          acks: -1,
          messages: batch.flatMap((p) => p.messages),
        });
        for (const p of batch) p.resolve();
      } catch (error) {
        const wrapped = kafkaError(`produce to ${this.topic}`, error);
        for (const p of batch) p.reject(wrapped);
      }
    }
    this.sending = undefined;
  }

  /** Refuses new appends, waits for in-flight ones and disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sending;
    await this.producer.disconnect();
  }
}

async function ensureTopic(
  admin: Admin,
  options: KafkaWriterOptions,
  maxMessageBytes: number,
): Promise<void> {
  // Resolves false when the topic exists (also when another writer just created it).
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      {
        topic: options.topic,
        numPartitions: options.partitions,
        replicationFactor: options.replicationFactor ?? 1,
        configEntries: [{ name: "max.message.bytes", value: String(maxMessageBytes) }],
      },
    ],
  });
  const metadata = await admin.fetchTopicMetadata({ topics: [options.topic] });
  const found = metadata.topics[0]?.partitions.length ?? 0;
  if (found !== options.partitions) {
    throw new QueueError(
      "partitions_mismatch",
      `topic ${options.topic} has ${found} partitions, configured ${options.partitions}`,
    );
  }
}
