/**
 * Every way a filter can refuse its input, as one table: the code is what callers switch on,
 * the text is the start of the message. Adding a code without a message does not compile.
 */
export const BLOOM_ERRORS = {
  invalid_parameters: "invalid filter parameters",
  truncated: "serialised filter is truncated",
  bad_magic: "not a serialised Sieve bloom filter",
  unsupported_version: "unsupported bloom filter format version",
  unknown_type: "unknown bloom filter type",
  bad_checksum: "bloom filter checksum mismatch",
  corrupt: "serialised bloom filter is inconsistent",
} as const;

/** A code of {@link BLOOM_ERRORS}. */
export type BloomErrorCode = keyof typeof BLOOM_ERRORS;

/** The one error type the library throws, for bad parameters and for bad serialised bytes. */
export class BloomError extends Error {
  override readonly name = "BloomError";

  constructor(
    readonly code: BloomErrorCode,
    detail?: string,
  ) {
    super(detail === undefined ? BLOOM_ERRORS[code] : `${BLOOM_ERRORS[code]}: ${detail}`);
  }
}
