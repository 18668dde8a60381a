// Issue 15's read API over a real `sieve all` on loopback: detected_labels, detected_fields,
// detected_field/<name>/values, format_query, status/buildinfo, Loki's 404, and reads across
// tenants (`X-Scope-OrgID: a|b`) with the switch on and refused with it off; each answer
// checked against what was pushed, and Grafana's and Logs Drilldown's requests replayed.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const NOW_MS = Date.now();
const T0_NS = BigInt(NOW_MS - 60_000) * 1_000_000n;
const ns = (i: number) => String(T0_NS + BigInt(i) * 1_000_000_000n);
const START = String(T0_NS - 60_000_000_000n);
const END = String(BigInt(NOW_MS + 60_000) * 1_000_000n);

const STATUSES = [200, 404, 500, 200, 200, 404];
const LEVEL = { 200: "info", 404: "warn", 500: "error" } as Record<number, string>;

/** Tenant team-a: JSON lines with metadata on `app=api`, logfmt lines on `app=web`. */
const TEAM_A = {
  streams: [
    {
      stream: { app: "api", env: "prod", pod: "1", build: "101" },
      values: STATUSES.map((status, i) => [
        ns(i),
        JSON.stringify({
          level: LEVEL[status],
          status,
          latency: `${10 + i}ms`,
          size: "10KB",
          ok: status === 200,
          msg: `GET /orders/${i}`,
        }),
        { trace_id: `trace-${i}` },
      ]),
    },
    {
      stream: { app: "web", env: "dev", pod: "2", build: "102" },
      values: [0, 1, 2].map((i) => [
        ns(10 + i),
        `level=warn path=/p${i} ratio=0.${i + 1} user=u${i}`,
      ]),
    },
  ],
};

/** Tenant team-b: plain lines on `app=api`. */
const TEAM_B = {
  streams: [
    {
      stream: { app: "api", env: "staging" },
      values: [0, 1, 2, 3].map((i) => [ns(20 + i), `team-b line ${i}`]),
    },
  ],
};

let dir: string;
let sieve: SieveProcess | undefined;
let single: SieveProcess | undefined;

async function push(base: string, tenant: string, body: unknown): Promise<void> {
  const response = await fetch(new URL("/loki/api/v1/push", base), {
    method: "POST",
    headers: { "content-type": "application/json", "x-scope-orgid": tenant },
    body: JSON.stringify(body),
  });
  expect(response.status, await response.text()).toBe(204);
}

interface Answer {
  status: number;
  type: string;
  text: string;
  json: unknown;
}

async function get(
  base: string,
  path: string,
  params: Record<string, string>,
  headers: Record<string, string>,
): Promise<Answer> {
  const url = new URL(path, base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  const response = await fetch(url, { headers });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch {
    json = undefined;
  }
  return { status: response.status, type: response.headers.get("content-type") ?? "", text, json };
}

const asTenant = (tenant: string) => ({ "x-scope-orgid": tenant });
const WINDOW = { start: START, end: END };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-detected-"));
  const env = { SIEVE_AUTH_ENABLED: "true", SIEVE_QUERIER_WORKERS: "1" };
  sieve = await spawnSieve(["all", "--data-dir", join(dir, "on")], {
    ...env,
    SIEVE_QUERIER_MULTI_TENANT_QUERIES_ENABLED: "true",
  });
  single = await spawnSieve(["all", "--data-dir", join(dir, "off")], env);
  for (const s of [sieve, single]) {
    await push(s.url, "team-a", TEAM_A);
    await push(s.url, "team-b", TEAM_B);
  }
  // Pushes are served once the ingester has consumed them.
  for (const s of [sieve, single]) {
    await waitFor(async () => {
      const a = await get(
        s.url,
        "/loki/api/v1/query_range",
        { query: '{env=~".+"}', ...WINDOW },
        asTenant("team-a"),
      );
      const result =
        (a.json as { data?: { result?: { values: unknown[] }[] } } | undefined)?.data?.result ?? [];
      const n = result.reduce((sum, r) => sum + r.values.length, 0);
      return n === 9 ? true : undefined;
    }, "team-a's streams");
  }
}, 90_000);

afterAll(async () => {
  await sieve?.stop();
  await single?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("detected_labels", () => {
  it("answers the stream labels with their cardinality, without ID-only labels", async () => {
    const a = await get(sieve!.url, "/loki/api/v1/detected_labels", WINDOW, asTenant("team-a"));
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({
      detectedLabels: [
        { label: "app", cardinality: 2 },
        { label: "env", cardinality: 2 },
        { label: "pod", cardinality: 2 }, // numeric, but one of Loki's static labels
        { label: "service_name", cardinality: 2 },
        // build (101, 102) is left out: every value is an ID
      ],
    });
  });

  it("restricts to the series of `query`", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_labels",
      { query: '{app="api"}', ...WINDOW },
      asTenant("team-a"),
    );
    expect(a.json).toEqual({
      detectedLabels: [
        { label: "app", cardinality: 1 },
        { label: "env", cardinality: 1 },
        { label: "pod", cardinality: 1 },
        { label: "service_name", cardinality: 1 },
      ],
    });
  });

  it("answers {} when no label is left, as Loki's JSON omits the empty list", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_labels",
      { query: '{app="nothing"}', ...WINDOW },
      asTenant("team-a"),
    );
    expect([a.status, a.json]).toEqual([200, {}]);
  });

  it("refuses a query that is not a selector with Loki's 400", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_labels",
      { query: '{app="api"', ...WINDOW },
      asTenant("team-a"),
    );
    expect(a.status).toBe(400);
    expect(a.text).toMatch(/^parse error at line 1/);
  });
});

describe("detected_fields", () => {
  it("answers metadata and JSON fields with Loki's types, parsers and cardinality", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="api"}', ...WINDOW },
      asTenant("team-a"),
    );
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({
      fields: [
        // Sieve adds detected_level as structured metadata, as Loki 3.x does
        { label: "detected_level", type: "string", cardinality: 3, parsers: null },
        { label: "latency", type: "duration", cardinality: 6, parsers: ["json"] },
        { label: "level", type: "string", cardinality: 3, parsers: ["json"] },
        { label: "msg", type: "string", cardinality: 6, parsers: ["json"] },
        { label: "ok", type: "boolean", cardinality: 2, parsers: ["json"] },
        { label: "size", type: "bytes", cardinality: 1, parsers: ["json"] },
        { label: "status", type: "int", cardinality: 3, parsers: ["json"] },
        { label: "trace_id", type: "string", cardinality: 6, parsers: null },
      ],
      limit: 1000,
    });
  });

  it("finds logfmt fields, samples at most line_limit lines and keeps field_limit fields", async () => {
    const web = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="web"}', ...WINDOW },
      asTenant("team-a"),
    );
    expect(web.json).toMatchObject({
      fields: expect.arrayContaining([
        { label: "path", type: "string", cardinality: 3, parsers: ["logfmt"] },
        { label: "ratio", type: "float", cardinality: 3, parsers: ["logfmt"] },
        { label: "user", type: "string", cardinality: 3, parsers: ["logfmt"] },
      ]) as unknown,
    });
    const one = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="api"}', line_limit: "1", field_limit: "2", ...WINDOW },
      asTenant("team-a"),
    );
    const body = one.json as { fields: { cardinality: number }[]; limit: number };
    expect(body.limit).toBe(2);
    expect(body.fields).toHaveLength(2);
    for (const f of body.fields) expect(f.cardinality).toBe(1);
  });

  it("answers {} when the sample holds no field, and Loki's 400s", async () => {
    const none = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="nothing"}', ...WINDOW },
      asTenant("team-a"),
    );
    expect(none.json).toEqual({});
    const bad = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="api"}', line_limit: "0" },
      asTenant("team-a"),
    );
    expect([bad.status, bad.text]).toEqual([400, "limit must be a positive value\n"]);
    const tooMany = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="api"}', line_limit: "5001" },
      asTenant("team-a"),
    );
    expect(tooMany.status).toBe(400);
    expect(tooMany.text).toMatch(/^max entries limit per query exceeded/);
  });

  it("detected_field/<name>/values lists a field's values", async () => {
    const values = async (name: string) =>
      (
        await get(
          sieve!.url,
          `/loki/api/v1/detected_field/${name}/values`,
          { query: '{app="api"}', ...WINDOW },
          asTenant("team-a"),
        )
      ).json;
    expect(await values("status")).toEqual({ values: ["200", "404", "500"], limit: 1000 });
    expect(await values("size")).toEqual({ values: ["10kB"], limit: 1000 }); // Loki's spelling
    expect(await values("trace_id")).toMatchObject({
      values: expect.arrayContaining(["trace-0", "trace-5"]) as unknown,
    });
    expect(await values("nope")).toEqual({});
  });
});

/** What Grafana's Loki data source and Logs Drilldown send for these endpoints. */
describe("Grafana and Logs Drilldown requests, replayed", () => {
  const drilldown = {
    ...asTenant("team-a"),
    "x-query-tags": "Source=grafana-lokiexplore-app",
    "x-grafana-org-id": "1",
    "x-loki-response-encoding-flags": "categorize-labels",
  };
  const iso = (nsText: string) => new Date(Number(BigInt(nsText) / 1_000_000n)).toISOString();
  const TYPES = ["string", "int", "float", "boolean", "duration", "bytes"];

  it("Drilldown's detected_labels (RFC 3339 bounds) has the shape it reads", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_labels",
      { query: '{service_name="api"}', start: iso(START), end: iso(END) },
      drilldown,
    );
    expect(a.status, a.text).toBe(200);
    expect(a.type).toMatch(/^application\/json/);
    const body = a.json as { detectedLabels: { label: string; cardinality: number }[] };
    expect(body.detectedLabels.map((l) => l.label)).toEqual(["app", "env", "pod", "service_name"]);
    for (const l of body.detectedLabels) expect(Number.isInteger(l.cardinality)).toBe(true);
  });

  it("Drilldown's detected_fields (its parsers in the query, step in ms) has the shape it reads", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      {
        query: '{service_name="api"} | json | logfmt | drop __error__, __error_details__',
        start: iso(START),
        end: iso(END),
        step: "60000",
      },
      drilldown,
    );
    expect(a.status, a.text).toBe(200);
    const body = a.json as {
      fields: { label: string; type: string; cardinality: number; parsers: string[] | null }[];
      limit: number;
    };
    expect(body.limit).toBe(1000);
    for (const f of body.fields) {
      expect(TYPES).toContain(f.type);
      expect(f.cardinality).toBeGreaterThan(0);
      expect(f.parsers === null || Array.isArray(f.parsers)).toBe(true);
      expect(f.label).not.toMatch(/^__error/);
    }
    expect(body.fields.find((f) => f.label === "status")).toEqual({
      label: "status",
      type: "int",
      cardinality: 3,
      parsers: ["json"],
    });
  });

  it("Explore's detected_field values (ns bounds) has the shape it reads", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_field/level/values",
      { query: '{app="api"}', start: START, end: END },
      asTenant("team-a"),
    );
    expect(a.json).toEqual({ values: ["error", "info", "warn"], limit: 1000 });
  });

  it("status/buildinfo carries a Loki 3 version", async () => {
    const a = await get(sieve!.url, "/loki/api/v1/status/buildinfo", {}, {});
    expect(a.status).toBe(200);
    const info = a.json as Record<string, string>;
    expect(Object.keys(info).sort()).toEqual(
      ["branch", "buildDate", "buildUser", "goVersion", "revision", "version"].sort(),
    );
    expect(info.version).toMatch(/^3\.\d+\.\d+$/);
    expect(info.revision).toMatch(/^sieve-/);
  });

  it("format_query answers Loki's shapes", async () => {
    const ok = await get(
      sieve!.url,
      "/loki/api/v1/format_query",
      { query: '{app="api"}|="x"' },
      asTenant("team-a"),
    );
    expect([ok.status, ok.json]).toEqual([200, { status: "success", data: '{app="api"} |= "x"' }]);
    const bad = await get(
      sieve!.url,
      "/loki/api/v1/format_query",
      { query: "{app=" },
      asTenant("team-a"),
    );
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({
      status: "invalid-query",
      error: expect.stringMatching(/^parse error/) as unknown,
    });
  });
});

describe("unknown routes", () => {
  it.each([
    ["GET", "/loki/api/v1/nope"],
    ["GET", "/nope"],
    ["POST", "/loki/api/v2/push"],
  ])("%s %s → Loki's plain 404", async (method, path) => {
    const response = await fetch(new URL(path, sieve!.url), {
      method,
      headers: asTenant("team-a"),
    });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await response.text()).toBe("404 page not found\n");
  });
});

describe("reads across tenants (X-Scope-OrgID: a|b)", () => {
  const both = asTenant("team-b|team-a");

  it("query_range reads both, each stream with __tenant_id__", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/query_range",
      { query: '{app="api"}', ...WINDOW, limit: "100" },
      both,
    );
    expect(a.status, a.text).toBe(200);
    const result = (
      a.json as { data: { result: { stream: Record<string, string>; values: string[][] }[] } }
    ).data.result;
    const byTenant = new Map<string, number>();
    for (const s of result) {
      const t = s.stream.__tenant_id__!;
      byTenant.set(t, (byTenant.get(t) ?? 0) + s.values.length);
    }
    expect(Object.fromEntries(byTenant)).toEqual({ "team-a": 6, "team-b": 4 });
    // Newest first over both tenants: team-b's lines are the newest.
    const limited = await get(
      sieve!.url,
      "/loki/api/v1/query_range",
      { query: '{app="api"}', ...WINDOW, limit: "5" },
      both,
    );
    const lines = (limited.json as { data: { result: { values: string[][] }[] } }).data.result
      .flatMap((s) => s.values.map((v) => v[1]))
      .sort();
    // team-a's newest line is its sixth (GET /orders/5), older than all of team-b's.
    expect(lines).toEqual([
      "team-b line 0",
      "team-b line 1",
      "team-b line 2",
      "team-b line 3",
      expect.stringContaining("GET /orders/5") as unknown, // sorts last: `{` > `t`
    ]);
  });

  it("a selector on __tenant_id__ chooses the tenants", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/query_range",
      { query: '{app="api", __tenant_id__="team-b"}', ...WINDOW },
      both,
    );
    const result = (a.json as { data: { result: { stream: Record<string, string> }[] } }).data
      .result;
    expect(result.map((s) => s.stream.__tenant_id__)).toEqual(["team-b"]);
  });

  it("a metric query groups by __tenant_id__", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/query",
      { query: 'sum by (__tenant_id__) (count_over_time({app="api"}[10m]))', time: END },
      both,
    );
    expect(a.status, a.text).toBe(200);
    const result = (
      a.json as { data: { result: { metric: Record<string, string>; value: [number, string] }[] } }
    ).data.result;
    expect(result.map((r) => [r.metric.__tenant_id__, r.value[1]]).sort()).toEqual([
      ["team-a", "6"],
      ["team-b", "4"],
    ]);
  });

  it("series, labels and values span both tenants", async () => {
    const series = await get(
      sieve!.url,
      "/loki/api/v1/series",
      { "match[]": '{app="api"}', ...WINDOW },
      both,
    );
    const data = (series.json as { data: Record<string, string>[] }).data;
    expect(data.map((s) => s.__tenant_id__).sort()).toEqual(["team-a", "team-b"]);
    const values = await get(sieve!.url, "/loki/api/v1/label/env/values", WINDOW, both);
    expect(values.json).toEqual({ status: "success", data: ["dev", "prod", "staging"] });
    const tenants = await get(sieve!.url, "/loki/api/v1/label/__tenant_id__/values", WINDOW, both);
    expect(tenants.json).toEqual({ status: "success", data: ["team-a", "team-b"] });
  });

  it("detected_fields samples both tenants", async () => {
    const a = await get(
      sieve!.url,
      "/loki/api/v1/detected_fields",
      { query: '{app="api"}', ...WINDOW },
      both,
    );
    const labels = (a.json as { fields: { label: string }[] }).fields.map((f) => f.label);
    expect(labels).toContain("status"); // team-a's JSON
    expect(labels).toContain("trace_id");
  });

  it("index/volume adds both tenants' bytes, as Loki merges them; patterns are refused", async () => {
    const total = async (tenant: Record<string, string>): Promise<number> => {
      const r = await get(
        sieve!.url,
        "/loki/api/v1/index/volume",
        { query: '{app="api"}', ...WINDOW },
        tenant,
      );
      expect(r.status, r.text).toBe(200);
      const result = (r.json as { data: { result: { value: [number, string] }[] } }).data.result;
      return result.reduce((sum, v) => sum + Number(v.value[1]), 0);
    };
    const a = await total(asTenant("team-a"));
    const b = await total(asTenant("team-b"));
    expect(a).toBeGreaterThan(0);
    expect(b).toBeGreaterThan(0);
    expect(await total(both)).toBe(a + b);
    const patterns = await get(
      sieve!.url,
      "/loki/api/v1/patterns",
      { query: '{app="api"}', ...WINDOW },
      both,
    );
    expect(patterns.status).toBe(400);
    expect(patterns.text).toContain("patterns does not read across tenants");
  });

  it("with the switch off, a|b is refused as an invalid tenant ID", async () => {
    const a = await get(
      single!.url,
      "/loki/api/v1/query_range",
      { query: '{app="api"}', ...WINDOW },
      both,
    );
    expect(a.status).toBe(400);
    expect(a.text).toBe("tenant ID 'team-b|team-a' contains unsupported character '|'\n");
    // Each tenant alone still reads.
    const one = await get(
      single!.url,
      "/loki/api/v1/query_range",
      { query: '{app="api"}', ...WINDOW },
      asTenant("team-b"),
    );
    expect(one.status).toBe(200);
  });
});

describe("after a flush", () => {
  it("detected_fields and detected_labels answer the same from the store", async () => {
    const ask = async () =>
      Promise.all([
        get(
          sieve!.url,
          "/loki/api/v1/detected_fields",
          { query: '{app=~".+"}', ...WINDOW },
          asTenant("team-a"),
        ),
        get(sieve!.url, "/loki/api/v1/detected_labels", WINDOW, asTenant("team-a")),
      ]).then((answers) => answers.map((a) => a.json));
    const before = await ask();
    const flushed = await fetch(new URL("/flush", sieve!.url), { method: "POST" });
    expect(flushed.status).toBe(204);
    expect(await ask()).toEqual(before);
  });
});

describe("every role's server", () => {
  it.each([
    ["querier", { SIEVE_QUERIER_QUERY_STORE_ONLY: "true" }],
    ["bloom-gateway", {}],
  ] as const)("sieve %s answers Loki's 404 and serves buildinfo", async (role, env) => {
    const alone = await spawnSieve([role, "--data-dir", join(dir, role)], env);
    try {
      const missing = await fetch(new URL("/loki/api/v1/nope", alone.url));
      expect([missing.status, await missing.text()]).toEqual([404, "404 page not found\n"]);
      const info = await get(alone.url, "/loki/api/v1/status/buildinfo", {}, {});
      expect(info.json).toMatchObject({ version: expect.stringMatching(/^3\./) as unknown });
    } finally {
      await alone.stop();
    }
  });
});
