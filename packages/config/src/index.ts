/**
 * The one configuration tree of Sieve: the YAML file, read once, with shared top-level
 * options and a section per component; typed errors from one table; coercion of file and
 * environment values; one variable naming rule (`SIEVE_` + the option's dotted path in
 * UPPER_SNAKE_CASE); per-tenant overrides; every option's doc line, from which
 * docs/configuration.md is generated. Each component keeps only its options, defaults and
 * rules (its schema); the `sieve` command composes them.
 */
export { CONFIG_ERRORS, ConfigError } from "./errors.js";
export type { ConfigErrorCode } from "./errors.js";
export { layerMappings, readConfigFile, readConfigFiles, section } from "./file.js";
export type { Mapping } from "./file.js";
export { checkRange, coerce, coerceValue, envName } from "./coerce.js";
export type { Scalar, Value } from "./coerce.js";
export {
  applyText,
  defineSchema,
  forTenant,
  loadSection,
  sectionLoader,
  tenantViews,
} from "./schema.js";
export type {
  Env,
  OptionDocs,
  Schema,
  SchemaSpec,
  SectionLoader,
  SectionSources,
} from "./schema.js";
export { markdownTable, optionRows, optionsTable } from "./docs.js";
export type { OptionRow } from "./docs.js";
export {
  FAKE_TENANT,
  MAX_TENANT_ID_LENGTH,
  requestTenant,
  requestTenants,
  tenantIdError,
} from "./tenant.js";
export type { TenantRefusal } from "./tenant.js";
