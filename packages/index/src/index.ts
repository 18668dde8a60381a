/**
 * The index side of Sieve's storage: the structured-metadata tokenizer and the per-series
 * bloom builder the ingester fills, bloom blocks (many series' blooms in one object), index
 * segments (a tenant's series and chunk refs per day) and the reader a querier merges them
 * with. Every format is versioned and checksummed; see docs/formats.md.
 */
export {
  ALL_METADATA_TOKENS,
  CHUNK_PREFIX_BYTES,
  chunkKeyHigh,
  chunkKeyLow,
  writeChunkPrefix,
  lineNgrams,
  literalNgrams,
} from "./tokens.js";
export type { ChunkIdentity, MetadataPair, MetadataTokens, NgramOptions } from "./tokens.js";
export { SeriesBloomBuilder, MISSING_REASONS } from "./builder.js";
export type {
  SeriesBloomOptions,
  BloomLayout,
  CoveredChunk,
  MissingReason,
  SeriesBloom,
  SeriesFilter,
  BuilderStats,
} from "./builder.js";
export { bloomMayContain, chunkMayContain, chunkMayContainToken } from "./bloomtest.js";
export type { TestableFilter } from "./bloomtest.js";
export {
  BLOOM_BLOCK_FOOTER_BYTES,
  encodeBloomBlock,
  decodeBloomBlock,
  decodeBloomBlockFooter,
  decodeBloomBlockIndex,
  decodeBloomRecord,
  readSeriesBloom,
  BloomBlockReader,
} from "./bloomblock.js";
export type {
  BloomBlockInput,
  BloomBlockEntry,
  EncodedBloomBlock,
  BloomBlockFooter,
  DecodedBloomBlock,
  BloomBlockStore,
  BloomRecord,
  BloomRecordLocation,
  SeriesBloomResult,
} from "./bloomblock.js";
export {
  dayOf,
  dayString,
  segmentKey,
  segmentDayPrefix,
  segmentChunkRef,
  newSegmentId,
  encodeSegment,
  decodeSegment,
} from "./segment.js";
export type { BloomLocation, SegmentChunk, SegmentSeries, IndexSegment } from "./segment.js";
export {
  indexSegment,
  listSegments,
  mergeIndexed,
  mergeSegments,
  readIndex,
  segmentsForFlush,
} from "./reader.js";
export type { SegmentStore, IndexedChunk, IndexedSeries } from "./reader.js";
export { IndexError, INDEX_ERRORS } from "./errors.js";
export type { IndexErrorCode } from "./errors.js";
export {
  DEFAULT_VOLUME_LIMIT,
  MAX_VOLUME_BUCKETS,
  VolumeAccumulator,
  VolumeCellsError,
  VolumeLimitError,
  bucketFactor,
  volumeBuckets,
  volumeMaxSeriesMessage,
} from "./volume.js";
export type { VolumeAggregateBy, VolumeBucket, VolumeEntry, VolumeSpec } from "./volume.js";
export {
  DELETE_REQUEST_ID,
  PROCESSED_FILTER_MS,
  decodeDeleteRequest,
  deleteRequestIdOf,
  deleteRequestKey,
  deleteRequestRange,
  deleteRequestsPrefix,
  encodeDeleteRequest,
  filtersQueries,
  readDeleteRequests,
} from "./deletes.js";
export type { DeleteRequestRecord, DeleteRequestStatus, DeleteRequestStore } from "./deletes.js";
