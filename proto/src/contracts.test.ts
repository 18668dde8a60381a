/*
 * Each internal contract type is declared once in the whole tree, and both sides import
 * it (services/querier/src/contracts.test.ts checks, at the type level, that the ingester,
 * the gateway and their clients implement these very types). A second copy, even an
 * identical one, fails here: copies drift, and the wire and in-process paths then disagree.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, test } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

/** Every TypeScript source of the workspace's packages (src and bench), tests included. */
function sources(): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name === "dist") continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.(m|c)?ts$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {
        out.push({ path: relative(ROOT, path), text: readFileSync(path, "utf8") });
      }
    }
  };
  for (const group of ["packages", "services", "apps"]) {
    for (const pkg of readdirSync(join(ROOT, group), { withFileTypes: true })) {
      if (pkg.isDirectory()) walk(join(ROOT, group, pkg.name));
    }
  }
  walk(join(ROOT, "proto"));
  return out;
}

/** Contract type → the one file that declares it. */
const CONTRACTS: Record<string, string> = {
  IngesterQueryRequest: "proto/src/ingester.ts",
  IngesterEntry: "proto/src/ingester.ts",
  IngesterStream: "proto/src/ingester.ts",
  IngesterSeriesRequest: "proto/src/ingester.ts",
  IngesterSeries: "proto/src/ingester.ts",
  IngesterCallOptions: "proto/src/ingester.ts",
  IngesterQuerier: "proto/src/ingester.ts",
  IngesterTailRequest: "proto/src/ingester.ts",
  IngesterTailSink: "proto/src/ingester.ts",
  IngesterTail: "proto/src/ingester.ts",
  IngesterTailer: "proto/src/ingester.ts",
  FilterRequest: "proto/src/gateway.ts",
  FilterSeries: "proto/src/gateway.ts",
  FilterStats: "proto/src/gateway.ts",
  FilterResponse: "proto/src/gateway.ts",
  ChunkFilter: "proto/src/gateway.ts",
  BloomTest: "packages/logql/src/bloom.ts",
  BloomLocation: "packages/index/src/segment.ts",
  SegmentChunk: "packages/index/src/segment.ts",
  Label: "packages/labels/src/parse.ts",
};

/** Where `name` is declared as an interface, a type alias or a class. */
function declarations(files: readonly { path: string; text: string }[], name: string): string[] {
  // `type X =`, not `type X,` in an import list.
  const re = new RegExp(
    `^\\s*(export\\s+)?(declare\\s+)?(interface\\s+${name}\\b|class\\s+${name}\\b|type\\s+${name}\\s*(<[^>]*>)?\\s*=)`,
    "m",
  );
  return files.filter((f) => re.test(f.text)).map((f) => f.path);
}

// A `{name, value}` pair declared as its own interface (any name), members in either order.
const PAIR =
  /^\s*(?:export\s+)?interface\s+(\w+)\s*\{\s*(?:readonly\s+)?(name|value):\s*string;\s*(?:readonly\s+)?(?!\2)(?:name|value):\s*string;\s*\}/gm;

describe("internal contracts", () => {
  const files = sources();

  test("the scan sees the whole tree", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.some((f) => f.path === "proto/src/ingester.ts")).toBe(true);
  });

  test.each(Object.entries(CONTRACTS))("%s is declared once, in %s", (name, home) => {
    expect(declarations(files, name)).toEqual([home]);
  });

  test("one {name, value} pair type: @sieve/labels' Label", () => {
    const pairs: string[] = [];
    for (const f of files) {
      for (const m of f.text.matchAll(PAIR)) pairs.push(`${f.path} ${m[1]!}`);
    }
    expect(pairs).toEqual(["packages/labels/src/parse.ts Label"]);
  });
});
