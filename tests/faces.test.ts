// A service's face (services/*/src/index.ts) is what other packages use, and nothing
// more. The services are not libraries: a name they export that no other package imports
// is a detail leaking out, and a newcomer reading the face cannot tell it from the API.
// The service's own tests and benchmarks import its modules directly (`./querier.js`).
//
// Reads files only. "Other packages" are every workspace package's src/, bench/ and
// scripts/, and the root's tests/ and scripts/. A name counts as used when another package
// imports it from `@sieve/<service>` by name (`import { X }`, `export { X } from`,
// `ns.X` after `import * as ns`), or, for a dynamic `import("@sieve/<service>")`, when the
// name appears in that file (its binding is destructured there, often from Promise.all).
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { workspacePackages } from "../scripts/workspace.js";

const ROOT = resolve(import.meta.dirname, "..");

/** Folders of another package whose files may import a service. */
const SOURCE_DIRS = ["src", "bench", "scripts"];

/** The TypeScript and JavaScript files under `dir`, skipping dependencies and builds. */
function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((file) => /\.(?:ts|mts|js|mjs)$/.test(file))
    .filter((file) => !/(?:^|[/\\])(?:node_modules|dist)[/\\]/.test(file))
    .map((file) => join(dir, file));
}

/** `a`, `type b`, `c as d` → the local names on one side of `as` (`0` before, `1` after). */
function listNames(list: string, side: 0 | 1): string[] {
  return list
    .split(",")
    .map((item) => item.trim().replace(/^type\s+/, ""))
    .filter((item) => item !== "")
    .map((item) => {
      const parts = item.split(/\s+as\s+/);
      return (side === 1 ? parts[parts.length - 1] : parts[0])!;
    });
}

/** The names an index.ts exports; `export *` is refused, it hides what the face is. */
function exportedNames(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  expect(code, "export * hides what a face exports: list the names").not.toMatch(
    /export\s+(?:type\s+)?\*/,
  );
  const names = [...code.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)].flatMap(([, list]) =>
    listNames(list!, 1),
  );
  for (const [, name] of code.matchAll(
    /export\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([\w$]+)/g,
  )) {
    names.push(name!);
  }
  return names;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The names `source` imports from `specifier` (see the top of this file for how). */
function importedNames(source: string, specifier: string): string[] {
  const from = `\\s*from\\s*["']${escape(specifier)}["']`;
  const named = new RegExp(
    `(?:import|export)\\s+(?:type\\s+)?(?:[\\w$]+\\s*,\\s*)?\\{([^}]*)\\}${from}`,
    "g",
  );
  const names = [...source.matchAll(named)].flatMap(([, list]) => listNames(list!, 0));
  const namespace = new RegExp(`import\\s+(?:type\\s+)?\\*\\s+as\\s+([\\w$]+)${from}`, "g");
  for (const [, ns] of source.matchAll(namespace)) {
    for (const [, name] of source.matchAll(new RegExp(`\\b${escape(ns!)}\\.([\\w$]+)`, "g"))) {
      names.push(name!);
    }
  }
  if (new RegExp(`import\\(\\s*["']${escape(specifier)}["']\\s*\\)`).test(source)) {
    names.push(...(source.match(/[\w$]+/g) ?? []));
  }
  return names;
}

/** The workspace packages, with folders relative to the root (`services/querier`). */
const WORKSPACES = workspacePackages(ROOT).map(({ name, dir }) => ({
  name,
  dir: relative(ROOT, dir),
}));
type Workspace = (typeof WORKSPACES)[number];
const SERVICES = WORKSPACES.filter(
  (w) => w.dir.startsWith("services/") && existsSync(join(ROOT, w.dir, "src/index.ts")),
);

/** Every source file of the packages other than `service`, the root's included. */
function otherFiles(service: Workspace): string[] {
  const roots = WORKSPACES.filter((w) => w !== service)
    .flatMap((w) => SOURCE_DIRS.map((d) => join(ROOT, w.dir, d)))
    .concat(["tests", "scripts"].map((d) => join(ROOT, d)));
  return roots.flatMap(sourceFiles);
}

describe("a service's index.ts exports only what other packages import", () => {
  it("finds the services", () => {
    expect(SERVICES.map((s) => s.name)).toEqual(
      expect.arrayContaining(["@sieve/querier", "@sieve/ingester", "@sieve/distributor"]),
    );
  });

  for (const service of SERVICES) {
    it(service.name, () => {
      const index = join(service.dir, "src/index.ts");
      const exported = exportedNames(readFileSync(join(ROOT, index), "utf8"));
      expect(exported.length, `${index} exports nothing the parser sees`).toBeGreaterThan(0);
      const used = new Set(
        otherFiles(service).flatMap((file) =>
          importedNames(readFileSync(file, "utf8"), service.name),
        ),
      );
      const unused = exported.filter((name) => !used.has(name));
      expect(
        unused,
        `${index} exports names no other package imports from ${service.name}: drop them ` +
          `(its own tests and benchmarks import the module files directly)`,
      ).toEqual([]);
    });
  }
});
