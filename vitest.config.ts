// The test suite: two vitest projects over one set of source-resolved workspace packages.
//
// - `unit`: pure and in-process. No network server (fastify's `inject` is fine), no child
//   process, no worker thread, no Kafka or S3. Needs nothing running and no build.
// - `integration`: real Kafka (KAFKA_BROKERS), MinIO (S3_ENDPOINT, or a private one),
//   HTTP servers over loopback, child processes, worker pools, crash tests. A file is an
//   integration test when it is named `*.int.test.ts`.
//
// `vitest run` runs both (that is what `npm test` does); one of them:
// `pnpm exec vitest run --project unit` (or `--project integration`), optionally followed
// by paths. `sh scripts/classify-tests.sh` prints which project each test file is in.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { defineConfig } from "vitest/config";

const ROOT = import.meta.dirname;

/** The workspace's package folders, as pnpm-workspace.yaml lists them (`dir/*` or `dir`). */
function workspaceDirs(): string[] {
  const yaml = readFileSync(join(ROOT, "pnpm-workspace.yaml"), "utf8");
  // Only the `packages:` list is read; a YAML library would be one more root dependency
  // for four lines of a file this project writes itself.
  const list = /^packages:\n((?:\s+-\s+.+\n?)+)/m.exec(yaml)?.[1] ?? "";
  const dirs: string[] = [];
  for (const match of list.matchAll(/-\s+["']?([^"'\n]+?)["']?\s*$/gm)) {
    const pattern = match[1]!;
    if (pattern.endsWith("/*")) {
      const parent = join(ROOT, pattern.slice(0, -2));
      for (const entry of readdirSync(parent, { withFileTypes: true })) {
        if (entry.isDirectory()) dirs.push(join(parent, entry.name));
      }
    } else {
      dirs.push(join(ROOT, pattern));
    }
  }
  return dirs.filter((dir) => existsSync(join(dir, "package.json")));
}

interface PackageJson {
  readonly name: string;
  readonly exports?: Record<string, { readonly import?: string; readonly default?: string }>;
}

/**
 * One alias per entry of every workspace package's "exports" map: `@sieve/config/testing`
 * to `packages/config/src/testing.ts`. Without them, `@sieve/x` resolves through the
 * node_modules symlink to `dist/`, and a test would run whatever was last built: a stale
 * build could make it pass. Generated, so a new package or entry point needs no change
 * here. Every package builds `src/` into `dist/` (rootDir and outDir of its
 * tsconfig.build.json).
 */
function sourceAliases(): { find: RegExp; replacement: string }[] {
  const aliases: { find: RegExp; replacement: string }[] = [];
  for (const dir of workspaceDirs()) {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
    for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
      const built = target.import ?? target.default;
      if (built === undefined) continue;
      const source = resolve(dir, built.replace(/^\.\/dist\//, "./src/").replace(/\.js$/, ".ts"));
      // A package being written may not have its source yet; it then resolves as before,
      // and tests/source-resolution.test.ts fails until it does.
      if (!existsSync(source)) continue;
      const specifier = subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`;
      // Anchored: `@sieve/config` must not also capture `@sieve/config/testing`.
      aliases.push({ find: new RegExp(`^${escapeRegExp(specifier)}$`), replacement: source });
    }
  }
  return aliases;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Where test files live. */
const TEST_DIRS = ["packages/*/src", "services/*/src", "proto/src", "apps/*/src", "tests"];

const INTEGRATION = TEST_DIRS.map((dir) => `${dir}/**/*.int.test.ts`);

export default defineConfig({
  resolve: { alias: sourceAliases() },
  test: {
    // Both projects: the integration tests need it (Kafka rebalances, MinIO restarts,
    // crash loops), and the unit tests' property tests (bloom false-positive rates measured
    // over a million keys) take 10 s on a busy two-core machine.
    testTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: TEST_DIRS.map((dir) => `${dir}/**/*.test.ts`),
          exclude: ["**/node_modules/**", "**/dist/**", ...INTEGRATION],
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: INTEGRATION,
          exclude: ["**/node_modules/**", "**/dist/**"],
          // Worker threads (the querier's query pool, the distributor's push workers) and
          // child processes (`sieve` from apps/sieve/dist/main.js, the crash tests) load
          // built JavaScript, never vitest's sources. This builds it first (`tsc -b`,
          // incremental), so those can never run a stale build either.
          globalSetup: ["scripts/vitest-global-setup.ts"],
        },
      },
    ],
  },
});
