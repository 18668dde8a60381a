// Tests import workspace packages from source: `@sieve/x` (and every other entry of a
// package's "exports", such as `@sieve/config/testing`) must be the very module at
// `src/…ts`, not the built `dist/…js` that node_modules points at, or a stale build could
// make a test pass. vitest.config.ts generates the aliases; this checks each of them from
// the package.json files themselves, so a package whose entry has no source fails here.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");

interface Entry {
  /** What a test imports: `@sieve/config/testing`. */
  readonly specifier: string;
  /** The TypeScript source the built entry comes from, absolute. */
  readonly source: string;
}

/** Every entry point of every workspace package (the folders pnpm-workspace.yaml lists). */
function workspaceEntries(): Entry[] {
  const yaml = readFileSync(join(ROOT, "pnpm-workspace.yaml"), "utf8");
  const list = /^packages:\n((?:[ \t]+-[ \t]+\S+\n?)+)/m.exec(yaml)?.[1] ?? "";
  const patterns = [...list.matchAll(/-\s+(\S+)/g)].map((match) => match[1]!);
  const dirs = patterns.flatMap((pattern) =>
    pattern.endsWith("/*")
      ? readdirSync(join(ROOT, pattern.slice(0, -2))).map((name) =>
          join(ROOT, pattern.slice(0, -2), name),
        )
      : [join(ROOT, pattern)],
  );
  const entries: Entry[] = [];
  for (const dir of dirs) {
    if (!existsSync(join(dir, "package.json"))) continue;
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      name: string;
      exports?: Record<string, { import?: string }>;
    };
    for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
      if (target.import === undefined) continue;
      entries.push({
        specifier: subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`,
        source: resolve(
          dir,
          target.import.replace(/^\.\/dist\//, "./src/").replace(/\.js$/, ".ts"),
        ),
      });
    }
  }
  return entries;
}

const ENTRIES = workspaceEntries();

describe("workspace packages in tests", () => {
  it("finds every package, including an entry below the root (`@sieve/config/testing`)", () => {
    const specifiers = ENTRIES.map((entry) => entry.specifier);
    expect(specifiers).toContain("@sieve/labels");
    expect(specifiers).toContain("@sieve/config/testing");
    expect(specifiers.length).toBeGreaterThanOrEqual(14);
  });

  it.each(ENTRIES)("$specifier is its source module", async ({ specifier, source }) => {
    expect(existsSync(source), `${relative(ROOT, source)} exists`).toBe(true);
    // One module id, one instance: the same namespace object only if the name resolved to
    // this very file (the built file would be a second, different module).
    const byName: unknown = await import(/* @vite-ignore */ specifier);
    const bySource: unknown = await import(/* @vite-ignore */ source);
    expect(byName).toBe(bySource);
  });
});
