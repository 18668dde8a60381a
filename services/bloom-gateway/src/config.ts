import { defineSchema, sectionLoader } from "@sieve/config";
import type { SectionLoader, SectionSources } from "@sieve/config";

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

/**
 * Where configuration comes from: the file (read here, or already read by the `sieve`
 * command), the environment (default `process.env`), then `overrides` (flags, tests).
 */
export type ConfigSources = SectionSources;

/** Every option is a positive integer (a zero budget, timeout or size would serve nothing). */
const SCHEMA = defineSchema({
  section: "bloomGateway",
  defaults: DEFAULT_CONFIG,
  min: 1,
  docs: {
    cacheMaxBytes:
      "byte budget of the LRU of bloom blocks (bytes and decoded bit arrays, plus 200 bytes a record)",
    maxBlockBytes:
      "largest bloom block loaded and cached whole; a larger one is read one record per series",
    maxBloomRecordBytes:
      "a series' bloom record larger than this is not read: its refs are kept (`oversized_bloom`)",
    readTimeoutMs:
      "longest wait for one series' bloom (its block's load); past it the refs are kept (`timeout`)",
    maxConcurrentReads:
      "series one request tests at once (their blocks load concurrently, each once)",
    maxRequestBytes:
      "largest `POST /bloomgateway/v1/filter` body (413 above); about 2 M chunk refs",
    maxSeriesPerRequest: "most series in one request (400 above)",
  },
});

/**
 * Environment variables override the file: `SIEVE_BLOOM_GATEWAY_` + the option in
 * UPPER_SNAKE_CASE, e.g. `SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES=1073741824`.
 */
export const ENV_PREFIX = SCHEMA.envPrefix;

/**
 * Reads the configuration: defaults, the file's `bloomGateway` section, the environment,
 * then `overrides`; throws a {@link ConfigError} naming the first bad option. Carries its
 * schema (`loadConfig.schema`) for the `sieve` command.
 */
export const loadConfig: SectionLoader<BloomGatewayConfig> = sectionLoader(SCHEMA);
