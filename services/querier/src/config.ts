import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

/**
 * Per-tenant query limits, Loki's where Loki has one (`limits_config`). Durations in
 * milliseconds, 0 = no limit.
 */
export interface QueryLimits {
  /** Loki's `max_query_length` (721h): longest `end - start` of a query. */
  readonly maxQueryLengthMs: number;
  /** Loki's `max_entries_limit_per_query` (5000): largest `limit` of a log query. */
  readonly maxEntriesLimitPerQuery: number;
  /** Loki's `max_chunks_per_query` (2,000,000): chunk refs a query may match in the index. */
  readonly maxChunksPerQuery: number;
  /** Loki's `query_timeout` (1m): a query running longer is stopped with 504. */
  readonly queryTimeoutMs: number;
  /**
   * Sieve's bound on entries a metric query holds in memory (10,000,000): a metric query
   * keeps every matching entry of its range, so this is what stops it allocating without bound.
   */
  readonly maxMetricQueryEntries: number;
}

/** Loki's defaults. */
export const DEFAULT_QUERY_LIMITS: QueryLimits = {
  maxQueryLengthMs: 721 * 3_600_000,
  maxEntriesLimitPerQuery: 5000,
  maxChunksPerQuery: 2_000_000,
  queryTimeoutMs: 60_000,
  maxMetricQueryEntries: 10_000_000,
};

/** The querier's configuration. Sizes in bytes. */
export interface QuerierConfig {
  /** Whether X-Scope-OrgID is required. Off: every query is tenant `fake`. */
  readonly authEnabled: boolean;
  /** Chunk fetches in flight per query (the bounded pool). */
  readonly maxConcurrentFetches: number;
  /** Byte budget of the chunk cache (encoded chunk objects), shared by all queries. */
  readonly chunkCacheBytes: number;
  /** Byte budget of the index segment cache (by encoded size). */
  readonly segmentCacheBytes: number;
  /** Limits of every tenant. */
  readonly limits: QueryLimits;
  /** Per-tenant changes to `limits`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<QueryLimits>>>;
}

/** Defaults that work with no file. */
export const DEFAULT_CONFIG: QuerierConfig = {
  authEnabled: false,
  maxConcurrentFetches: 8,
  chunkCacheBytes: 256 * 1024 * 1024,
  segmentCacheBytes: 64 * 1024 * 1024,
  limits: DEFAULT_QUERY_LIMITS,
  overrides: {},
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

/** A configuration error; `key` is the dotted path of the offending option. */
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

/** Where configuration comes from: a YAML file (its `querier` section) and the environment. */
export interface ConfigSources {
  readonly file?: string;
  /** Environment variables (default `process.env`); see {@link ENV_PREFIX}. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Environment variables override the file: `SIEVE_QUERIER_` + the option in
 * UPPER_SNAKE_CASE (`SIEVE_QUERIER_AUTH_ENABLED=true`), and `SIEVE_QUERIER_LIMITS_` + a
 * limit (`SIEVE_QUERIER_LIMITS_MAX_QUERY_LENGTH_MS=3600000`).
 */
export const ENV_PREFIX = "SIEVE_QUERIER_";

const SCALARS = [
  "authEnabled",
  "maxConcurrentFetches",
  "chunkCacheBytes",
  "segmentCacheBytes",
] as const;

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function coerce(key: string, expected: number | boolean, raw: unknown, fromEnv: boolean) {
  if (typeof expected === "boolean") {
    if (typeof raw === "boolean") return raw;
    if (fromEnv && (raw === "true" || raw === "false")) return raw === "true";
    throw new ConfigError(
      "invalid_type",
      key,
      `expected true or false, got ${JSON.stringify(raw)}`,
    );
  }
  let n: unknown = raw;
  if (fromEnv && typeof raw === "string" && raw.trim() !== "") n = Number(raw);
  if (typeof n !== "number" || !Number.isFinite(n)) {
    throw new ConfigError("invalid_type", key, `expected a number, got ${JSON.stringify(raw)}`);
  }
  if (n < 0 || !Number.isSafeInteger(n)) {
    throw new ConfigError("out_of_range", key, `expected an integer ≥ 0, got ${n}`);
  }
  return n;
}

function readLimits(path: string, raw: unknown): Partial<QueryLimits> {
  if (!isObject(raw)) throw new ConfigError("invalid_type", path, "expected a mapping");
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!Object.hasOwn(DEFAULT_QUERY_LIMITS, key)) {
      throw new ConfigError(
        "unknown_key",
        `${path}.${key}`,
        `known: ${Object.keys(DEFAULT_QUERY_LIMITS).join(", ")}`,
      );
    }
    out[key] = coerce(`${path}.${key}`, 0, value, false) as number;
  }
  return out;
}

/**
 * Reads the configuration: defaults, then the file's `querier` section, then the
 * environment; validates it and throws a {@link ConfigError} naming the first bad option.
 */
export function loadConfig(sources: ConfigSources = {}): QuerierConfig {
  const env = sources.env ?? process.env;
  let section: Record<string, unknown> = {};
  if (sources.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(sources.file, "utf8");
    } catch (error) {
      throw new ConfigError("unreadable_file", sources.file, (error as Error).message);
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (error) {
      throw new ConfigError("invalid_yaml", sources.file, (error as Error).message);
    }
    if (doc != null) {
      if (!isObject(doc)) throw new ConfigError("invalid_type", "(root)", "expected a mapping");
      const q = doc.querier;
      if (q != null) {
        if (!isObject(q)) throw new ConfigError("invalid_type", "querier", "expected a mapping");
        section = q;
      }
    }
  }
  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  for (const [key, value] of Object.entries(section)) {
    const path = `querier.${key}`;
    if (key === "limits") config.limits = { ...DEFAULT_QUERY_LIMITS, ...readLimits(path, value) };
    else if (key === "overrides") {
      if (!isObject(value)) throw new ConfigError("invalid_type", path, "expected a mapping");
      const overrides: Record<string, Partial<QueryLimits>> = {};
      for (const [tenant, limits] of Object.entries(value)) {
        overrides[tenant] = readLimits(`${path}.${tenant}`, limits);
      }
      config.overrides = overrides;
    } else if ((SCALARS as readonly string[]).includes(key)) {
      const k = key as (typeof SCALARS)[number];
      config[k] = coerce(path, DEFAULT_CONFIG[k], value, false);
    } else {
      throw new ConfigError(
        "unknown_key",
        path,
        `known: ${[...SCALARS, "limits", "overrides"].join(", ")}`,
      );
    }
  }
  for (const key of SCALARS) {
    const name = ENV_PREFIX + snake(key);
    const raw = env[name];
    if (raw !== undefined) config[key] = coerce(name, DEFAULT_CONFIG[key], raw, true);
  }
  const limits: Record<string, number> = { ...(config.limits as QueryLimits) };
  for (const key of Object.keys(DEFAULT_QUERY_LIMITS)) {
    const name = `${ENV_PREFIX}LIMITS_${snake(key)}`;
    const raw = env[name];
    if (raw !== undefined) limits[key] = coerce(name, 0, raw, true) as number;
  }
  config.limits = limits;
  const result = config as unknown as QuerierConfig;
  for (const key of ["maxConcurrentFetches", "chunkCacheBytes", "segmentCacheBytes"] as const) {
    if (result[key] <= 0)
      throw new ConfigError("out_of_range", key, `must be > 0, got ${result[key]}`);
  }
  return result;
}

/** The limits of one tenant: the overrides over the defaults. */
export function limitsFor(config: QuerierConfig, tenant: string): QueryLimits {
  const o = config.overrides[tenant];
  return o === undefined ? config.limits : { ...config.limits, ...o };
}
