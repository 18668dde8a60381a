/**
 * A count of the writes one process makes to its store, shared between its threads: every
 * thread that writes (the ingest workers' flushes, the main thread's compactor and delete
 * API) wraps its store with {@link countingWrites}, and a reader that caches what it listed
 * (the query workers' index listings) keeps an answer only while the count is unchanged.
 * In `sieve all` every writer of the store is in the process, so a listing served from the
 * cache is the one the store would give; a process that shares its store with others (a
 * cluster role) has no count and lists every time.
 *
 * A write is counted once it settles, failed or not (a write that timed out may still
 * have landed): a reader that sees the count unchanged after a write has settled knows
 * nothing was written meanwhile.
 */
import type { CallOptions, ObjectStore, WriteCondition } from "./store.js";

/** A shared buffer counting writes, read with {@link writesSoFar}. */
export function writeCounter(): SharedArrayBuffer {
  return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
}

/** How many writes `counter` has counted (it wraps at 2^32: compare for equality only). */
export function writesSoFar(counter: SharedArrayBuffer): number {
  return Atomics.load(new Int32Array(counter), 0);
}

/** `store`, counting each write and delete in `counter` once it settles. */
export function countingWrites(store: ObjectStore, counter: SharedArrayBuffer): ObjectStore {
  const count = new Int32Array(counter);
  const counted = async <T>(write: Promise<T>): Promise<T> => {
    try {
      return await write;
    } finally {
      Atomics.add(count, 0, 1);
    }
  };
  return {
    get: (key, options) => store.get(key, options),
    getRange: (key, offset, length, options) => store.getRange(key, offset, length, options),
    getTail: (key, length, options) => store.getTail(key, length, options),
    head: (key, options) => store.head(key, options),
    getTagged: (key, options) => store.getTagged(key, options),
    list: (prefix, options) => store.list(prefix, options),
    listInfo: (prefix, options) => store.listInfo(prefix, options),
    listPrefixes: (prefix, options) => store.listPrefixes(prefix, options),
    put: (key: string, data: Uint8Array, options?: CallOptions) =>
      counted(store.put(key, data, options)),
    putIf: (key: string, data: Uint8Array, condition: WriteCondition, options?: CallOptions) =>
      counted(store.putIf(key, data, condition, options)),
    delete: (key: string, options?: CallOptions) => counted(store.delete(key, options)),
  };
}
