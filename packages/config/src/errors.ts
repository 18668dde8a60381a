/**
 * Every way a configuration can be refused: the one table of the whole tree (the `sieve`
 * command's shared options and every component's section), so the same bad file gets the
 * same code whichever part reads it. `invalid_value` is a value that is missing where
 * another option requires it, or not one of a fixed set (`storage.backend`); a value of the
 * wrong kind is `invalid_type` and one outside its bounds `out_of_range`, everywhere.
 */
export const CONFIG_ERRORS = {
  unreadable_file: "cannot read the configuration file",
  invalid_yaml: "the configuration file is not valid YAML",
  unknown_key: "unknown configuration key",
  invalid_type: "configuration value has the wrong type",
  out_of_range: "configuration value is out of range",
  invalid_tenant: "invalid tenant ID in overrides",
  invalid_value: "invalid configuration value",
} as const;

/** A code of {@link CONFIG_ERRORS}. */
export type ConfigErrorCode = keyof typeof CONFIG_ERRORS;

/**
 * A configuration error. `key` names the offending option: its dotted path in the file
 * (`distributor.limits.maxLineBytes`), its environment variable, a flag, or the file itself
 * for `unreadable_file` and `invalid_yaml`.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";

  constructor(
    readonly code: ConfigErrorCode,
    readonly key: string,
    /** What was wrong, after the code's words and the key. */
    readonly detail: string,
  ) {
    super(`${CONFIG_ERRORS[code]}: ${key}: ${detail}`);
  }
}
