/**
 * Every way `@sieve/proto` refuses its input, as one table: the code is what callers switch
 * on, the text is the start of the message.
 */
export const PROTO_ERRORS = {
  snappy_corrupt: "snappy block is corrupt",
  snappy_too_large: "snappy block decompresses past the limit",
  malformed_protobuf: "malformed protobuf message",
  too_many_messages: "push request holds too many messages",
  record_truncated: "queue record is truncated",
  record_bad_magic: "not a Sieve queue record",
  record_unsupported_version: "unsupported queue record version",
  record_bad_checksum: "queue record checksum mismatch",
  record_corrupt: "queue record body is inconsistent",
} as const;

/** A code of {@link PROTO_ERRORS}. */
export type ProtoErrorCode = keyof typeof PROTO_ERRORS;

/** The one error type the package throws for bad bytes. */
export class ProtoError extends Error {
  override readonly name = "ProtoError";

  constructor(
    readonly code: ProtoErrorCode,
    detail?: string,
  ) {
    super(detail === undefined ? PROTO_ERRORS[code] : `${PROTO_ERRORS[code]}: ${detail}`);
  }
}
