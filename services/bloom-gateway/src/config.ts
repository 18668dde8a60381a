import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

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

/** Every way configuration can be refused. */
export const CONFIG_ERRORS = {
  unreadable_file: "cannot read the configuration file",
  invalid_yaml: "the configuration file is not valid YAML",
  unknown_key: "unknown configuration key",
  invalid_type: "configuration value has the wrong type",
  out_of_range: "configuration value is out of range",
} as const;

/** A code of {@link CONFIG_ERRORS}. */
export type ConfigErrorCode = keyof typeof CONFIG_ERRORS;

/** A configuration error; `key` is the dotted path or variable of the offending option. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";

  constructor(
    readonly code: ConfigErrorCode,
    readonly key: string,
    detail: string,
  ) {
    super(`${CONFIG_ERRORS[code]}: ${key}: ${detail}`);
  }
}

/** Where configuration comes from: a YAML file (its `bloomGateway` section) and the environment. */
export interface ConfigSources {
  readonly file?: string;
  /** Environment variables (default `process.env`); see {@link ENV_PREFIX}. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Values that win over both (the `sieve` command's flags, tests). */
  readonly overrides?: Partial<BloomGatewayConfig>;
}

/**
 * Environment variables override the file: `SIEVE_BLOOM_GATEWAY_` + the option in
 * UPPER_SNAKE_CASE, e.g. `SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES=1073741824`.
 */
export const ENV_PREFIX = "SIEVE_BLOOM_GATEWAY_";

const KEYS = Object.keys(DEFAULT_CONFIG) as (keyof BloomGatewayConfig)[];

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

function isKey(key: string): key is keyof BloomGatewayConfig {
  return Object.hasOwn(DEFAULT_CONFIG, key);
}

function positiveInteger(key: string, raw: unknown, fromEnv: boolean): number {
  let n: unknown = raw;
  if (fromEnv && typeof raw === "string" && raw.trim() !== "") n = Number(raw);
  if (typeof n !== "number" || !Number.isFinite(n)) {
    throw new ConfigError("invalid_type", key, `expected a number, got ${JSON.stringify(raw)}`);
  }
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new ConfigError("out_of_range", key, `expected an integer > 0, got ${n}`);
  }
  return n;
}

function readSection(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ConfigError("unreadable_file", file, (error as Error).message);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new ConfigError("invalid_yaml", file, (error as Error).message);
  }
  if (doc == null) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError("invalid_type", "(root)", "expected a mapping");
  }
  const section = (doc as Record<string, unknown>).bloomGateway;
  if (section == null) return {};
  if (typeof section !== "object" || Array.isArray(section)) {
    throw new ConfigError("invalid_type", "bloomGateway", "expected a mapping");
  }
  return section as Record<string, unknown>;
}

/**
 * Reads the configuration: defaults, the file's `bloomGateway` section, the environment,
 * then `overrides`; throws a {@link ConfigError} naming the first bad option.
 */
export function loadConfig(sources: ConfigSources = {}): BloomGatewayConfig {
  const env = sources.env ?? process.env;
  const config: Record<keyof BloomGatewayConfig, number> = { ...DEFAULT_CONFIG };
  const section = sources.file === undefined ? {} : readSection(sources.file);
  for (const [key, value] of Object.entries(section)) {
    if (!isKey(key)) {
      throw new ConfigError("unknown_key", `bloomGateway.${key}`, `known: ${KEYS.join(", ")}`);
    }
    config[key] = positiveInteger(`bloomGateway.${key}`, value, false);
  }
  for (const key of KEYS) {
    const name = ENV_PREFIX + snake(key);
    const raw = env[name];
    if (raw !== undefined) config[key] = positiveInteger(name, raw, true);
  }
  for (const [key, value] of Object.entries(sources.overrides ?? {})) {
    if (!isKey(key)) throw new ConfigError("unknown_key", key, `known: ${KEYS.join(", ")}`);
    config[key] = positiveInteger(key, value, false);
  }
  return config;
}
