export {
  STORAGE_ERRORS,
  StorageError,
  isNotFound,
  isPreconditionFailed,
  isStoreFailure,
} from "./errors.js";
export type { StorageErrorCode } from "./errors.js";
export { MAX_KEY_BYTES, MAX_SEGMENT_BYTES, TEMP_PREFIX, validateKey } from "./keys.js";
export type {
  CallOptions,
  ListedObject,
  ObjectInfo,
  ObjectTail,
  ObjectStore,
  TaggedObject,
  WriteCondition,
} from "./store.js";
export { FsObjectStore, type FsObjectStoreOptions } from "./fs.js";
export { S3ObjectStore, S3_DEFAULTS } from "./s3.js";
export type { S3ObjectStoreConfig } from "./s3.js";
export { openStore } from "./open.js";
export type { StoreConfig } from "./open.js";
export { countingWrites, writeCounter, writesSoFar } from "./changes.js";
