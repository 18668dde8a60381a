export type {
  OutgoingRecord,
  ConsumedRecord,
  QueueWriter,
  ConsumedBatch,
  PartitionListener,
  QueueConsumer,
  QueuePosition,
  DeliveryFailure,
  DeliveryStage,
} from "./queue.js";
export { QueueError, QUEUE_ERRORS } from "./errors.js";
export type { QueueErrorCode } from "./errors.js";
export { openWal, WalWriter, WalConsumer } from "./wal/wal.js";
export type { LocalWal, WalOptions } from "./wal/wal.js";
export type { WalStats } from "./wal/partition.js";
export { KafkaQueueWriter } from "./kafka/writer.js";
export type { KafkaWriterOptions } from "./kafka/writer.js";
export { KafkaQueueConsumer } from "./kafka/consumer.js";
export type { KafkaConsumerOptions } from "./kafka/consumer.js";
export type { KafkaQueueOptions } from "./kafka/options.js";
