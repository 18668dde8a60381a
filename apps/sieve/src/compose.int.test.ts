/**
 * docker-compose.yml validated by the Compose CLI itself (`sh scripts/compose.sh config`:
 * `docker compose config`, or Debian's docker-compose, which scripts/test.sh installs), as
 * `docker compose up` would read it before starting anything: the schema, the anchors and
 * merge keys, the dependencies. No Docker engine is needed, and none runs here: the images
 * are never pulled or built by the suite. A broken copy must fail, so the check is not
 * vacuous.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile, cp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { REPO } from "./deploy.test-helper.js";

const run = promisify(execFile);

/** `sh scripts/compose.sh config FILE`: exit code and output. */
async function composeConfig(file: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run("sh", [join(REPO, "scripts/compose.sh"), "config", file]);
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

let dir: string;

beforeAll(async () => {
  // A copy of the file beside copies of what it mounts, so a broken variant can be checked
  // without touching the repository.
  dir = await mkdtemp(join(tmpdir(), "sieve-compose-"));
  await cp(join(REPO, "deploy"), join(dir, "deploy"), { recursive: true });
  await cp(join(REPO, "Dockerfile"), join(dir, "Dockerfile"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the Compose CLI", () => {
  test("validates docker-compose.yml", async () => {
    const { code, output } = await composeConfig(join(REPO, "docker-compose.yml"));
    expect(output).toBe("");
    expect(code).toBe(0);
  }, 120_000);

  test.each([
    [
      "a dependency on a service that does not exist",
      (t: string) => t.replace("minio-init:\n        condition", "minio-setup:\n        condition"),
    ],
    [
      "an unknown depends_on condition",
      (t: string) =>
        t.replace("condition: service_completed_successfully", "condition: service_done"),
    ],
    ["a misspelt service key", (t: string) => t.replace("    healthcheck:\n", "    healthchek:\n")],
  ])(
    "refuses %s",
    async (_what, breakIt) => {
      const text = await readFile(join(REPO, "docker-compose.yml"), "utf8");
      const broken = breakIt(text);
      expect(broken).not.toBe(text);
      const file = join(dir, "docker-compose.yml");
      await writeFile(file, broken);
      const { code, output } = await composeConfig(file);
      expect(code).not.toBe(0);
      expect(output).not.toBe("");
    },
    120_000,
  );
});
