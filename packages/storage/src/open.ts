import { FsObjectStore, type FsObjectStoreOptions } from "./fs.js";
import { S3ObjectStore, type S3ObjectStoreConfig } from "./s3.js";
import type { ObjectStore } from "./store.js";

/**
 * Which object store to open, as plain data: it crosses thread boundaries (a query worker
 * opens its own store from it) and comes from the `storage` section of the configuration.
 */
export type StoreConfig =
  | { readonly backend: "filesystem"; readonly dir: string }
  | ({ readonly backend: "s3" } & Omit<S3ObjectStoreConfig, "credentials">);

/**
 * Opens the store `config` names (S3 credentials come from the SDK's standard chain);
 * `fs` applies to a filesystem store.
 */
export function openStore(config: StoreConfig, fs: FsObjectStoreOptions = {}): ObjectStore {
  if (config.backend === "filesystem") return new FsObjectStore(config.dir, fs);
  return new S3ObjectStore(config); // it reads the S3 options and ignores `backend`
}
