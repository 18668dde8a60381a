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
  /** A conditional write's condition did not hold (another writer came first). */
  precondition_failed: "object changed: the write's condition does not hold",
  /** The caller's own signal ended the call (a cancelled query), not the store. */
  aborted: "object store request aborted",
} as const;

/** A code of {@link STORAGE_ERRORS}. */
export type StorageErrorCode = keyof typeof STORAGE_ERRORS;

/** The one error type both stores throw; `cause` holds the file system or S3 error, if any. */
export class StorageError extends Error {
  override readonly name = "StorageError";
  /**
   * True when the same call may succeed later (as kafkajs marks its errors): the store did
   * not answer within the call's deadline, refused or dropped the connection, or answered
   * 5xx or throttled. False for answers that will not change by retrying (a 403, a missing
   * bucket, a bad key), which a retry loop should give up on at once.
   */
  readonly retriable: boolean;

  constructor(
    readonly code: StorageErrorCode,
    detail?: string,
    options?: { cause?: unknown; retriable?: boolean },
  ) {
    super(
      detail === undefined ? STORAGE_ERRORS[code] : `${STORAGE_ERRORS[code]}: ${detail}`,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.retriable = options?.retriable ?? false;
  }
}

/**
 * Whether `err` is a {@link StorageError} with `code`. By name as well as by class: a
 * second copy of this module (a test importing the source beside the built package, a
 * bundled worker) has its own class.
 */
function hasStorageCode(err: unknown, code: StorageErrorCode): err is StorageError {
  if (err instanceof StorageError) return err.code === code;
  return (
    err instanceof Error &&
    err.name === "StorageError" &&
    (err as Partial<StorageError>).code === code
  );
}

/** True when `err` is a {@link StorageError} for a missing object. */
export function isNotFound(err: unknown): boolean {
  return hasStorageCode(err, "not_found");
}

/** True when `err` is a {@link StorageError} for a conditional write whose condition failed. */
export function isPreconditionFailed(err: unknown): boolean {
  return hasStorageCode(err, "precondition_failed");
}

/**
 * True when `err` says the store itself failed (down, frozen, erroring, misconfigured)
 * rather than the request: a `backend` {@link StorageError}. Readers answer 503 for it.
 */
export function isStoreFailure(err: unknown): err is StorageError {
  return hasStorageCode(err, "backend");
}
