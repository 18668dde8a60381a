/**
 * Every way an object store can refuse a request, as one table: the code is what callers
 * switch on, the text is the start of the message. Adding a code without a message does
 * not compile.
 */
export const STORAGE_ERRORS = {
  not_found: "object not found",
  invalid_key: "invalid object key",
  invalid_range: "invalid byte range",
  key_conflict: "object key conflicts with another key's path",
  invalid_config: "invalid object store configuration",
  backend: "object store request failed",
} as const;

/** A code of {@link STORAGE_ERRORS}. */
export type StorageErrorCode = keyof typeof STORAGE_ERRORS;

/** The one error type both stores throw; `cause` holds the file system or S3 error, if any. */
export class StorageError extends Error {
  override readonly name = "StorageError";

  constructor(
    readonly code: StorageErrorCode,
    detail?: string,
    options?: { cause?: unknown },
  ) {
    super(
      detail === undefined ? STORAGE_ERRORS[code] : `${STORAGE_ERRORS[code]}: ${detail}`,
      options,
    );
  }
}

/** True when `err` is a {@link StorageError} for a missing object. */
export function isNotFound(err: unknown): boolean {
  return err instanceof StorageError && err.code === "not_found";
}
