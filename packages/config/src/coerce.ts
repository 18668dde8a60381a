import { ConfigError } from "./errors.js";

/** The value of one scalar option: its default's type is its kind. */
export type Scalar = number | boolean | string;

/**
 * The value of one option, whose default's type is its kind: a scalar, a list of strings
 * (a YAML sequence, or comma-separated in the environment), or `null` for an optional
 * integer (unset by default; `null` in the file or an empty variable unsets it).
 */
export type Value = Scalar | readonly string[] | null;

/**
 * Checks `raw` against the kind of `template` (its default) and returns it typed. From the
 * file a value must already have the kind; from the environment (`fromEnv`) strings are
 * parsed: `true`/`false` exactly, numbers by `Number`. Numbers must be safe integers, unless
 * the default is a fraction (a rate such as 0.01), and at least `min` and at most `max` when
 * given. Throws `invalid_type` or `out_of_range` with
 * `key` (the dotted path or the variable's name).
 */
export function coerce(
  key: string,
  template: Scalar,
  raw: unknown,
  fromEnv: boolean,
  min?: number,
  max?: number,
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
  const fraction = !Number.isInteger(template);
  if (
    (!fraction && !Number.isSafeInteger(n)) ||
    (min !== undefined && n < min) ||
    (max !== undefined && n > max)
  ) {
    const bound =
      max !== undefined ? ` in ${min ?? "…"}..${max}` : min !== undefined ? ` ≥ ${min}` : "";
    const kind = fraction ? "a number" : "an integer";
    throw new ConfigError("out_of_range", key, `expected ${kind}${bound}, got ${n}`);
  }
  return n;
}

/**
 * {@link coerce} for every kind of {@link Value}: a list from a sequence of strings (from the
 * environment, a comma-separated string, blanks dropped); an optional integer from `null`, an
 * empty variable (unset) or an integer.
 */
export function coerceValue(
  key: string,
  template: Value,
  raw: unknown,
  fromEnv: boolean,
  min?: number,
  max?: number,
): Value {
  if (template === null) {
    if (raw === null || (fromEnv && typeof raw === "string" && raw.trim() === "")) return null;
    return coerce(key, 0, raw, fromEnv, min, max);
  }
  // Not null, so an object is a list (`Array.isArray` does not narrow readonly arrays out).
  if (typeof template === "object") {
    if (fromEnv && typeof raw === "string") {
      return raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
    }
    if (Array.isArray(raw) && raw.every((v) => typeof v === "string")) return raw;
    throw new ConfigError(
      "invalid_type",
      key,
      `expected a list of strings, got ${JSON.stringify(raw)}`,
    );
  }
  return coerce(key, template, raw, fromEnv, min, max);
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
