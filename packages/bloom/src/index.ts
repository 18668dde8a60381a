/**
 * Bloom filters for Sieve, usable on their own: classic, partitioned, scalable and counting
 * filters and a static ribbon filter, hashed once per key with xxhash64, a limiter of distinct items per interval, a
 * filter shareable between worker threads, and one versioned, checksummed binary format.
 */
export {
  BloomFilter,
  SharedBloomFilter,
  optimalBits,
  hashesForBitsPerKey,
  MAX_BITS,
} from "./classic.js";
export type { BloomShape, SharedBloom } from "./classic.js";
export { PartitionedBloomFilter } from "./partitioned.js";
export type { PartitionedShape } from "./partitioned.js";
export { ScalableBloomFilter, SCALABLE_DEFAULTS } from "./scalable.js";
export type { ScalableOptions, ScalableParameters, AddResult } from "./scalable.js";
export { CountingBloomFilter, SATURATED } from "./counting.js";
export { RibbonFilter, RIBBON_MIN_RATE, RIBBON_WIDTH, ribbonLookup } from "./ribbon.js";
export type { RibbonShape } from "./ribbon.js";
export type { CountingShape } from "./counting.js";
export { Limiter } from "./limiter.js";
export type { LimiterOptions } from "./limiter.js";
export { serializeFilter, deserializeFilter, FORMAT_VERSION } from "./format.js";
export type { AnyFilter } from "./format.js";
export { BloomError, BLOOM_ERRORS } from "./errors.js";
export type { BloomErrorCode } from "./errors.js";
// hashKey and lastHash: hash a key once, then hand its halves to several filters (`*Hashed`).
export { xxhash64, hashKey, lastHash, mix32 } from "./hash.js";
export type { Key } from "./hash.js";
