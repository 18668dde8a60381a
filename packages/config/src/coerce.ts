import { ConfigError } from "./errors.js";

/** The value of one option: its default's type is its kind. */
export type Scalar = number | boolean | string;

/**
 * Checks `raw` against the kind of `template` (its default) and returns it typed. From the
 * file a value must already have the kind; from the environment (`fromEnv`) strings are
 * parsed: `true`/`false` exactly, numbers by `Number`. Numbers must be safe integers, at
 * least `min` when given. Throws `invalid_type` or `out_of_range` with `key` (the dotted
 * path or the variable's name).
 */
export function coerce(
  key: string,
  template: Scalar,
  raw: unknown,
  fromEnv: boolean,
  min?: number,
): Scalar {
  if (typeof template === "boolean") {
    if (typeof raw === "boolean") return raw;
    if (fromEnv && (raw === "true" || raw === "false")) return raw === "true";
    throw new ConfigError(
      "invalid_type",
      key,
      `expected true or false, got ${JSON.stringify(raw)}`,
    );
  }
  if (typeof template === "string") {
    if (typeof raw === "string") return raw;
    throw new ConfigError("invalid_type", key, `expected a string, got ${JSON.stringify(raw)}`);
  }
  let n: unknown = raw;
  if (fromEnv && typeof raw === "string" && raw.trim() !== "") n = Number(raw);
  if (typeof n !== "number" || !Number.isFinite(n)) {
    throw new ConfigError("invalid_type", key, `expected a number, got ${JSON.stringify(raw)}`);
  }
  if (!Number.isSafeInteger(n) || (min !== undefined && n < min)) {
    const bound = min === undefined ? "" : ` ≥ ${min}`;
    throw new ConfigError("out_of_range", key, `expected an integer${bound}, got ${n}`);
  }
  return n;
}

/** `maxBodyBytes` → `MAX_BODY_BYTES`. */
function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

/**
 * The environment variable of an option: the prefix, then each part of its path in
 * UPPER_SNAKE_CASE joined by `_` (`envName("SIEVE_QUERIER_", "limits", "queryTimeoutMs")` is
 * `SIEVE_QUERIER_LIMITS_QUERY_TIMEOUT_MS`).
 */
export function envName(prefix: string, ...path: string[]): string {
  return prefix + path.map(snake).join("_");
}

/**
 * Throws `out_of_range` naming `key` unless `lo ≤ n ≤ hi` (NaN is out of every range).
 * For checks made after every source is applied, where `key` is the option's bare path.
 */
export function checkRange(key: string, n: number, lo: number, hi = Infinity): void {
  if (n >= lo && n <= hi) return;
  const range = hi === Infinity ? `≥ ${lo}` : `${lo}..${hi}`;
  throw new ConfigError("out_of_range", key, `must be ${range}, got ${n}`);
}
