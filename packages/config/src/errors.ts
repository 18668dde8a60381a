/**
 * Every way a configuration can be refused, shared by all components so the same bad file
 * gets the same code whichever component reads it. `invalid_value` is the `sieve`
 * command's code for a value of the wrong kind or range; the components say which of
 * `invalid_type` or `out_of_range` it is.
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
    detail: string,
  ) {
    super(`${CONFIG_ERRORS[code]}: ${key}: ${detail}`);
  }
}
