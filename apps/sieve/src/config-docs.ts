/**
 * The options tables of docs/configuration.md, generated from the schemas: the shared
 * top-level options (this command's) and each component's section (its own schema). The
 * prose around them is the file's; only the text between `<!-- options: NAME -->` and
 * `<!-- /options -->` is generated (`pnpm docs:config` writes it, config-docs.test.ts
 * fails when the file and the schemas disagree).
 */
import { optionRows, optionsTable } from "@sieve/config";
import { COMPONENT_SCHEMAS, SIEVE_OPTIONS } from "./config.js";

/** Every generated table, by the name its markers carry. */
export function configTables(): Record<string, string> {
  const { distributor, ingester, querier, bloomGateway, compactor } = COMPONENT_SCHEMAS;
  return {
    shared: optionsTable(SIEVE_OPTIONS),
    distributor: optionsTable(optionRows(distributor)),
    ingester: optionsTable(optionRows(ingester)),
    querier: optionsTable(optionRows(querier)),
    bloomGateway: optionsTable(optionRows(bloomGateway)),
    compactor: optionsTable(optionRows(compactor)),
  };
}

const REGION = /(<!-- options: (\w+) -->)[\s\S]*?(<!-- \/options -->)/g;

/**
 * `text` (docs/configuration.md) with every marked region holding its table. Throws when
 * a marker names no table or a table has no marker, so no option goes undocumented.
 */
export function renderConfigDocs(text: string): string {
  const tables = configTables();
  const seen = new Set<string>();
  const out = text.replace(REGION, (_all, open: string, name: string, close: string) => {
    const table = tables[name];
    if (table === undefined) throw new Error(`docs: no options table named ${name}`);
    seen.add(name);
    return `${open}\n\n${table}\n\n${close}`;
  });
  const missing = Object.keys(tables).filter((name) => !seen.has(name));
  if (missing.length > 0) {
    throw new Error(`docs: no <!-- options: NAME --> region for ${missing.join(", ")}`);
  }
  return out;
}
