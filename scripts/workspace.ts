// The workspace's packages, read from pnpm-workspace.yaml and each package.json: for
// vitest.config.ts (source aliases) and the tests that check the packages' faces and
// their resolution from source (tests/).
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";

/** A workspace package: its name and absolute folder, and its "exports" map. */
export interface WorkspacePackage {
  readonly name: string;
  readonly dir: string;
  readonly exports: Readonly<
    Record<string, { readonly import?: string; readonly default?: string }>
  >;
}

/** One entry point of a package: what a test imports, and the source it is built from. */
export interface SourceEntry {
  /** `@sieve/config/testing`. */
  readonly specifier: string;
  /** The TypeScript source the built entry comes from, absolute (`src/testing.ts`). */
  readonly source: string;
}

/** The workspace packages in the folders pnpm-workspace.yaml lists (`dir/*` or `dir`). */
export function workspacePackages(root: string): WorkspacePackage[] {
  const yaml = readFileSync(join(root, "pnpm-workspace.yaml"), "utf8");
  // Only the `packages:` list is read; a YAML library would be one more root dependency
  // for four lines of a file this project writes itself.
  const list = /^packages:\n((?:\s+-\s+.+\n?)+)/m.exec(yaml)?.[1] ?? "";
  const dirs: string[] = [];
  for (const match of list.matchAll(/-\s+["']?([^"'\n]+?)["']?\s*$/gm)) {
    const pattern = match[1]!;
    if (pattern.endsWith("/*")) {
      const parent = join(root, pattern.slice(0, -2));
      for (const entry of readdirSync(parent, { withFileTypes: true })) {
        if (entry.isDirectory()) dirs.push(join(parent, entry.name));
      }
    } else {
      dirs.push(join(root, pattern));
    }
  }
  return dirs
    .filter((dir) => existsSync(join(dir, "package.json")))
    .map((dir) => {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name: string;
        exports?: WorkspacePackage["exports"];
      };
      return { name: pkg.name, dir, exports: pkg.exports ?? {} };
    });
}

/**
 * Every entry of every package's "exports", with the source it is built from: every
 * package builds `src/` into `dist/` (rootDir and outDir of its tsconfig.build.json).
 */
export function sourceEntries(root: string): SourceEntry[] {
  return workspacePackages(root).flatMap(({ name, dir, exports }) =>
    Object.entries(exports).flatMap(([subpath, target]) => {
      const built = target.import ?? target.default;
      if (built === undefined) return [];
      const source = resolve(dir, built.replace(/^\.\/dist\//, "./src/").replace(/\.js$/, ".ts"));
      return [{ specifier: subpath === "." ? name : `${name}/${subpath.slice(2)}`, source }];
    }),
  );
}
