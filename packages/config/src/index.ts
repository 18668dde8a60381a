/**
 * What every component's configuration loader shares: the YAML file and its sections,
 * typed errors, coercion of file and environment values, `SIEVE_<COMPONENT>_*` variables,
 * per-tenant overrides. Each component keeps only its options, defaults and rules.
 */
export { CONFIG_ERRORS, ConfigError } from "./errors.js";
export type { ConfigErrorCode } from "./errors.js";
export { isMapping, readConfigFile, section } from "./file.js";
export type { Mapping } from "./file.js";
export { checkRange, coerce, envName } from "./coerce.js";
export type { Scalar } from "./coerce.js";
export {
  applyEnv,
  applyValues,
  defineSchema,
  forTenant,
  loadSection,
  tenantViews,
} from "./schema.js";
export type { Env, Schema, SchemaSpec, SectionSources } from "./schema.js";
export { MAX_TENANT_ID_LENGTH, tenantIdError } from "./tenant.js";
