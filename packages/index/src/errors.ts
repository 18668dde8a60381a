/**
 * Every way the index package can refuse its input, as one table: the code is what callers
 * switch on (the gateway fails open on any of them), the text starts the message. Adding a
 * code without a message does not compile.
 */
export const INDEX_ERRORS = {
  invalid_argument: "invalid argument",
  truncated: "object is truncated",
  bad_magic: "not a Sieve object of the expected kind",
  unsupported_version: "unsupported format version",
  bad_checksum: "checksum mismatch",
  corrupt: "object is inconsistent",
  too_large: "object exceeds a size limit",
  wrong_series: "bloom record belongs to another series",
} as const;

/** A code of {@link INDEX_ERRORS}. */
export type IndexErrorCode = keyof typeof INDEX_ERRORS;

/** The one error type of `@sieve/index`: bad arguments and damaged segments or bloom blocks. */
export class IndexError extends Error {
  override readonly name = "IndexError";

  constructor(
    readonly code: IndexErrorCode,
    detail?: string,
  ) {
    super(detail === undefined ? INDEX_ERRORS[code] : `${INDEX_ERRORS[code]}: ${detail}`);
  }
}
