export { chunkChecksum, chunkKey } from "./ref.js";
export type { ChunkRef } from "./ref.js";
export { CHUNK_ERRORS, ChunkError } from "./errors.js";
export type { ChunkErrorCode } from "./errors.js";
export type { Entry, EntryWithBytes, MetadataPair } from "./entry.js";
export type { BlockMeta, EntryTest } from "./block.js";
export { ChunkBuilder, encodeChunk } from "./builder.js";
export type { ChunkBuilderOptions, EncodedChunk } from "./builder.js";
export { ChunkReader, decodeChunk } from "./reader.js";
export type { SymbolFilter } from "./filter.js";
export type { DecodedChunk, ReadOptions } from "./reader.js";
export {
  DEFAULT_BLOCK_TARGET_BYTES,
  MAX_LINE_BYTES,
  VERSION as CHUNK_FORMAT_VERSION,
} from "./format.js";
