import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { ConfigError } from "./errors.js";

/** A YAML mapping, as parsed. */
export type Mapping = Record<string, unknown>;

/** Whether `v` is a mapping (not null, not a sequence). */
export function isMapping(v: unknown): v is Mapping {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads a YAML configuration file into its top-level mapping; an empty file is an empty
 * mapping. Throws `unreadable_file` or `invalid_yaml` (key: the path), or `invalid_type`
 * (key `(root)`) when the document is not a mapping.
 */
export function readConfigFile(path: string): Mapping {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError("unreadable_file", path, (error as Error).message);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new ConfigError("invalid_yaml", path, (error as Error).message);
  }
  if (doc == null) return {};
  if (!isMapping(doc)) throw new ConfigError("invalid_type", "(root)", "expected a mapping");
  return doc;
}

/**
 * Lays `over` on `base`, as a later `--config-file` on an earlier one: mappings merge key
 * by key, at every depth; any other value (a scalar, a list) replaces the earlier one
 * whole, as lists do in Loki's and Helm's layered values. A null over a mapping leaves the
 * mapping (a section written with only comments under it is null in YAML, and must not
 * erase what an earlier file set).
 */
export function layerMappings(base: Readonly<Mapping>, over: Readonly<Mapping>): Mapping {
  const out: Mapping = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const earlier = out[key];
    if (isMapping(earlier) && isMapping(value)) out[key] = layerMappings(earlier, value);
    else if (!(isMapping(earlier) && value == null)) out[key] = value;
  }
  return out;
}

/**
 * Reads several YAML files, each laid over the ones before ({@link layerMappings}), into
 * one mapping: a cluster's shared file first, then the role's. Errors are
 * {@link readConfigFile}'s, naming the file.
 */
export function readConfigFiles(paths: readonly string[]): Mapping {
  return paths.reduce<Mapping>((doc, path) => layerMappings(doc, readConfigFile(path)), {});
}

/**
 * One component's section of the file (`distributor`, `ingester`, ...): absent or null is
 * an empty mapping; anything else but a mapping is `invalid_type` naming the section.
 */
export function section(doc: Mapping, name: string): Mapping {
  const value = doc[name];
  if (value == null) return {};
  if (!isMapping(value)) throw new ConfigError("invalid_type", name, "expected a mapping");
  return value;
}
