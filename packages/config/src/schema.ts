import { coerce, envName } from "./coerce.js";
import type { Scalar } from "./coerce.js";
import { ConfigError } from "./errors.js";
import { isMapping, readConfigFile, section } from "./file.js";
import type { Mapping } from "./file.js";

/** Environment variables, as `process.env`. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * How one component's section is read. The defaults are the data: each scalar option's
 * kind is its default's type; `group` names the one nested mapping of scalars (the
 * distributor's `limits`, the ingester's `blooms`); a key `overrides` in the defaults
 * accepts per-tenant changes to the group.
 */
export interface SchemaSpec<C extends object> {
  /** The section's name in the file, and the first part of its keys in errors. */
  readonly section: string;
  /** Prefix of the environment variables: `SIEVE_DISTRIBUTOR_`. */
  readonly envPrefix: string;
  /** Every option's default. */
  readonly defaults: C;
  /** The nested mapping of scalars, if any. */
  readonly group?: keyof C & string;
  /** Why a tenant ID cannot appear under `overrides` (undefined: it can). Default: any can. */
  readonly tenantError?: (tenant: string) => string | undefined;
  /** Smallest number any option accepts when read; smaller is `out_of_range`. */
  readonly min?: number;
}

/** A checked {@link SchemaSpec}, from {@link defineSchema}. */
export interface Schema<C extends object> extends SchemaSpec<C> {
  /** The scalar options, in the defaults' order. */
  readonly scalars: readonly string[];
  /** The group's defaults ({} without a group). */
  readonly groupDefaults: Readonly<Record<string, Scalar>>;
  /** Whether `overrides` is an option. */
  readonly tenants: boolean;
}

function isScalar(v: unknown): v is Scalar {
  return typeof v === "number" || typeof v === "boolean" || typeof v === "string";
}

/** Checks a spec (every default a scalar, but the group and `overrides`) once, at import. */
export function defineSchema<C extends object>(spec: SchemaSpec<C>): Schema<C> {
  const defaults = spec.defaults as Mapping;
  const scalars: string[] = [];
  let groupDefaults: Record<string, Scalar> = {};
  for (const [key, value] of Object.entries(defaults)) {
    if (key === spec.group) {
      if (!isMapping(value) || !Object.values(value).every(isScalar)) {
        throw new TypeError(`${spec.section}.${key}: a group holds scalars only`);
      }
      groupDefaults = value as Record<string, Scalar>;
    } else if (key !== "overrides") {
      if (!isScalar(value)) throw new TypeError(`${spec.section}.${key}: not a scalar`);
      scalars.push(key);
    }
  }
  const tenants = Object.hasOwn(defaults, "overrides");
  if (tenants && spec.group === undefined) {
    throw new TypeError(`${spec.section}: overrides need a group to lay over`);
  }
  return { ...spec, scalars, groupDefaults, tenants };
}

function readGroup<C extends object>(
  schema: Schema<C>,
  path: string,
  raw: unknown,
): Record<string, Scalar> {
  if (!isMapping(raw)) throw new ConfigError("invalid_type", path, "expected a mapping");
  const known = schema.groupDefaults;
  const out: Record<string, Scalar> = {};
  for (const [key, value] of Object.entries(raw)) {
    const template = Object.hasOwn(known, key) ? known[key] : undefined;
    if (template === undefined) {
      throw new ConfigError(
        "unknown_key",
        `${path}.${key}`,
        `known: ${Object.keys(known).join(", ")}`,
      );
    }
    out[key] = coerce(`${path}.${key}`, template, value, false, schema.min);
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
      const overrides: Record<string, Record<string, Scalar>> = {};
      for (const [tenant, o] of Object.entries(value)) {
        const error = schema.tenantError?.(tenant);
        if (error !== undefined) {
          throw new ConfigError("invalid_tenant", `${path}.${tenant}`, error);
        }
        overrides[tenant] = readGroup(schema, `${path}.${tenant}`, o);
      }
      out.overrides = overrides;
    } else if (schema.scalars.includes(key)) {
      out[key] = coerce(path, defaults[key] as Scalar, value, false, schema.min);
    } else {
      throw new ConfigError("unknown_key", path, `known: ${Object.keys(defaults).join(", ")}`);
    }
  }
  // Every value was coerced to its default's kind above.
  return out as C;
}

/**
 * Lays the environment over `config`: `envPrefix` + each scalar in UPPER_SNAKE_CASE, then
 * `envPrefix` + the group + each group option (`SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES`).
 * Overrides come only from the file. Errors name the variable.
 */
export function applyEnv<C extends object>(schema: Schema<C>, config: C, env: Env): C {
  const out: Mapping = { ...(config as Mapping) };
  const defaults = schema.defaults as Mapping;
  for (const key of schema.scalars) {
    const name = envName(schema.envPrefix, key);
    const raw = env[name];
    if (raw !== undefined) out[key] = coerce(name, defaults[key] as Scalar, raw, true, schema.min);
  }
  if (schema.group !== undefined) {
    const group: Mapping = { ...(out[schema.group] as Mapping) };
    for (const [key, template] of Object.entries(schema.groupDefaults)) {
      const name = envName(schema.envPrefix, schema.group, key);
      const raw = env[name];
      if (raw !== undefined) group[key] = coerce(name, template, raw, true, schema.min);
    }
    out[schema.group] = group;
  }
  return out as C;
}

/** Where a section comes from, lowest precedence first. */
export interface SectionSources {
  /** A YAML file: its section (`schema.section`) is read; keys named `section.key`. */
  readonly file?: string;
  /** Values laid over the file, keys named bare (the command line). */
  readonly values?: Readonly<Mapping>;
  /** Environment variables, laid over the values (default `process.env`). */
  readonly env?: Env;
  /** Values that win over everything, keys named bare (flags, tests). */
  readonly overrides?: Readonly<Mapping>;
}

/**
 * Reads a section: the defaults, then the file's section, `values`, the environment and
 * `overrides`. The caller validates relations between options after.
 */
export function loadSection<C extends object>(schema: Schema<C>, sources: SectionSources): C {
  let config = schema.defaults;
  if (sources.file !== undefined) {
    const values = section(readConfigFile(sources.file), schema.section);
    config = applyValues(schema, config, `${schema.section}.`, values);
  }
  if (sources.values !== undefined) config = applyValues(schema, config, "", sources.values);
  config = applyEnv(schema, config, sources.env ?? process.env);
  if (sources.overrides !== undefined) config = applyValues(schema, config, "", sources.overrides);
  return config;
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
