/**
 * Loki's delete API end to end: a real `sieve all` over loopback (auth on), Loki's own
 * `logcli delete create|list|cancel` as the client, lines both flushed and in the
 * ingester's heads. Until processed, queries (log and metric, store and heads) hide the
 * deleted lines; then the compactor's processor, run here over the same store, removes
 * them from the chunks and nothing else.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { DeletionProcessor } from "@sieve/compactor";
import { DEFAULT_CONFIG, createQuerier } from "@sieve/querier";
import { FsObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster, waitFor, type SieveChild } from "./cluster.test-helper.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const TENANT = "del-t";
const S = 1_000_000_000n;
/** Ten minutes ago, on a whole second: the lines are in the past (deletes cannot reach the future). */
const T_S = Math.floor(Date.now() / 1000) - 600;
const T = BigInt(T_S) * S;

function logcliPath(): string {
  return execFileSync("sh", [join(ROOT, "scripts/loki.sh"), "logcli"], {
    encoding: "utf8",
    timeout: 30 * 60_000,
  }).trim();
}

const lines = (tag: string, from: number, n: number): [bigint, string][] =>
  Array.from({ length: n }, (_, i) => [
    T + BigInt(from + i) * S,
    `${tag} ${i} ${i % 4 === 0 ? "secret=hunter2" : "ok"}`,
  ]);
const FLUSHED = lines("flushed", 0, 20);
const HEADS = lines("head", 30, 12);

const cluster = new Cluster();
let dir: string;
let sieve: SieveChild;
let logcli: string;

async function push(tenant: string, values: [bigint, string][]): Promise<void> {
  const res = await fetch(`${sieve.url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "content-type": "application/json", "X-Scope-OrgID": tenant },
    body: JSON.stringify({
      streams: [{ stream: { app: "del" }, values: values.map(([t, l]) => [String(t), l]) }],
    }),
  });
  if (res.status !== 204) throw new Error(`push: ${res.status} ${await res.text()}`);
}

/** The lines a query answers over the test's range, sorted. */
async function query(q: string, tenant = TENANT): Promise<string[]> {
  const p = new URLSearchParams({
    query: q,
    start: String(T - 60n * S),
    end: String(T + 120n * S),
    limit: "1000",
  });
  const res = await fetch(`${sieve.url}/loki/api/v1/query_range?${p.toString()}`, {
    headers: { "X-Scope-OrgID": tenant },
  });
  const body = (await res.json()) as { data: { result: { values: [string, string][] }[] } };
  return body.data.result.flatMap((s) => s.values.map((v) => v[1])).sort();
}

async function api(method: string, params: Record<string, string>, tenant?: string) {
  const res = await fetch(
    `${sieve.url}/loki/api/v1/delete?${new URLSearchParams(params).toString()}`,
    {
      method,
      headers: tenant === undefined ? {} : { "X-Scope-OrgID": tenant },
    },
  );
  return { status: res.status, body: await res.text(), id: res.headers.get("x-delete-request-id") };
}

async function cli(...args: string[]): Promise<string> {
  const { stdout, stderr } = await run(
    logcli,
    ["delete", ...args, `--addr=${sieve.url}`, `--org-id=${TENANT}`],
    { timeout: 60_000, env: { ...process.env, LOKI_ADDR: "" } },
  );
  return stdout + stderr;
}

const secret = (l: string): boolean => l.includes("secret");
const ALL = [...FLUSHED, ...HEADS].map(([, l]) => l).sort();

beforeAll(async () => {
  logcli = logcliPath();
  dir = await mkdtemp(join(tmpdir(), "sieve-deletes-"));
  const file = join(dir, "sieve.yaml");
  await writeFile(
    file,
    [
      "authEnabled: true",
      "querier:",
      "  deleteRequestsCacheMs: 0",
      "  overrides:",
      "    no-deletes:",
      "      deletionMode: disabled",
      "compactor:",
      "  deleteRequestCancelPeriodMs: 3000",
      "",
    ].join("\n"),
  );
  sieve = await cluster.start({
    target: "all",
    configFile: file,
    args: ["--data-dir", join(dir, "data")],
  });
  await push(TENANT, FLUSHED);
  await waitFor("the flushed lines", async () =>
    (await query('{app="del"}')).length === FLUSHED.length ? true : undefined,
  );
  expect((await fetch(`${sieve.url}/flush`, { method: "POST" })).status).toBe(204);
  await push(TENANT, HEADS);
  await waitFor("the head lines", async () =>
    (await query('{app="del"}')).length === ALL.length ? true : undefined,
  );
}, 180_000);

afterAll(async () => {
  await cluster.stopAll();
  await rm(dir, { recursive: true, force: true });
});

describe("the delete API over a real server", () => {
  test("refusals in Loki's words", async () => {
    const start = String(T_S);
    const cases: [Record<string, string>, string | undefined, number, string][] = [
      [{ query: '{app="del"}', start }, undefined, 401, "no org id"],
      [
        { query: '{app="del"}', start },
        "no-deletes",
        403,
        "deletion is not available for this tenant",
      ],
      [{ start }, TENANT, 400, "query not set"],
      [{ query: "{app=", start }, TENANT, 400, "invalid query expression"],
      [{ query: 'rate({app="del"}[1m])', start }, TENANT, 400, "invalid query expression"],
      [{ query: '{app="del"}' }, TENANT, 400, "start time not set"],
      [
        { query: '{app="del"}', start: "12345" },
        TENANT,
        400,
        "invalid start time: require unix seconds or RFC3339 format",
      ],
      [
        { query: '{app="del"}', start, end: "x" },
        TENANT,
        400,
        "invalid end time: require unix seconds or RFC3339 format",
      ],
      [
        { query: '{app="del"}', start, end: String(T_S + 3600 * 24) },
        TENANT,
        400,
        "deletes in the future are not allowed",
      ],
      [
        { query: '{app="del"}', start, end: start },
        TENANT,
        400,
        "start time can't be greater than or equal to end time",
      ],
      [
        { query: '{app="del"} |= "x"', start, end: String(T_S + 60), max_interval: "2m" },
        TENANT,
        400,
        "max_interval can't be greater than the interval to be deleted (1m0s)",
      ],
    ];
    for (const [params, tenant, status, message] of cases) {
      const r = await api("POST", params, tenant);
      expect([r.status, r.body]).toEqual([status, `${message}\n`]);
    }
    expect(await api("GET", {})).toMatchObject({ status: 401 });
    expect(await api("DELETE", { request_id: "0badc0de" }, TENANT)).toEqual({
      status: 404,
      body: "could not find delete request with given id\n",
      id: null,
    });
  });

  test("logcli creates a request; queries hide its lines at once, flushed and in heads", async () => {
    const from = new Date((T_S - 10) * 1000).toISOString();
    const to = new Date((T_S + 100) * 1000).toISOString();
    const out = await cli("create", '{app="del"} |= "secret"', `--from=${from}`, `--to=${to}`);
    expect(out).toContain("Delete request created successfully");
    expect(await query('{app="del"}')).toEqual(ALL.filter((l) => !secret(l)));
    // Metric queries: the store's chunks and the heads' partials.
    const p = new URLSearchParams({
      query: 'sum(count_over_time({app="del"}[1h]))',
      time: String(T + 120n * S),
    });
    const res = await fetch(`${sieve.url}/loki/api/v1/query?${p.toString()}`, {
      headers: { "X-Scope-OrgID": TENANT },
    });
    const vector = (await res.json()) as { data: { result: { value: [number, string] }[] } };
    expect(vector.data.result[0]!.value[1]).toBe(String(ALL.filter((l) => !secret(l)).length));
    // Another tenant's lines are its own.
    await push("other", FLUSHED);
    await waitFor("the other tenant's lines", async () =>
      (await query('{app="del"}', "other")).length === FLUSHED.length ? true : undefined,
    );

    const listed = await cli("list");
    expect(listed).toContain("Found 1 delete requests");
    expect(listed).toContain('Query: {app="del"} |= "secret"');
    expect(listed).toContain("Status: received");
    const raw = await api("GET", {}, TENANT);
    const body = JSON.parse(raw.body) as Record<string, unknown>[];
    expect(body).toEqual([
      {
        request_id: expect.stringMatching(/^[0-9a-f]{8}$/) as unknown,
        start_time: T_S - 10,
        end_time: T_S + 100,
        query: '{app="del"} |= "secret"',
        status: "received",
        created_at: expect.any(Number) as unknown,
        user_id: "",
      },
    ]);
  });

  test("cancel within the period; refused after it unless forced", async () => {
    const params = { query: '{app="del"} |= "ok"', start: String(T_S), end: String(T_S + 5) };
    const made = await api("POST", params, TENANT);
    expect(made.status).toBe(204);
    expect(made.id).toMatch(/^[0-9a-f]{8}$/);
    const out = await cli("cancel", `--request-id=${made.id!}`);
    expect(out).toContain(`Delete request ${made.id!} cancelled successfully`);
    expect(await query('{app="del"}')).toEqual(ALL.filter((l) => !secret(l)));

    const late = await api("PUT", params, TENANT);
    expect(late.status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 3100));
    expect(await api("DELETE", { request_id: late.id! }, TENANT)).toMatchObject({
      status: 400,
      body: "Cancellation of partially completed delete request or delete request past the deadline of 3s since its creation is not allowed. To force, use the ?force query parameter\n",
    });
    expect(await api("DELETE", { request_id: late.id!, force: "true" }, TENANT)).toMatchObject({
      status: 204,
    });
    expect(JSON.parse((await api("GET", {}, TENANT)).body)).toHaveLength(1);
  });

  test("processing removes the lines from the chunks, and only them", async () => {
    expect((await fetch(`${sieve.url}/flush`, { method: "POST" })).status).toBe(204);
    const store = new FsObjectStore(join(dir, "data", "store"));
    // The flush manifest of the heads' flush lives until its commit: wait it out.
    const processor = new DeletionProcessor({
      deletionMode: () => "filter-and-delete",
      cancelPeriodMs: 0,
      deleteDelayMs: 0,
    });
    await waitFor("the request to be processed", async () => {
      await processor.run({ store, logger: pino({ level: "silent" }), isLeaseHeld: () => true });
      const [r] = JSON.parse((await api("GET", {}, TENANT)).body) as { status: string }[];
      return r!.status === "processed" ? true : undefined;
    });
    // What the store holds now, read without query-time filtering.
    const unfiltered = createQuerier({
      config: {
        ...DEFAULT_CONFIG,
        workers: 0,
        limits: { ...DEFAULT_CONFIG.limits, deletionMode: "disabled" },
      },
      store,
    });
    const read = async (tenant: string) =>
      (
        await unfiltered.selectLogs({
          tenant,
          query: '{app="del"}',
          start: T - 60n * S,
          end: T + 120n * S,
          limit: 1000,
          direction: "forward",
        })
      ).entries
        .map((e) => e.line)
        .sort();
    expect(await read(TENANT)).toEqual(ALL.filter((l) => !secret(l)));
    expect(await read("other")).toEqual(FLUSHED.map(([, l]) => l).sort());
    expect(await query('{app="del"}')).toEqual(ALL.filter((l) => !secret(l)));
    expect(await cli("list")).toContain("Status: processed");
  });
});
