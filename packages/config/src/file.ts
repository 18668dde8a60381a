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
 * One component's section of the file (`distributor`, `ingester`, ...): absent or null is
 * an empty mapping; anything else but a mapping is `invalid_type` naming the section.
 */
export function section(doc: Mapping, name: string): Mapping {
  const value = doc[name];
  if (value == null) return {};
  if (!isMapping(value)) throw new ConfigError("invalid_type", name, "expected a mapping");
  return value;
}
