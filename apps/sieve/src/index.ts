/** The `sieve` command's parts, for tests and for embedding Sieve in another program. */
export {
  checkTarget,
  COMPONENT_SCHEMAS,
  loadSieveConfig,
  readConfigFile,
  SieveConfigError,
  SIEVE_CONFIG_ERRORS,
  SIEVE_OPTIONS,
} from "./config.js";
export type {
  SieveConfig,
  StorageConfig,
  QueueConfig,
  ClusterConfig,
  SieveConfigSources,
} from "./config.js";
export { start, openStore, TARGETS } from "./targets.js";
export type { Target, Running, StartOptions } from "./targets.js";
