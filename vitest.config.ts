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
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { sourceEntries } from "./scripts/workspace.js";

const ROOT = import.meta.dirname;

/**
 * One alias per entry of every workspace package's "exports" map: `@sieve/config/testing`
 * to `packages/config/src/testing.ts`. Without them, `@sieve/x` resolves through the
 * node_modules symlink to `dist/`, and a test would run whatever was last built: a stale
 * build could make it pass. Generated, so a new package or entry point needs no change here.
 */
function sourceAliases(): { find: RegExp; replacement: string }[] {
  return (
    sourceEntries(ROOT)
      // A package being written may not have its source yet; it then resolves as before,
      // and tests/source-resolution.test.ts fails until it does.
      .filter(({ source }) => existsSync(source))
      // Anchored: `@sieve/config` must not also capture `@sieve/config/testing`.
      .map(({ specifier, source }) => ({
        find: new RegExp(`^${escapeRegExp(specifier)}$`),
        replacement: source,
      }))
  );
}

/**
 * The native addons of another install tree, when `$NODE_LTS_ADDONS` names its node_modules:
 * `scripts/node-lts.sh` runs the unit tests on the image's Node, whose ABI the workspace's
 * re2 was not built for, and builds re2 for it there. Every package of that tree with a
 * `binding.gyp` (an addon) is resolved there instead; its build-time dependencies are not.
 */
function addonAliases(): { find: RegExp; replacement: string }[] {
  const dir = process.env.NODE_LTS_ADDONS;
  if (dir === undefined || dir === "") return [];
  return readdirSync(dir)
    .filter((name) => existsSync(join(dir, name, "binding.gyp")))
    .map((name) => ({ find: new RegExp(`^${escapeRegExp(name)}$`), replacement: join(dir, name) }));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Where test files live. */
const TEST_DIRS = ["packages/*/src", "services/*/src", "proto/src", "apps/*/src", "tests"];

const INTEGRATION = TEST_DIRS.map((dir) => `${dir}/**/*.int.test.ts`);

export default defineConfig({
  resolve: { alias: [...sourceAliases(), ...addonAliases()] },
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
