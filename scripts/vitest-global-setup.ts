// Global setup of the `integration` vitest project (see vitest.config.ts): builds the
// workspace with `tsc -b` before any integration test runs. Tests import workspace
// packages from source, but worker threads and child processes cannot load TypeScript:
// the querier's query workers, the distributor's push workers and `sieve` itself
// (apps/sieve/dist/main.js) run the built JavaScript. Building first means they can never
// run a stale build. `tsc -b` is incremental: 1.5-2.5 s when nothing changed and the tree
// type-checks (a project with type errors is checked again on every build).
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const ROOT = join(import.meta.dirname, "..");

/**
 * Builds the workspace. Type errors do not stop the tests: tsc (≥ 5.6, without
 * `noEmitOnError`) still writes the JavaScript of every file, so nothing is stale, and
 * vitest does not type-check sources either (`npm test` fails on them in its build step).
 * An error that is not in a source file (a missing or broken tsconfig, a reference cycle:
 * tsc skips that project's outputs) throws, which stops the run.
 */
export function setup(): void {
  // typescript's own bin from the workspace, run by this Node: no PATH or pnpm needed.
  const typescript = createRequire(join(ROOT, "package.json")).resolve("typescript/package.json");
  const build = spawnSync(
    process.execPath,
    [join(dirname(typescript), "bin", "tsc"), "-b", "--pretty", "false"],
    { cwd: ROOT, encoding: "utf8" },
  );
  if (build.error !== undefined) throw build.error;
  if (build.status === 0) return;
  const output = `${build.stdout}${build.stderr}`.trim();
  // `file(line,col): error TS…` is a diagnostic in a source file; anything else is not.
  const inSources = output
    .split("\n")
    .filter((line) => /^\S.*\(\d+,\d+\): error TS\d+:/.test(line));
  const elsewhere = output.split("\n").filter((line) => /^error TS\d+:/.test(line));
  if (build.status === null || build.status > 2 || elsewhere.length > 0 || inSources.length === 0) {
    throw new Error(
      `tsc -b failed (exit ${build.status ?? build.signal ?? "?"}), so integration tests could run a stale build:\n${output}`,
    );
  }
  console.warn(
    `tsc -b: ${inSources.length} type errors; every file was still built (\`pnpm build\` lists them). First:\n${inSources.slice(0, 3).join("\n")}`,
  );
}
