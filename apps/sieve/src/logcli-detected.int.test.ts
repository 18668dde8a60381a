// Loki's own `logcli detected-fields` (built once by scripts/loki.sh, cached) against a real
// `sieve all`: it must parse Sieve's answers and print the fields and values that were pushed.
import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJson, spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
/** The cached logcli binary: `sh scripts/loki.sh logcli` prints its path. */
const LOGCLI = execFileSync("sh", ["scripts/loki.sh", "logcli"], {
  cwd: ROOT,
  encoding: "utf8",
}).trim();

const TENANT = "logcli-team";
const NOW_NS = BigInt(Date.now()) * 1_000_000n;
const STATUSES = [200, 404, 500, 200];

let dir: string;
let sieve: SieveProcess | undefined;

async function logcli(...args: string[]): Promise<string> {
  const { stdout } = await run(
    LOGCLI,
    ["detected-fields", `--addr=${sieve!.url}`, `--org-id=${TENANT}`, "--quiet", ...args],
    { timeout: 30_000 },
  );
  return stdout;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-logcli-"));
  sieve = await spawnSieve(["all", "--data-dir", dir], { SIEVE_AUTH_ENABLED: "true" });
  const values = STATUSES.map((status, i) => [
    String(NOW_NS - BigInt(60 - i) * 1_000_000_000n),
    JSON.stringify({ status, latency: `${5 + i}ms`, path: `/p${i % 2}` }),
    { trace_id: `trace-${i}` },
  ]);
  const response = await fetch(new URL("/loki/api/v1/push", sieve.url), {
    method: "POST",
    headers: { "content-type": "application/json", "x-scope-orgid": TENANT },
    body: JSON.stringify({ streams: [{ stream: { app: "shop" }, values }] }),
  });
  expect(response.status).toBe(204);
  await waitFor(async () => {
    const body = (await getJson(
      sieve!.url,
      "/loki/api/v1/query_range",
      { query: '{app="shop"}' },
      { "x-scope-orgid": TENANT },
    )) as { data: { result: { values: unknown[] }[] } };
    const n = body.data.result.reduce((sum, s) => sum + s.values.length, 0);
    return n === STATUSES.length ? true : undefined;
  }, "the pushed lines");
}, 60_000);

afterAll(async () => {
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** logcli's default output: `label: <name>\t\ttype: <type>\t\tcardinality: <n>` per field. */
function fieldsOf(output: string): Record<string, { type: string; cardinality: number }> {
  const out: Record<string, { type: string; cardinality: number }> = {};
  for (const line of output.split("\n")) {
    const m = /^label: (\S+)\s+type: (\S+)\s+cardinality: (\d+)$/.exec(line);
    if (m !== null) out[m[1]!] = { type: m[2]!, cardinality: Number(m[3]) };
  }
  return out;
}

describe("logcli detected-fields", () => {
  it("lists the pushed fields with their types and cardinality", async () => {
    const output = await logcli('{app="shop"}');
    expect(fieldsOf(output)).toEqual({
      detected_level: { type: "string", cardinality: 1 },
      latency: { type: "duration", cardinality: 4 },
      path: { type: "string", cardinality: 2 },
      status: { type: "int", cardinality: 3 },
      trace_id: { type: "string", cardinality: 4 },
    });
  });

  it("lists a field's values", async () => {
    const output = await logcli('{app="shop"}', "status");
    expect(output.trim().split("\n").sort()).toEqual(["200", "404", "500"]);
  });

  it("honours --limit (fields) and --line-limit (lines sampled)", async () => {
    const output = await logcli("--limit=2", '{app="shop"}');
    expect(Object.keys(fieldsOf(output))).toHaveLength(2);
    // One line sampled (the newest): each field has one value.
    const one = fieldsOf(await logcli("--line-limit=1", '{app="shop"}'));
    expect(Object.values(one).map((f) => f.cardinality)).toEqual([1, 1, 1, 1, 1]);
  });
});
