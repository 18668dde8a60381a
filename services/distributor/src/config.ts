import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { DEFAULT_LIMITS } from "./limits.js";
import type { TenantLimits } from "./limits.js";
import { tenantIdError } from "./validation.js";

/** The distributor's configuration. Sizes in bytes, durations in milliseconds. */
export interface DistributorConfig {
  /** Whether X-Scope-OrgID is required (multi-tenant). Off: every push is tenant `fake`. */
  readonly authEnabled: boolean;
  /** Largest request body as received, before decompression (413 above). */
  readonly maxBodyBytes: number;
  /** Largest body after gzip/deflate/snappy decompression (413 above), enforced while inflating. */
  readonly maxDecompressedBytes: number;
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
  limits: DEFAULT_LIMITS,
  overrides: {},
};

/** Every way configuration can be refused. */
export const CONFIG_ERRORS = {
  unreadable_file: "cannot read the configuration file",
  invalid_yaml: "the configuration file is not valid YAML",
  unknown_key: "unknown configuration key",
  invalid_type: "configuration value has the wrong type",
  out_of_range: "configuration value is out of range",
  invalid_tenant: "invalid tenant ID in overrides",
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

/** Where configuration comes from: a YAML file (optional) and the environment. */
export interface ConfigSources {
  /** Path of a YAML file; its `distributor` section is read. */
  readonly file?: string;
  /** Environment variables (default `process.env`); see {@link ENV_PREFIX}. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Environment variables override the file: `SIEVE_DISTRIBUTOR_` + the option in
 * UPPER_SNAKE_CASE (`SIEVE_DISTRIBUTOR_AUTH_ENABLED=true`,
 * `SIEVE_DISTRIBUTOR_MAX_BODY_BYTES=1048576`), and `SIEVE_DISTRIBUTOR_LIMITS_` + a limit
 * (`SIEVE_DISTRIBUTOR_LIMITS_INGESTION_RATE_BYTES=8388608`).
 */
export const ENV_PREFIX = "SIEVE_DISTRIBUTOR_";

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

type Value = number | boolean;

function coerce(key: string, expected: Value, raw: unknown, fromEnv: boolean): Value {
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
  if (n < 0 || !Number.isInteger(n)) {
    throw new ConfigError("out_of_range", key, `expected an integer ≥ 0, got ${n}`);
  }
  return n;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isLimitKey(base: TenantLimits, key: string): key is keyof TenantLimits {
  return Object.hasOwn(base, key);
}

function readLimits(path: string, raw: unknown, base: TenantLimits): Partial<TenantLimits> {
  if (!isObject(raw)) throw new ConfigError("invalid_type", path, "expected a mapping");
  const out: Record<string, Value> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!isLimitKey(base, key)) {
      throw new ConfigError(
        "unknown_key",
        `${path}.${key}`,
        `known: ${Object.keys(base).join(", ")}`,
      );
    }
    out[key] = coerce(`${path}.${key}`, base[key], value, false);
  }
  return out;
}

/**
 * Reads the configuration: defaults, then the file's `distributor` section, then the
 * environment; validates it and throws a {@link ConfigError} naming the first bad option.
 */
export function loadConfig(sources: ConfigSources = {}): DistributorConfig {
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
      const d = doc.distributor;
      if (d != null) {
        if (!isObject(d))
          throw new ConfigError("invalid_type", "distributor", "expected a mapping");
        section = d;
      }
    }
  }
  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  for (const [key, value] of Object.entries(section)) {
    const path = `distributor.${key}`;
    switch (key) {
      case "limits":
        config.limits = { ...DEFAULT_LIMITS, ...readLimits(path, value, DEFAULT_LIMITS) };
        break;
      case "overrides": {
        if (!isObject(value)) throw new ConfigError("invalid_type", path, "expected a mapping");
        const overrides: Record<string, Partial<TenantLimits>> = {};
        for (const [tenant, limits] of Object.entries(value)) {
          const error = tenantIdError(tenant);
          if (error !== undefined)
            throw new ConfigError("invalid_tenant", `${path}.${tenant}`, error);
          overrides[tenant] = readLimits(`${path}.${tenant}`, limits, DEFAULT_LIMITS);
        }
        config.overrides = overrides;
        break;
      }
      case "authEnabled":
      case "maxBodyBytes":
      case "maxDecompressedBytes":
        config[key] = coerce(path, DEFAULT_CONFIG[key], value, false);
        break;
      default:
        throw new ConfigError(
          "unknown_key",
          path,
          "known: authEnabled, maxBodyBytes, maxDecompressedBytes, limits, overrides",
        );
    }
  }
  for (const key of ["authEnabled", "maxBodyBytes", "maxDecompressedBytes"] as const) {
    const name = ENV_PREFIX + snake(key);
    const raw = env[name];
    if (raw !== undefined) config[key] = coerce(name, DEFAULT_CONFIG[key], raw, true);
  }
  const limits: Record<string, Value> = { ...(config.limits as TenantLimits) };
  for (const key of Object.keys(DEFAULT_LIMITS) as (keyof TenantLimits)[]) {
    const name = `${ENV_PREFIX}LIMITS_${snake(key)}`;
    const raw = env[name];
    if (raw !== undefined) limits[key] = coerce(name, DEFAULT_LIMITS[key], raw, true);
  }
  config.limits = limits;
  const result = config as unknown as DistributorConfig;
  validate(result);
  return result;
}

function validate(config: DistributorConfig): void {
  const positive = (key: string, n: number): void => {
    if (n <= 0) throw new ConfigError("out_of_range", key, `must be > 0, got ${n}`);
  };
  positive("maxBodyBytes", config.maxBodyBytes);
  positive("maxDecompressedBytes", config.maxDecompressedBytes);
  const all: [string, TenantLimits][] = [
    ["limits", config.limits],
    ...Object.entries(config.overrides).map(([t, o]): [string, TenantLimits] => [
      `overrides.${t}`,
      { ...config.limits, ...o },
    ]),
  ];
  for (const [path, l] of all) {
    positive(`${path}.ingestionRateBytes`, l.ingestionRateBytes);
    positive(`${path}.ingestionBurstBytes`, l.ingestionBurstBytes);
    positive(`${path}.perStreamRateBytes`, l.perStreamRateBytes);
    positive(`${path}.perStreamBurstBytes`, l.perStreamBurstBytes);
    positive(`${path}.maxLabelNamesPerSeries`, l.maxLabelNamesPerSeries);
    positive(`${path}.maxLabelNameLength`, l.maxLabelNameLength);
    positive(`${path}.maxLabelValueLength`, l.maxLabelValueLength);
  }
}
