export type {
  OutgoingRecord,
  ConsumedRecord,
  QueueWriter,
  ConsumedBatch,
  PartitionListener,
  QueueConsumer,
} from "./queue.js";
