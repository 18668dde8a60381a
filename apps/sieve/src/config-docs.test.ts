import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { configTables, renderConfigDocs } from "./config-docs.js";
import { SIEVE_OPTIONS } from "./config.js";

const DOC = fileURLToPath(new URL("../../../docs/configuration.md", import.meta.url));

describe("docs/configuration.md", () => {
  it("holds the options tables generated from the schemas (pnpm docs:config writes them)", () => {
    const text = readFileSync(DOC, "utf8");
    expect(renderConfigDocs(text)).toBe(text);
  });

  it("names every variable by the one rule: SIEVE_ + the dotted path in UPPER_SNAKE_CASE", () => {
    const rows = [...SIEVE_OPTIONS];
    expect(rows.map((r) => r.env)).toContain("SIEVE_SERVER_PORT");
    for (const row of rows) {
      const rule = `SIEVE_${row.option
        .replace(/[A-Z]/g, (c) => `_${c}`)
        .replaceAll(".", "_")
        .toUpperCase()}`;
      expect(row.env).toBe(rule);
    }
    const tables = configTables();
    expect(tables.querier).toContain("`SIEVE_QUERIER_LIMITS_MAX_ENTRIES_LIMIT_PER_QUERY`");
    expect(tables.bloomGateway).toContain("`SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES`");
  });

  it("refuses a region naming no table, and a table with no region", () => {
    expect(() => renderConfigDocs("<!-- options: nope -->\n<!-- /options -->\n")).toThrow(/nope/);
    expect(() => renderConfigDocs("no markers\n")).toThrow(/no <!-- options/);
  });
});
