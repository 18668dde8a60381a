/** What {@link ObjectStore.head} tells about an object. */
export interface ObjectInfo {
  /** Size in bytes. */
  readonly size: number;
}

/** What {@link ObjectStore.getTail} read: the object's last bytes, and its size. */
export interface ObjectTail {
  /** The last `min(length, size)` bytes. */
  readonly data: Uint8Array;
  /** The whole object's size in bytes. */
  readonly size: number;
}

/** One object of {@link ObjectStore.listInfo}: its key, size and when it was last written. */
export interface ListedObject {
  readonly key: string;
  /** Size in bytes. */
  readonly size: number;
  /**
   * When the object was last written, Unix ms (S3's `LastModified`, whole seconds; the
   * file's mtime). The compactor's garbage collection ages unreferenced objects by it.
   */
  readonly lastModifiedMs: number;
}

/**
 * What a conditional write ({@link ObjectStore.putIf}) requires of the object under its key:
 * `ifNoneMatch: "*"`, that there is none (create only); `ifMatch`, that there is one and its
 * entity tag is this one (compare and swap). As S3's `If-None-Match` and `If-Match`.
 */
export type WriteCondition = { readonly ifNoneMatch: "*" } | { readonly ifMatch: string };

/** An object with its entity tag, read in one call. */
export interface TaggedObject {
  readonly data: Uint8Array;
  /**
   * Opaque; changes whenever different bytes are written under the key (S3's ETag, the MD5
   * of the bytes for a simple put; the file store uses the same). The same bytes written
   * again keep the tag: callers that swap on it put a counter or an owner in the object.
   */
  readonly etag: string;
}

/**
 * Per-call options of every {@link ObjectStore} method. Each call also has the store's own
 * deadline (S3: `readTimeoutMs` for reads, `writeTimeoutMs` for writes); the earlier of the
 * two ends it.
 */
export interface CallOptions {
  /** Ends the call early (a cancelled query): it fails with `aborted`. */
  readonly signal?: AbortSignal;
  /** This call's deadline in ms, instead of the store's default for its kind. */
  readonly timeoutMs?: number;
}

/**
 * The object store that chunks, index segments and bloom blocks live in: the local file
 * system (`FsObjectStore`) or S3 (`S3ObjectStore`). Both pass one contract test suite.
 *
 * Keys are validated by {@link validateKey} the same way in both, so a key that works on
 * the file system works on S3 and back. Objects are written whole and atomically: a
 * reader sees the old object or the new one, never a mix. A missing object is a
 * `StorageError` with code `not_found`. Every call carries a deadline (see
 * {@link CallOptions}): a store that is down or frozen fails the call with a retriable
 * `backend` error at the deadline, it never hangs.
 */
export interface ObjectStore {
  /** The whole object; `not_found` when it does not exist. */
  get(key: string, options?: CallOptions): Promise<Uint8Array>;
  /**
   * `length` bytes from `offset`, fewer when the object ends first (empty when `offset`
   * is exactly the size); `invalid_range` when `offset` is past the end.
   */
  getRange(key: string, offset: number, length: number, options?: CallOptions): Promise<Uint8Array>;
  /**
   * The last `length` bytes of the object (the whole object when it is shorter) and its
   * size, in one call (S3's suffix range, `bytes=-length`): what a reader that starts at
   * an object's end (a chunk's footer and symbols) needs without knowing its size.
   */
  getTail(key: string, length: number, options?: CallOptions): Promise<ObjectTail>;
  /** Size of the object; `not_found` when it does not exist. */
  head(key: string, options?: CallOptions): Promise<ObjectInfo>;
  /** Writes the object whole, replacing any object under the same key. */
  put(key: string, data: Uint8Array, options?: CallOptions): Promise<void>;
  /** The whole object and its entity tag; `not_found` when it does not exist. */
  getTagged(key: string, options?: CallOptions): Promise<TaggedObject>;
  /**
   * Writes the object only when `condition` holds at the moment of the write, atomically
   * with respect to other conditional writes of the key; else `precondition_failed` and
   * nothing changes. Returns the new entity tag. Locks and ownership records are built on
   * it (S3 and MinIO apply `If-None-Match`/`If-Match` server-side). A key written this way
   * should be written only this way: a plain {@link put} does not wait for the file
   * store's per-key lock. A write that fails for want of an answer may still have been
   * applied: read the object again before deciding it lost.
   */
  putIf(
    key: string,
    data: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions,
  ): Promise<string>;
  /** Every key that starts with `prefix` (a plain string prefix), in UTF-8 byte order. */
  list(prefix: string, options?: CallOptions): Promise<string[]>;
  /** As {@link list}, with each object's size and last-modified time. */
  listInfo(prefix: string, options?: CallOptions): Promise<ListedObject[]>;
  /**
   * The distinct `prefix` + segment + `/` that keys under `prefix` start with, where a `/`
   * follows `prefix` in them (S3's common prefixes for the delimiter `/`), in UTF-8 byte
   * order: what a store holds one level down without listing every key (the tenants, from
   * `""`).
   */
  listPrefixes(prefix: string, options?: CallOptions): Promise<string[]>;
  /** Removes the object; removing a missing object is not an error (as in S3). */
  delete(key: string, options?: CallOptions): Promise<void>;
}
