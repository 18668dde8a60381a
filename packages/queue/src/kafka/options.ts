/** Options and the client factory shared by the Kafka writer and consumer. */
import { Kafka, logLevel as LogLevel } from "kafkajs";
import type { logLevel } from "kafkajs";
import { QueueError } from "../errors.js";

/** Where the queue lives in Kafka. */
export interface KafkaQueueOptions {
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: readonly string[];
  readonly topic: string;
  /** Partition count of the topic; the writer creates the topic with it if missing. */
  readonly partitions: number;
  /** Client id sent to the brokers. Default `sieve`. */
  readonly clientId?: string;
  /** kafkajs log level. Default ERROR (kafkajs logs every rebalance at INFO). */
  readonly logLevel?: logLevel;
}

/** Validates the shared options and builds the kafkajs client. */
export function kafkaClient(options: KafkaQueueOptions): Kafka {
  if (options.brokers.length === 0) throw new QueueError("invalid_options", "no Kafka brokers");
  // Kafka's legal topic names: up to 249 of [a-zA-Z0-9._-].
  if (!/^[a-zA-Z0-9._-]{1,249}$/.test(options.topic)) {
    throw new QueueError("invalid_options", `invalid topic name ${JSON.stringify(options.topic)}`);
  }
  if (
    !Number.isSafeInteger(options.partitions) ||
    options.partitions < 1 ||
    options.partitions > 10_000
  ) {
    throw new QueueError("invalid_options", "partitions must be 1..10000");
  }
  return new Kafka({
    clientId: options.clientId ?? "sieve",
    brokers: [...options.brokers],
    logLevel: options.logLevel ?? LogLevel.ERROR,
  });
}

/** Wraps a kafkajs failure in a retriable {@link QueueError}. */
export function kafkaError(what: string, cause: unknown): QueueError {
  if (cause instanceof QueueError) return cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  return new QueueError("kafka_unavailable", `${what}: ${message}`, { cause });
}
