import { coerceValue, envName } from "./coerce.js";
import type { Value } from "./coerce.js";
import { ConfigError } from "./errors.js";
import { isMapping, readConfigFile, section } from "./file.js";
import type { Mapping } from "./file.js";

/** Environment variables, as `process.env`. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * One line of documentation per option, shaped like the defaults: a string per option, a
 * mapping of strings for the group. `overrides` is documented by the schema itself.
 */
export type OptionDocs<C> = {
  readonly [K in keyof C as K extends "overrides" ? never : K]-?: C[K] extends Value
    ? string
    : { readonly [G in keyof C[K]]-?: string };
};

/**
 * How one section of the configuration tree is read. The defaults are the data: each
 * option's kind is its default's type ({@link Value}); `group` names the one nested
 * mapping (the distributor's `limits`, the ingester's `blooms`, `storage.s3`); a key
 * `overrides` in the defaults accepts per-tenant changes to the group.
 */
export interface SchemaSpec<C extends object> {
  /** The section's name in the file, and the first part of its keys in errors; "" is the root. */
  readonly section: string;
  /**
   * Prefix of the environment variables. Default, and the rule for every part of `sieve`:
   * `SIEVE_` + the section in UPPER_SNAKE_CASE + `_` (`SIEVE_BLOOM_GATEWAY_`), so an
   * option's variable is `SIEVE_` + its dotted path in UPPER_SNAKE_CASE.
   */
  readonly envPrefix?: string;
  /** Every option's default. */
  readonly defaults: C;
  /** The nested mapping of options, if any. */
  readonly group?: keyof C & string;
  /** Why a tenant ID cannot appear under `overrides` (undefined: it can). Default: any can. */
  readonly tenantError?: (tenant: string) => string | undefined;
  /** Smallest number any option accepts when read; smaller is `out_of_range`. */
  readonly min?: number;
  /** Inclusive bounds of single options when read (`port`, `kafka.partitions`), over `min`. */
  readonly ranges?: Readonly<Record<string, readonly [number, number]>>;
  /** One line per option, for docs/configuration.md (generated from it). */
  readonly docs?: OptionDocs<C>;
  /** The default as documented where the value depends on the machine (`one per core`). */
  readonly shownDefaults?: Readonly<Record<string, string>>;
  /**
   * Older variable names still read, by option path (`port` → `SIEVE_PORT`); the rule's
   * name wins when both are set. Errors name the variable that was read.
   */
  readonly envAliases?: Readonly<Record<string, string>>;
}

/** A checked {@link SchemaSpec}, from {@link defineSchema}. */
export interface Schema<C extends object> extends SchemaSpec<C> {
  readonly envPrefix: string;
  /** The options outside the group, in the defaults' order. */
  readonly scalars: readonly string[];
  /** The group's defaults ({} without a group). */
  readonly groupDefaults: Readonly<Record<string, Value>>;
  /** Whether `overrides` is an option. */
  readonly tenants: boolean;
}

function isValue(v: unknown): v is Value {
  if (Array.isArray(v)) return v.every((s) => typeof s === "string");
  return v === null || typeof v === "number" || typeof v === "boolean" || typeof v === "string";
}

/** `SIEVE_` + the section's name in UPPER_SNAKE_CASE: the one naming rule of every variable. */
export function sectionEnvPrefix(sectionName: string): string {
  return sectionName === "" ? "SIEVE_" : `${envName("SIEVE_", sectionName)}_`;
}

/**
 * Checks a spec (every default a {@link Value}, but the group and `overrides`; a doc line
 * and a shown default only for options that exist) once, at import.
 */
export function defineSchema<C extends object>(spec: SchemaSpec<C>): Schema<C> {
  const defaults = spec.defaults as Mapping;
  const scalars: string[] = [];
  let groupDefaults: Record<string, Value> = {};
  for (const [key, value] of Object.entries(defaults)) {
    if (key === spec.group) {
      if (!isMapping(value) || !Object.values(value).every(isValue)) {
        throw new TypeError(`${spec.section}.${key}: a group holds scalars and lists only`);
      }
      groupDefaults = value as Record<string, Value>;
    } else if (key !== "overrides") {
      if (!isValue(value)) throw new TypeError(`${spec.section}.${key}: not a scalar or a list`);
      scalars.push(key);
    }
  }
  const tenants = Object.hasOwn(defaults, "overrides");
  if (tenants && spec.group === undefined) {
    throw new TypeError(`${spec.section}: overrides need a group to lay over`);
  }
  const schema = {
    ...spec,
    envPrefix: spec.envPrefix ?? sectionEnvPrefix(spec.section),
    scalars,
    groupDefaults,
    tenants,
  };
  const paths = new Set(optionPaths(schema));
  const named = [
    ...Object.keys(spec.ranges ?? {}),
    ...Object.keys(spec.shownDefaults ?? {}),
    ...Object.keys(spec.envAliases ?? {}),
  ];
  for (const path of named) {
    if (!paths.has(path)) throw new TypeError(`${spec.section}: no option ${path}`);
  }
  return schema;
}

/** Every leaf option's path within its section (`maxBodyBytes`, `limits.maxLineBytes`). */
export function optionPaths(schema: {
  readonly scalars: readonly string[];
  readonly group?: string | undefined;
  readonly groupDefaults: Readonly<Record<string, Value>>;
}): string[] {
  const group = schema.group;
  const inGroup = group === undefined ? [] : Object.keys(schema.groupDefaults);
  return [...schema.scalars, ...inGroup.map((key) => `${group}.${key}`)];
}

/**
 * Reads one option's raw value as its default's kind, with the schema's bounds; `key` names
 * it in errors (a dotted path, a variable, a flag).
 */
function readValue<C extends object>(
  schema: Schema<C>,
  path: string,
  key: string,
  template: Value,
  raw: unknown,
  fromEnv: boolean,
): Value {
  const range = schema.ranges?.[path];
  const [min, max] = range ?? [schema.min, undefined];
  return coerceValue(key, template, raw, fromEnv, min, max);
}

function readGroup<C extends object>(
  schema: Schema<C>,
  path: string,
  raw: unknown,
): Record<string, Value> {
  if (!isMapping(raw)) throw new ConfigError("invalid_type", path, "expected a mapping");
  const known = schema.groupDefaults;
  const out: Record<string, Value> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!Object.hasOwn(known, key)) {
      throw new ConfigError(
        "unknown_key",
        `${path}.${key}`,
        `known: ${Object.keys(known).join(", ")}`,
      );
    }
    const option = `${String(schema.group)}.${key}`;
    out[key] = readValue(schema, option, `${path}.${key}`, known[key]!, value, false);
  }
  return out;
}

/**
 * Lays `values` (a file's section, command-line values) over `config`: each key checked and
 * coerced, named in errors as `prefix + key` (`distributor.maxBodyBytes`). The group is laid
 * over the current one; `overrides` replaces the current overrides. Unknown keys are
 * refused by name, so a typo never silently keeps a default.
 */
export function applyValues<C extends object>(
  schema: Schema<C>,
  config: C,
  prefix: string,
  values: Readonly<Mapping>,
): C {
  const out: Mapping = { ...(config as Mapping) };
  const defaults = schema.defaults as Mapping;
  for (const [key, value] of Object.entries(values)) {
    const path = prefix + key;
    if (key === schema.group) {
      out[key] = { ...(out[key] as Mapping), ...readGroup(schema, path, value) };
    } else if (key === "overrides" && schema.tenants) {
      if (!isMapping(value)) throw new ConfigError("invalid_type", path, "expected a mapping");
      const overrides: Record<string, Record<string, Value>> = {};
      for (const [tenant, o] of Object.entries(value)) {
        const error = schema.tenantError?.(tenant);
        if (error !== undefined) {
          throw new ConfigError("invalid_tenant", `${path}.${tenant}`, error);
        }
        overrides[tenant] = readGroup(schema, `${path}.${tenant}`, o);
      }
      out.overrides = overrides;
    } else if (schema.scalars.includes(key)) {
      out[key] = readValue(schema, key, path, defaults[key] as Value, value, false);
    } else {
      throw new ConfigError("unknown_key", path, `known: ${Object.keys(defaults).join(", ")}`);
    }
  }
  // Every value was coerced to its default's kind above.
  return out as C;
}

/**
 * Lays one option given as text (a variable, a flag) over `config`, parsed as the
 * environment is; `key` names it in errors (`--port`). `option` is its path in the section.
 */
export function applyText<C extends object>(
  schema: Schema<C>,
  config: C,
  option: string,
  raw: string,
  key: string,
): C {
  const defaults = schema.defaults as Mapping;
  const out: Mapping = { ...(config as Mapping) };
  const dot = option.indexOf(".");
  if (dot < 0) {
    out[option] = readValue(schema, option, key, defaults[option] as Value, raw, true);
    return out as C;
  }
  const [group, name] = [option.slice(0, dot), option.slice(dot + 1)];
  const template = schema.groupDefaults[name]!;
  const value = readValue(schema, option, key, template, raw, true);
  out[group] = { ...(out[group] as Mapping), [name]: value };
  return out as C;
}

/** The variable of an option (path in its section) by the naming rule. */
export function optionEnvName<C extends object>(schema: Schema<C>, path: string): string {
  return envName(schema.envPrefix, ...path.split("."));
}

/**
 * Lays the environment over `config`: `envPrefix` + each option's path in UPPER_SNAKE_CASE
 * (`SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES`), after the option's older name if it has one.
 * Overrides come only from the file. Errors name the variable.
 */
export function applyEnv<C extends object>(schema: Schema<C>, config: C, env: Env): C {
  let out = config;
  for (const path of optionPaths(schema)) {
    for (const name of [schema.envAliases?.[path], optionEnvName(schema, path)]) {
      const raw = name === undefined ? undefined : env[name];
      if (raw !== undefined) out = applyText(schema, out, path, raw, name!);
    }
  }
  return out;
}

/** Where a section comes from, lowest precedence first. */
export interface SectionSources {
  /**
   * Values of the shared top-level options a section inherits (`authEnabled`), laid over
   * the defaults before anything else, keys named bare.
   */
  readonly base?: Readonly<Mapping>;
  /** The configuration file, already read (the `sieve` command reads it once for all). */
  readonly doc?: Readonly<Mapping>;
  /** A YAML file to read when no `doc` is given: its section (`schema.section`) is read. */
  readonly file?: string;
  /** Values laid over the file, keys named bare (the command line). */
  readonly values?: Readonly<Mapping>;
  /** Environment variables, laid over the values (default `process.env`). */
  readonly env?: Env;
  /** Values that win over everything, keys named bare (flags, tests). */
  readonly overrides?: Readonly<Mapping>;
}

/**
 * Reads a section: the defaults, `base`, the file's section (keys named `section.key`),
 * `values`, the environment and `overrides`. The caller validates relations after.
 */
export function loadSection<C extends object>(schema: Schema<C>, sources: SectionSources): C {
  let config = schema.defaults;
  if (sources.base !== undefined) config = applyValues(schema, config, "", sources.base);
  const doc =
    sources.doc ?? (sources.file === undefined ? undefined : readConfigFile(sources.file));
  if (doc !== undefined) {
    const values = section(doc, schema.section);
    config = applyValues(schema, config, `${schema.section}.`, values);
  }
  if (sources.values !== undefined) config = applyValues(schema, config, "", sources.values);
  config = applyEnv(schema, config, sources.env ?? process.env);
  if (sources.overrides !== undefined) config = applyValues(schema, config, "", sources.overrides);
  return config;
}

/**
 * A component's loader: reads its section from any {@link SectionSources} and validates it.
 * It carries its schema, so the `sieve` command composes the tree and documents every
 * option from the component's own schema.
 */
export interface SectionLoader<C extends object> {
  (sources?: SectionSources): C;
  /** The schema the loader reads. */
  readonly schema: Schema<C>;
}

/** The loader of `schema`, validating with `validate` (throws a {@link ConfigError}). */
export function sectionLoader<C extends object>(
  schema: Schema<C>,
  validate: (config: C) => void = () => undefined,
): SectionLoader<C> {
  const load = (sources: SectionSources = {}): C => {
    const config = loadSection(schema, sources);
    validate(config);
    return config;
  };
  return Object.assign(load, { schema });
}

/** One tenant's options: its overrides laid over `base` (`base` itself when it has none). */
export function forTenant<G extends object>(
  base: G,
  overrides: Readonly<Record<string, Partial<G>>>,
  tenant: string,
): G {
  const o = Object.hasOwn(overrides, tenant) ? overrides[tenant] : undefined;
  return o === undefined ? base : { ...base, ...o };
}

/**
 * The group and every tenant's view of it, each with the path naming it in errors
 * (`limits`, `overrides.team-a`), for validation after all sources are applied.
 */
export function tenantViews<G extends object>(
  group: string,
  base: G,
  overrides: Readonly<Record<string, Partial<G>>>,
): [string, G][] {
  return [
    [group, base],
    ...Object.entries(overrides).map(([t, o]): [string, G] => [
      `overrides.${t}`,
      { ...base, ...o },
    ]),
  ];
}
