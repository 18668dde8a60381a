/**
 * The Dockerfile and .dockerignore, read as files: no Docker engine runs here, so the
 * image is never built by the suite. What can go wrong without one is checked instead: the
 * base pinned by version and digest and the same Node as scripts/node-lts.sh (which runs
 * the unit tests on it), a build stage and a runtime stage, production dependencies only,
 * an unprivileged user, the health check on /ready, `sieve` as the entry point, every COPY
 * source present in the build context, and the context free of installs, builds and data.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { REPO, repoText } from "./deploy.test-helper.js";
import { TARGETS } from "./targets.js";

/** One instruction: its keyword (upper case) and the rest, continuation lines joined. */
interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/** The Dockerfile's instructions, comments and blank lines dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (pending === "" && (line === "" || line.startsWith("#"))) continue;
    if (line.startsWith("#")) continue; // a comment inside a continued instruction
    if (line.endsWith("\\")) {
      pending += line.slice(0, -1) + " ";
      continue;
    }
    const whole = pending + line;
    pending = "";
    const space = whole.search(/\s/);
    out.push({ keyword: whole.slice(0, space).toUpperCase(), args: whole.slice(space + 1).trim() });
  }
  return out;
}

/** The build stages: the instructions from one FROM to the next. */
function stages(all: readonly Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const instruction of all) {
    if (instruction.keyword === "FROM") out.push([]);
    out[out.length - 1]?.push(instruction);
  }
  return out;
}

/** A .dockerignore pattern as a regular expression over context-relative paths (Go's filepath.Match, plus `**`). */
function ignoreRegExp(pattern: string): RegExp {
  let source = "";
  const p = pattern.replace(/^\/+/, "").replace(/\/+$/, "");
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === "*" && p[i + 1] === "*") {
      // `**/` matches any number of directories, including none.
      source += p[i + 2] === "/" ? "(?:.*/)?" : ".*";
      i += p[i + 2] === "/" ? 2 : 1;
    } else if (c === "*") source += "[^/]*";
    else if (c === "?") source += "[^/]";
    else source += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  // A directory's pattern also excludes everything under it.
  return new RegExp(`^${source}(?:/.*)?$`);
}

const ignorePatterns = repoText(".dockerignore")
  .split("\n")
  .map((line) => line.trim())
  .filter((line) => line !== "" && !line.startsWith("#"));

/** Whether `docker build .` leaves `path` (relative to the root) out of the context. */
function ignored(path: string): boolean {
  let excluded = false;
  for (const pattern of ignorePatterns) {
    const negated = pattern.startsWith("!");
    if (ignoreRegExp(negated ? pattern.slice(1) : pattern).test(path)) excluded = !negated;
  }
  return excluded;
}

const dockerfile = instructions(repoText("Dockerfile"));
const [build, runtime] = stages(dockerfile) as [Instruction[], Instruction[]];
/** The value of `ARG NAME=value` anywhere in the file. */
function arg(name: string): string | undefined {
  const found = dockerfile.find((i) => i.keyword === "ARG" && i.args.startsWith(`${name}=`));
  return found?.args.slice(name.length + 1);
}
function find(stage: readonly Instruction[], keyword: string): Instruction[] {
  return stage.filter((i) => i.keyword === keyword);
}

describe("Dockerfile", () => {
  test("builds FROM the current Node LTS, slim, pinned by version and digest, the Node the unit tests also run on", () => {
    const image = arg("NODE_IMAGE");
    expect(image).toMatch(/^node:\d+\.\d+\.\d+-bookworm-slim@sha256:[0-9a-f]{64}$/);
    const version = /^node:(\d+\.\d+\.\d+)-/.exec(image!)![1]!;
    // Even majors are Node's LTS lines.
    expect(Number(version.split(".")[0]) % 2).toBe(0);
    expect(Number(version.split(".")[0])).toBeGreaterThanOrEqual(26);
    const script = repoText("scripts/node-lts.sh");
    expect(/^NODE_LTS_VERSION=(\S+)$/m.exec(script)?.[1]).toBe(version);
    // Both stages start from that one base.
    const froms = find(dockerfile, "FROM").map((i) => i.args);
    expect(froms).toEqual(["${NODE_IMAGE} AS build", "${NODE_IMAGE}"]);
  });

  test("the build stage installs with the lockfile, builds, and deploys production dependencies only", () => {
    const runs = find(build, "RUN").map((i) => i.args);
    const pnpm = JSON.parse(repoText("package.json")) as { packageManager: string };
    expect(arg("PNPM_VERSION")).toBe(pnpm.packageManager.replace(/^pnpm@/, ""));
    expect(runs.some((r) => r.includes("pnpm fetch"))).toBe(true);
    const install = runs.find((r) => r.includes("pnpm install"));
    expect(install).toContain("--frozen-lockfile");
    expect(install).toContain("pnpm run build");
    expect(install).toMatch(/pnpm --filter @sieve\/sieve deploy --legacy --prod \/out/);
    // The runtime stage gets the deployed tree and nothing else from the build.
    expect(find(runtime, "COPY").map((i) => i.args)).toEqual(["--from=build /out /opt/sieve"]);
  });

  test("runs as the unprivileged node user, with `sieve` as the entry point and `all` as the default target", () => {
    const users = find(runtime, "USER").map((i) => i.args);
    expect(users).toEqual(["node"]);
    const userAt = runtime.findIndex((i) => i.keyword === "USER");
    const entryAt = runtime.findIndex((i) => i.keyword === "ENTRYPOINT");
    expect(userAt).toBeGreaterThan(-1);
    expect(userAt).toBeLessThan(entryAt);
    expect(JSON.parse(find(runtime, "ENTRYPOINT")[0]!.args)).toEqual(["sieve"]);
    const cmd = JSON.parse(find(runtime, "CMD")[0]!.args) as string[];
    expect(cmd).toEqual(["all"]);
    expect(TARGETS).toContain(cmd[0]);
    // `sieve` is the deployed command (package.json's bin), linked onto PATH.
    const bin = (JSON.parse(repoText("apps/sieve/package.json")) as { bin: { sieve: string } }).bin
      .sieve;
    const entry = bin.replace(/^\.\//, "");
    expect(entry).toMatch(/^dist\/\w+\.js$/);
    expect(find(runtime, "RUN")[0]!.args).toContain(
      `ln -s /opt/sieve/${entry} /usr/local/bin/sieve`,
    );
    expect(find(build, "RUN").at(-1)!.args).toContain(`chmod 0755 /out/${entry}`);
  });

  test("checks its health on /ready, on the port the server listens on", () => {
    const health = find(runtime, "HEALTHCHECK");
    expect(health).toHaveLength(1);
    expect(health[0]!.args).toMatch(/--interval=\d+s/);
    const command = JSON.parse(
      health[0]!.args.slice(health[0]!.args.indexOf("CMD") + 3),
    ) as string[];
    expect(command[0]).toBe("node");
    expect(command.join(" ")).toContain("/ready");
    expect(command.join(" ")).toContain("SIEVE_SERVER_PORT");
    expect(find(runtime, "EXPOSE").map((i) => i.args)).toEqual(["3100"]);
  });

  test("every COPY source is in the build context", () => {
    const copies = dockerfile.filter((i) => i.keyword === "COPY" && !i.args.startsWith("--from"));
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const parts = copy.args.split(/\s+/).filter((p) => !p.startsWith("--"));
      for (const source of parts.slice(0, -1)) {
        expect(existsSync(join(REPO, source)), `COPY ${source}`).toBe(true);
        if (source !== ".") expect(ignored(source), `COPY ${source} is .dockerignored`).toBe(false);
      }
    }
  });
});

describe(".dockerignore", () => {
  test("keeps installs, builds, caches, local data and git out of the context", () => {
    for (const path of [
      "node_modules",
      "node_modules/.pnpm/re2@1.27.1/node_modules/re2/build/Release/re2.node",
      "apps/sieve/node_modules",
      "services/ingester/node_modules/@sieve/queue",
      ".cache",
      ".cache/minio/bin/minio",
      ".tools",
      ".git",
      "apps/sieve/dist/index.js",
      "packages/bloom/tsconfig.build.tsbuildinfo",
      "data",
      "data/wal/0",
      "apps/sieve/data/store",
      "results/fp-sweep",
      "services/querier/bench/results/x.json",
    ]) {
      expect(ignored(path), path).toBe(true);
    }
  });

  test("sends what the build needs", () => {
    for (const path of [
      "package.json",
      "pnpm-lock.yaml",
      "pnpm-workspace.yaml",
      "tsconfig.base.json",
      "tsconfig.json",
      "apps/sieve/src/main.ts",
      "apps/sieve/tsconfig.build.json",
      "packages/logql/src/regex.ts",
      "services/ingester/src/index.ts",
      "proto/src/index.ts",
    ]) {
      expect(existsSync(join(REPO, path)), path).toBe(true);
      expect(ignored(path), path).toBe(false);
    }
  });
});
