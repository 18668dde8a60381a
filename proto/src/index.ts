/**
 * Sieve's protobuf wire formats: Loki's push request (logproto, wire-compatible), the
 * versioned queue record written by distributors and read by ingesters, a bounded decoder
 * for the raw snappy blocks Loki clients send, and the internal APIs, each defined once
 * here with the TypeScript types both of its sides import: the bloom gateway's
 * (`ChunkFilter`) and the ingester's query API (`IngesterQuerier`).
 */
export { decodePushRequest, encodePushRequest, timestampNs } from "./push.js";
export type { PushRequest, PushStream, PushEntry, PushTimestamp, LabelPair } from "./push.js";
export {
  encodeQueueRecord,
  decodeQueueRecord,
  readQueueRecord,
  QueueEntryView,
} from "./queue-record.js";
export type { QueueRecord, QueueEntry, QueueRecordView } from "./queue-record.js";
export { snappyUncompress, snappyDeclaredLength } from "./snappy.js";
export { ProtoError, PROTO_ERRORS } from "./errors.js";
export type { ProtoErrorCode } from "./errors.js";
export {
  encodeFilterRequest,
  decodeFilterRequest,
  encodeFilterResponse,
  decodeFilterResponse,
} from "./gateway.js";
export type {
  ChunkFilter,
  ChunkVerdict,
  FilterRequest,
  FilterResponse,
  FilterSeries,
  FilterStats,
  DecodedFilterRequest,
} from "./gateway.js";
export {
  encodeQueryRequest,
  decodeQueryRequest,
  encodeQueryResponse,
  decodeQueryResponse,
  encodeSeriesRequest,
  decodeSeriesRequest,
  encodeSeriesResponse,
  decodeSeriesResponse,
  encodeTailRequest,
  decodeTailRequest,
  encodeVolumeRequest,
  decodeVolumeRequest,
  encodeVolumeResponse,
  decodeVolumeResponse,
  encodeStatsRequest,
  decodeStatsRequest,
  encodeStatsResponse,
  decodeStatsResponse,
  encodePatternsRequest,
  decodePatternsRequest,
  encodePatternsResponse,
  decodePatternsResponse,
  encodeSampleRequest,
  decodeSampleRequest,
  encodeSampleResponse,
  decodeSampleResponse,
  MAX_QUERY_DELETES,
} from "./ingester.js";
export type {
  IngesterCallOptions,
  IngesterDelete,
  IngesterEntry,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeries,
  IngesterSeriesRequest,
  IngesterStream,
  IngesterTail,
  IngesterTailer,
  IngesterTailRequest,
  IngesterTailSink,
  IngesterVolumeRequest,
  IngesterVolume,
  IngesterStatsRequest,
  IngesterStats,
  IngesterPatternsRequest,
  PatternSeries,
  IngesterSampleRequest,
  IngesterSamplePart,
  SampleChunkRef,
} from "./ingester.js";
export {
  decodePushRaw,
  encodeQueueRecordRaw,
  rawLineBytes,
  rawMetadataBytes,
  rawPairCount,
} from "./push-raw.js";
export type { RawPush, RawPushStream } from "./push-raw.js";
export {
  MAX_OTLP_VALUE_DEPTH,
  OtlpJsonError,
  decodeOtlpLogsJson,
  decodeOtlpLogsProtobuf,
  decodeOtlpLogsResponse,
  decodeOtlpStatus,
  encodeOtlpLogsJson,
  encodeOtlpLogsProtobuf,
  encodeOtlpStatus,
  encodeOtlpLogsResponse,
  otlpLogsResponseJson,
} from "./otlp.js";
export type {
  OtlpAttribute,
  OtlpLogRecord,
  OtlpLogs,
  OtlpPartialSuccess,
  OtlpResourceLogs,
  OtlpScopeLogs,
  OtlpValue,
} from "./otlp.js";
