/**
 * Prometheus's own checks of what compose gives Prometheus and Grafana, with promtool
 * (built from the Prometheus Go module, the image's version, by scripts/promtool.sh, which
 * scripts/test.sh runs before the suite): `promtool check config` on
 * deploy/prometheus/prometheus.yml, and `promtool check rules` on the Sieve dashboard's
 * expressions written as recording rules (Grafana's `$__rate_interval` replaced by a
 * duration, as Grafana does before it sends a query), so Prometheus's parser and type
 * checker, not only its grammar, accept every one. A broken expression must be refused.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { REPO, dashboardQueries, repoText, withoutGrafanaVariables } from "./deploy.test-helper.js";

const run = promisify(execFile);

let promtool: string;
let dir: string;

/** promtool's exit code and output. */
async function check(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(promtool, args, { cwd: REPO });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

/** A rules file recording each expression. */
async function rulesFile(name: string, exprs: readonly string[]): Promise<string> {
  const file = join(dir, name);
  const rules = exprs.map((expr, i) => ({ record: `sieve:dashboard:${i}`, expr }));
  await writeFile(file, toYaml({ groups: [{ name: "sieve-dashboard", rules }] }));
  return file;
}

beforeAll(async () => {
  // Built by scripts/test.sh's set-up; here only found (or built, when run alone).
  const { stdout } = await run("sh", [join(REPO, "scripts/promtool.sh"), "path"], {
    maxBuffer: 64 * 1024 * 1024,
  });
  promtool = stdout.trim();
  dir = await mkdtemp(join(tmpdir(), "sieve-promtool-"));
}, 900_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("promtool", () => {
  test("accepts deploy/prometheus/prometheus.yml", async () => {
    const { code, output } = await check("check", "config", "deploy/prometheus/prometheus.yml");
    expect(output).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  test("accepts every expression of the Sieve dashboard", async () => {
    const queries = dashboardQueries(
      JSON.parse(repoText("deploy/grafana/dashboards/sieve.json")) as never,
    );
    expect(queries.length).toBeGreaterThanOrEqual(7);
    const file = await rulesFile(
      "dashboard.yml",
      queries.map((q) => withoutGrafanaVariables(q.expr)),
    );
    const { code, output } = await check("check", "rules", file);
    expect(output).toContain(`SUCCESS: ${queries.length} rules found`);
    expect(code).toBe(0);
  });

  test.each([
    ["an unclosed call", "sum(rate(sieve_ingester_chunks_flushed_total[1m])"],
    [
      "a range vector where an instant one is needed",
      "sum(sieve_ingester_chunks_flushed_total[1m])",
    ],
    ["an unknown function", "ratez(sieve_ingester_chunks_flushed_total[1m])"],
  ])("refuses %s", async (_what, expr) => {
    const file = await rulesFile("broken.yml", [expr]);
    const { code, output } = await check("check", "rules", file);
    expect(code).not.toBe(0);
    expect(output).not.toContain("SUCCESS");
  });
});
