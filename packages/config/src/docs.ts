/**
 * Every option documented from its schema: the rows of docs/configuration.md's tables
 * (name, variable, default, doc line), so the file cannot drift from the code.
 */
import type { Value } from "./coerce.js";
import type { Mapping } from "./file.js";
import { optionEnvName, optionPaths } from "./schema.js";
import type { Schema } from "./schema.js";

/** One documented option. */
export interface OptionRow {
  /** Its dotted path as shown (`limits.maxLineBytes`, or `server.port` at the top level). */
  readonly option: string;
  /** Its variable by the naming rule, and an older name still read, if any. */
  readonly env: string;
  readonly alias?: string;
  /** The default as documented. */
  readonly shownDefault: string;
  /** One line. */
  readonly doc: string;
}

const BINARY = [
  [1024 ** 3, "GiB"],
  [1024 ** 2, "MiB"],
  [1024, "KiB"],
] as const;
const DURATION = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "m"],
  [1000, "s"],
] as const;

/** `16777216 (16 MiB)`, `1800000 (30m)`: the unit in the name says which reading helps. */
function showNumber(path: string, n: number): string {
  const units = path.endsWith("Bytes") ? BINARY : path.endsWith("Ms") ? DURATION : [];
  for (const [size, unit] of units) {
    if (n >= size && n % size === 0) {
      return `${n} (${n / size}${unit.length > 1 ? " " : ""}${unit})`;
    }
  }
  return String(n);
}

function showValue(path: string, value: Value): string {
  if (value === null) return "unset";
  if (Array.isArray(value)) return value.length === 0 ? "" : `\`${value.join(",")}\``;
  if (typeof value === "number") return showNumber(path, value);
  if (typeof value === "string") return value === "" ? "" : `\`${value}\``;
  return `\`${String(value)}\``;
}

/**
 * The rows of a schema, in its order, `overrides` last. `prefix` is put before each path
 * (`server.` for the top-level sections, "" inside a component's section). Throws when an
 * option has no doc line: every option is documented.
 */
export function optionRows<C extends object>(schema: Schema<C>, prefix = ""): OptionRow[] {
  const defaults = schema.defaults as Mapping;
  const docs = (schema.docs ?? {}) as Readonly<Record<string, unknown>>;
  const rows: OptionRow[] = optionPaths(schema).map((path) => {
    const [head, tail] = path.split(".") as [string, string | undefined];
    const doc = tail === undefined ? docs[head] : (docs[head] as Mapping | undefined)?.[tail];
    if (typeof doc !== "string" || doc === "") {
      throw new Error(`${schema.section}.${path}: every option needs a one-line doc`);
    }
    const value = (tail === undefined ? defaults[head] : schema.groupDefaults[tail]) as Value;
    const alias = schema.envAliases?.[path];
    return {
      option: prefix + path,
      env: optionEnvName(schema, path),
      ...(alias !== undefined && { alias }),
      shownDefault: schema.shownDefaults?.[path] ?? showValue(path, value),
      doc,
    };
  });
  if (schema.tenants) {
    rows.push({
      option: `${prefix}overrides`,
      env: "",
      shownDefault: "",
      doc: `per-tenant changes to \`${String(schema.group)}\`, by tenant ID (file only): \`overrides: { team-a: { … } }\``,
    });
  }
  return rows;
}

/**
 * A cell's width in code points. Prettier measures display width; the two agree because
 * the docs hold no wide characters (CJK, emoji).
 */
function width(text: string): number {
  return Array.from(text).length;
}

/** A table cell: pipes escaped, as markdown needs. */
function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

/**
 * A markdown table laid out as prettier lays it out (each column padded to its widest
 * cell, at least 3), so `prettier --check` and the generated text agree.
 */
export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const all = [header, ...rows].map((row) => row.map(cell));
  const widths = header.map((_, i) => Math.max(3, ...all.map((row) => width(row[i] ?? ""))));
  const line = (row: readonly string[]): string =>
    `| ${row.map((c, i) => c + " ".repeat(widths[i]! - width(c))).join(" | ")} |`;
  const rule = `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`;
  return [line(all[0]!), rule, ...all.slice(1).map(line)].join("\n");
}

/** The options table of some rows: option, environment, default, meaning. */
export function optionsTable(rows: readonly OptionRow[]): string {
  return markdownTable(
    ["option", "environment", "default", "meaning"],
    rows.map((r) => [
      `\`${r.option}\``,
      r.env === "" ? "" : `\`${r.env}\`${r.alias === undefined ? "" : ` (or \`${r.alias}\`)`}`,
      r.shownDefault,
      r.doc,
    ]),
  );
}
