import { defineSchema, loadSection } from "@sieve/config";
import type { Env } from "@sieve/config";

/** The bloom gateway's configuration. Sizes in bytes, durations in milliseconds. */
export interface BloomGatewayConfig {
  /** Byte budget of the in-memory cache of bloom blocks (LRU). */
  readonly cacheMaxBytes: number;
  /**
   * Largest bloom block loaded and cached whole; a larger one (or one over a quarter of
   * `cacheMaxBytes`) is read one series record at a time, each record cached alone.
   */
  readonly maxBlockBytes: number;
  /** A bloom record larger than this is not read; its series fails open (`oversized_bloom`). */
  readonly maxBloomRecordBytes: number;
  /** Longest wait for one bloom record; past it the series fails open (`timeout`). */
  readonly readTimeoutMs: number;
  /** Bloom records read from the object store at once, per request. */
  readonly maxConcurrentReads: number;
  /** Largest request body (413 above). */
  readonly maxRequestBytes: number;
  /** Most series in one request (400 above). */
  readonly maxSeriesPerRequest: number;
}

/**
 * Defaults: a 256 MiB cache; blocks up to 64 MiB loaded whole (a quarter of the cache);
 * records up to 8 MiB (the ingester drops blooms past 4 MiB of
 * bits, so a bigger record is damage); 5 s a read; 32 concurrent reads; 64 MiB requests
 * (about 2 M chunk refs); 100,000 series a request.
 */
export const DEFAULT_CONFIG: BloomGatewayConfig = {
  cacheMaxBytes: 256 * 1024 * 1024,
  maxBlockBytes: 64 * 1024 * 1024,
  maxBloomRecordBytes: 8 * 1024 * 1024,
  readTimeoutMs: 5_000,
  maxConcurrentReads: 32,
  maxRequestBytes: 64 * 1024 * 1024,
  maxSeriesPerRequest: 100_000,
};

// The shared configuration errors: re-exported so importers of this package keep working.
export { CONFIG_ERRORS, ConfigError } from "@sieve/config";
export type { ConfigErrorCode } from "@sieve/config";

/** Where configuration comes from: a YAML file (its `bloomGateway` section) and the environment. */
export interface ConfigSources {
  readonly file?: string;
  /** Environment variables (default `process.env`); see {@link ENV_PREFIX}. */
  readonly env?: Env;
  /** Values that win over both (the `sieve` command's flags, tests). */
  readonly overrides?: Partial<BloomGatewayConfig>;
}

/**
 * Environment variables override the file: `SIEVE_BLOOM_GATEWAY_` + the option in
 * UPPER_SNAKE_CASE, e.g. `SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES=1073741824`.
 */
export const ENV_PREFIX = "SIEVE_BLOOM_GATEWAY_";

/** Every option is a positive integer (a zero budget, timeout or size would serve nothing). */
const SCHEMA = defineSchema({
  section: "bloomGateway",
  envPrefix: ENV_PREFIX,
  defaults: DEFAULT_CONFIG,
  min: 1,
});

/**
 * Reads the configuration: defaults, the file's `bloomGateway` section, the environment,
 * then `overrides`; throws a {@link ConfigError} naming the first bad option.
 */
export function loadConfig(sources: ConfigSources = {}): BloomGatewayConfig {
  return loadSection(SCHEMA, sources);
}
