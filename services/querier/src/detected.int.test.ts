// The querier alone (`sieve querier`'s server) over flushed chunks of two tenants, queries on
// worker threads: detected_labels, detected_fields and values, format_query, the plain 404,
// and reads across tenants with `multiTenantQueries` on, and refused with it off.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FsObjectStore } from "@sieve/storage";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { createQuerierServer } from "./http.js";
import { QueryPool } from "./pool.js";
import { writeFlush, type TestStream } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const NOW = T0 + 3600n * S;
const WINDOW = { start: String(T0), end: String(NOW) };
const silent = pino({ level: "silent" });

/** team-a: JSON lines with a trace id; logfmt lines on `app=web`. */
const TEAM_A: TestStream[] = [
  {
    labels: { app: "api", cluster: "eu", request_id: "5" },
    entries: [200, 500, 200].map((status, i) => ({
      timestamp: T0 + BigInt(i) * S,
      line: JSON.stringify({ status, took: `${i + 1}.5s`, user: { name: `u${i}` } }),
      structuredMetadata: [{ name: "trace_id", value: `t${i}` }],
    })),
  },
  {
    labels: { app: "web", cluster: "us", request_id: "6" },
    entries: [0, 1].map((i) => ({
      timestamp: T0 + BigInt(10 + i) * S,
      line: `method=GET bytes=${i + 1}KiB app=web`,
      structuredMetadata: [],
    })),
  },
];

/** team-b: plain lines. */
const TEAM_B: TestStream[] = [
  {
    labels: { app: "api", cluster: "ap" },
    entries: [0, 1].map((i) => ({
      timestamp: T0 + BigInt(20 + i) * S,
      line: `plain ${i}`,
      structuredMetadata: [],
    })),
  },
];

let dir: string;
let pool: QueryPool | undefined;
const servers: FastifyInstance[] = [];
let multi: string;
let single: string;

async function serve(multiTenantQueries: boolean): Promise<string> {
  const registry = new Registry();
  const app = await createQuerierServer({
    pool: pool!,
    authEnabled: true,
    multiTenantQueries,
    registry,
    now: () => NOW,
  });
  servers.push(app);
  return app.listen({ port: 0, host: "127.0.0.1" });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-querier-detected-"));
  const store = new FsObjectStore(dir);
  await writeFlush(store, "team-a", TEAM_A, 2);
  await writeFlush(store, "team-b", TEAM_B, 2);
  pool = new QueryPool({
    workers: 1,
    heapMb: 256,
    setup: {
      config: DEFAULT_CONFIG,
      store: { backend: "filesystem", dir },
      chunkFilter: "none",
      ingesters: "none",
      logLevel: "silent",
    },
    registry: new Registry(),
    logger: silent,
  });
  await pool.ready();
  multi = await serve(true);
  single = await serve(false);
}, 60_000);

afterAll(async () => {
  for (const app of servers) await app.close();
  await pool?.close();
  await rm(dir, { recursive: true, force: true });
});

async function get(
  base: string,
  path: string,
  params: Record<string, string>,
  tenant: string,
): Promise<{ status: number; text: string; json: unknown }> {
  const url = new URL(path, base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  const response = await fetch(url, { headers: { "x-scope-orgid": tenant } });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

describe("the querier's detected endpoints over flushed chunks", () => {
  it("detected_labels keeps `cluster` (static) and drops the ID-only request_id", async () => {
    const a = await get(multi, "/loki/api/v1/detected_labels", WINDOW, "team-a");
    expect(a.json).toEqual({
      detectedLabels: [
        { label: "app", cardinality: 2 },
        { label: "cluster", cardinality: 2 },
      ],
    });
  });

  it("detected_fields reads JSON and logfmt lines of the store", async () => {
    const a = await get(
      multi,
      "/loki/api/v1/detected_fields",
      { query: '{app=~".+"}', ...WINDOW },
      "team-a",
    );
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({
      fields: [
        { label: "app_extracted", type: "string", cardinality: 1, parsers: ["logfmt"] },
        { label: "bytes", type: "bytes", cardinality: 2, parsers: ["logfmt"] },
        { label: "method", type: "string", cardinality: 1, parsers: ["logfmt"] },
        { label: "status", type: "int", cardinality: 2, parsers: ["json"] },
        { label: "took", type: "duration", cardinality: 3, parsers: ["json"] },
        { label: "trace_id", type: "string", cardinality: 3, parsers: null },
        { label: "user_name", type: "string", cardinality: 3, parsers: ["json"] },
      ],
      limit: 1000,
    });
    const values = await get(
      multi,
      "/loki/api/v1/detected_field/bytes/values",
      { query: '{app="web"}', ...WINDOW },
      "team-a",
    );
    expect(values.json).toEqual({ values: ["1.0kB", "2.0kB"], limit: 1000 });
  });

  it("format_query runs on the workers too", async () => {
    const a = await get(multi, "/loki/api/v1/format_query", { query: "{a = `b`}" }, "team-a");
    expect(a.json).toEqual({ status: "success", data: '{a="b"}' });
  });

  it("the querier's own server answers Loki's plain 404", async () => {
    const response = await fetch(new URL("/loki/api/v1/unknown", multi));
    expect([response.status, await response.text()]).toEqual([404, "404 page not found\n"]);
  });
});

describe("reads across tenants on the querier's server", () => {
  it("labels series with __tenant_id__ and chooses tenants by it", async () => {
    const all = await get(
      multi,
      "/loki/api/v1/series",
      { "match[]": '{app="api"}', ...WINDOW },
      "team-a|team-b",
    );
    expect(all.json).toEqual({
      status: "success",
      data: [
        { __tenant_id__: "team-a", app: "api", cluster: "eu", request_id: "5" },
        { __tenant_id__: "team-b", app: "api", cluster: "ap" },
      ],
    });
    const onlyB = await get(
      multi,
      "/loki/api/v1/query_range",
      { query: '{app="api", __tenant_id__=~"team-b"}', ...WINDOW },
      "team-a|team-b",
    );
    const result = (onlyB.json as { data: { result: { stream: Record<string, string> }[] } }).data
      .result;
    expect(result).toHaveLength(1);
    expect(result[0]!.stream).toEqual({ __tenant_id__: "team-b", app: "api", cluster: "ap" });
  });

  it("index/stats sums the tenants; a metric query counts per tenant", async () => {
    const stats = await get(
      multi,
      "/loki/api/v1/index/stats",
      { query: '{app="api"}', ...WINDOW },
      "team-b|team-a",
    );
    expect(stats.json).toMatchObject({ streams: 2, entries: 5 });
    const counts = await get(
      multi,
      "/loki/api/v1/query",
      // The range is left-open: end it a second early to hold team-a's first line at T0.
      { query: 'sum by (__tenant_id__) (count_over_time({app="api"}[1h]))', time: String(NOW - S) },
      "team-a|team-b",
    );
    const result = (
      counts.json as { data: { result: { metric: Record<string, string>; value: unknown[] }[] } }
    ).data.result;
    expect(result.map((r) => [r.metric.__tenant_id__, r.value[1]])).toEqual([
      ["team-a", "3"],
      ["team-b", "2"],
    ]);
  });

  it("refuses an invalid tenant among several, and a|b with the switch off", async () => {
    const bad = await get(multi, "/loki/api/v1/labels", WINDOW, "team-a|a/b");
    expect([bad.status, bad.text]).toEqual([
      400,
      "tenant ID 'a/b' contains unsupported character '/'\n",
    ]);
    const off = await get(single, "/loki/api/v1/labels", WINDOW, "team-a|team-b");
    expect([off.status, off.text]).toEqual([
      400,
      "tenant ID 'team-a|team-b' contains unsupported character '|'\n",
    ]);
  });
});
