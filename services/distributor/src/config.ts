import { availableParallelism } from "node:os";
import { checkRange, defineSchema, loadSection, tenantIdError, tenantViews } from "@sieve/config";
import type { Env } from "@sieve/config";
import { DEFAULT_LIMITS } from "./limits.js";
import type { TenantLimits } from "./limits.js";

/** The distributor's configuration. Sizes in bytes, durations in milliseconds. */
export interface DistributorConfig {
  /** Whether X-Scope-OrgID is required (multi-tenant). Off: every push is tenant `fake`. */
  readonly authEnabled: boolean;
  /** Largest request body as received, before decompression (413 above). */
  readonly maxBodyBytes: number;
  /** Largest body after gzip/deflate/snappy decompression (413 above), enforced while inflating. */
  readonly maxDecompressedBytes: number;
  /**
   * Worker threads that decompress, decode and validate pushes (default: one per core);
   * 0 prepares every push on the main thread.
   */
  readonly decodeThreads: number;
  /** Old-generation heap of each decode worker, in MiB; a push needing more gets a 413. */
  readonly decodeWorkerHeapMb: number;
  /**
   * Uncompressed bodies up to this many bytes are prepared on the main thread, where a
   * worker hop (~0.1 ms) would cost more than decoding them.
   */
  readonly inlineDecodeMaxBytes: number;
  /**
   * A tenant's limiter state is forgotten after this long without an accepted push, once
   * it holds nothing a new one would not (a full rate bucket, no new streams counted in
   * the current hour and day), so forgetting never loosens a limit.
   */
  readonly tenantIdleMs: number;
  /** Limits of every tenant. */
  readonly limits: TenantLimits;
  /** Per-tenant changes to `limits`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<TenantLimits>>>;
}

/**
 * Defaults that work with no file: Loki's limits, auth off, 16 MiB bodies before and after
 * decompression. Loki allows 100 MB inflated; Sieve allows less because a decoded push costs
 * up to ~25 bytes of JavaScript heap per byte of protobuf (2-byte empty messages each become
 * an object), and real clients send batches of about 1 MiB (Promtail, Alloy).
 */
export const DEFAULT_CONFIG: DistributorConfig = {
  authEnabled: false,
  maxBodyBytes: 16 * 1024 * 1024,
  maxDecompressedBytes: 16 * 1024 * 1024,
  decodeThreads: availableParallelism(),
  decodeWorkerHeapMb: 512,
  inlineDecodeMaxBytes: 16 * 1024,
  tenantIdleMs: 3_600_000,
  limits: DEFAULT_LIMITS,
  overrides: {},
};

// The shared configuration errors: re-exported so importers of this package keep working.
export { CONFIG_ERRORS, ConfigError } from "@sieve/config";
export type { ConfigErrorCode } from "@sieve/config";

/** Where configuration comes from: a YAML file (optional) and the environment. */
export interface ConfigSources {
  /** Path of a YAML file; its `distributor` section is read. */
  readonly file?: string;
  /** Environment variables (default `process.env`); see {@link ENV_PREFIX}. */
  readonly env?: Env;
}

/**
 * Environment variables override the file: `SIEVE_DISTRIBUTOR_` + the option in
 * UPPER_SNAKE_CASE (`SIEVE_DISTRIBUTOR_AUTH_ENABLED=true`,
 * `SIEVE_DISTRIBUTOR_MAX_BODY_BYTES=1048576`), and `SIEVE_DISTRIBUTOR_LIMITS_` + a limit
 * (`SIEVE_DISTRIBUTOR_LIMITS_INGESTION_RATE_BYTES=8388608`).
 */
export const ENV_PREFIX = "SIEVE_DISTRIBUTOR_";

/** Every option is an integer ≥ 0 or a boolean; overrides are for tenants a push could name. */
const SCHEMA = defineSchema({
  section: "distributor",
  envPrefix: ENV_PREFIX,
  defaults: DEFAULT_CONFIG,
  group: "limits",
  tenantError: tenantIdError,
  min: 0,
});

/**
 * Reads the configuration: defaults, then the file's `distributor` section, then the
 * environment; validates it and throws a {@link ConfigError} naming the first bad option.
 */
export function loadConfig(sources: ConfigSources = {}): DistributorConfig {
  const config = loadSection(SCHEMA, sources);
  validate(config);
  return config;
}

/**
 * Sizes, rates, bursts and label limits must be > 0 (0 would refuse every push); a worker
 * needs some heap.
 */
function validate(config: DistributorConfig): void {
  checkRange("maxBodyBytes", config.maxBodyBytes, 1);
  checkRange("maxDecompressedBytes", config.maxDecompressedBytes, 1);
  checkRange("decodeWorkerHeapMb", config.decodeWorkerHeapMb, 16);
  checkRange("tenantIdleMs", config.tenantIdleMs, 1);
  for (const [path, l] of tenantViews("limits", config.limits, config.overrides)) {
    checkRange(`${path}.ingestionRateBytes`, l.ingestionRateBytes, 1);
    checkRange(`${path}.ingestionBurstBytes`, l.ingestionBurstBytes, 1);
    checkRange(`${path}.perStreamRateBytes`, l.perStreamRateBytes, 1);
    checkRange(`${path}.perStreamBurstBytes`, l.perStreamBurstBytes, 1);
    checkRange(`${path}.maxLabelNamesPerSeries`, l.maxLabelNamesPerSeries, 1);
    checkRange(`${path}.maxLabelNameLength`, l.maxLabelNameLength, 1);
    checkRange(`${path}.maxLabelValueLength`, l.maxLabelValueLength, 1);
  }
}
