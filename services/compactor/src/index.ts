/**
 * The compactor (one per store, under a lock in the object store): index compaction,
 * retention, delete requests and garbage collection. See README.md.
 */
export {};
