/**
 * Every way the chunk code can refuse its input, as one table: the code is what callers
 * switch on, the text is the start of the message. Adding a code without a message does
 * not compile.
 */
export const CHUNK_ERRORS = {
  invalid_entry: "invalid chunk entry",
  invalid_options: "invalid chunk options",
  empty_chunk: "a chunk needs at least one entry",
  truncated: "encoded chunk is truncated",
  bad_magic: "not a Sieve chunk",
  unsupported_version: "unsupported chunk format version",
  unsupported_codec: "unsupported chunk compression codec",
  bad_checksum: "chunk checksum mismatch",
  too_large: "chunk section exceeds its size limit",
  corrupt: "encoded chunk is inconsistent",
} as const;

/** A code of {@link CHUNK_ERRORS}. */
export type ChunkErrorCode = keyof typeof CHUNK_ERRORS;

/** The one error type of this package, for bad entries and for damaged encoded chunks. */
export class ChunkError extends Error {
  override readonly name = "ChunkError";

  constructor(
    readonly code: ChunkErrorCode,
    detail?: string,
  ) {
    super(detail === undefined ? CHUNK_ERRORS[code] : `${CHUNK_ERRORS[code]}: ${detail}`);
  }
}
