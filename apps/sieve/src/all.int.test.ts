// `sieve all` in a child process, driven over real HTTP as a user drives it: real Loki
// clients push (winston-loki: protobuf + snappy; pino-loki: JSON with structured metadata),
// and every query endpoint answers what was pushed, from the ingester before a flush and
// from the store after one, across a graceful restart.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import pinoLoki from "pino-loki";
import winston from "winston";
import LokiTransport from "winston-loki";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJson, spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const LINES = 120;
const winstonLine = (i: number) => `winston ${i}: ünïcödé "quoted" \\ ${"x".repeat(i % 13)}`;
const pinoLine = (i: number) => `pino ${i} GET /api/orders status=${i % 7 === 0 ? 500 : 200}`;
const traceOf = (i: number) => `trace-${Math.floor(i / 3)}`;

interface StreamsData {
  resultType: string;
  result: { stream: Record<string, string>; values: unknown[][] }[];
  stats: { sieve?: Record<string, unknown>; querier: { store: { totalChunksRef: number } } };
}

let dir: string;
let sieve: SieveProcess | undefined;
let window: Record<string, string>;

async function queryRange(
  query: string,
  extra: Record<string, string> = {},
  headers: Record<string, string> = {},
): Promise<StreamsData> {
  const body = (await getJson(
    sieve!.url,
    "/loki/api/v1/query_range",
    { query, limit: "1000", ...window, ...extra },
    headers,
  )) as { status: string; data: StreamsData };
  expect(body.status).toBe("success");
  return body.data;
}

const lines = (data: StreamsData) =>
  data.result.flatMap((s) => s.values.map((v) => v[1] as string));

async function pushWithClients(url: string): Promise<void> {
  const errors: unknown[] = [];
  const transport = new LokiTransport({
    host: url,
    labels: { app: "winston", env: "e2e" },
    json: false,
    batching: true,
    interval: 0.05,
    format: winston.format.printf((info) => String(info.message)),
    onConnectionError: (error: unknown) => errors.push(error),
  });
  // The client silently falls back to JSON without its snappy binding: make sure it did not.
  expect((transport as unknown as { batcher: { contentType: string } }).batcher.contentType).toBe(
    "application/x-protobuf",
  );
  // winston-loki extends its own copy of winston-transport: the same class, another copy.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
  const wlog = winston.createLogger({ transports: [transport] });
  for (let i = 0; i < LINES; i++) wlog.info(winstonLine(i));

  const stream = pinoLoki({
    host: url,
    batching: true,
    interval: 0.05,
    labels: { app: "pino", env: "e2e" },
    structuredMetaKey: "meta",
    logFormat: "{msg}",
    silenceErrors: false,
  });
  const plog = pino({ level: "info", base: null }, stream);
  for (let i = 0; i < LINES; i++) plog.info({ meta: { trace_id: traceOf(i) } }, pinoLine(i));

  await waitFor(async () => {
    const got = await queryRange('{env="e2e"}');
    return lines(got).length === 2 * LINES ? true : undefined;
  }, "every pushed line to be queryable");
  expect(errors).toEqual([]);
  await transport.close();
  wlog.close();
  stream.end();
  await once(stream, "close");
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-all-"));
  const now = Date.now();
  window = { start: String((now - 3_600_000) * 1e6), end: String((now + 600_000) * 1e6) };
  sieve = await spawnSieve(["all", "--data-dir", dir]);
  await pushWithClients(sieve.url);
}, 60_000);

afterAll(async () => {
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
}, 30_000);

/** Every endpoint, asked the same questions before and after a flush and a restart. */
async function checkEveryEndpoint(from: "ingester" | "store"): Promise<void> {
  // Log query: streams carry structured metadata as labels (Loki's default form).
  const pinoData = await queryRange('{app="pino"}');
  expect(pinoData.resultType).toBe("streams");
  expect(lines(pinoData).sort()).toEqual(
    Array.from({ length: LINES }, (_, i) => pinoLine(i)).sort(),
  );
  for (const s of pinoData.result) {
    expect(s.stream).toMatchObject({
      app: "pino",
      env: "e2e",
      level: "info",
      service_name: "pino",
    });
    expect(s.stream.trace_id).toMatch(/^trace-\d+$/);
  }
  // Forward: oldest first. Lines logged in one millisecond share a timestamp, and equal
  // timestamps come in a fixed order of their own (labels, line), not push order.
  const winstonData = await queryRange('{app="winston"}', { direction: "forward" });
  const stamps = winstonData.result.flatMap((s) => s.values.map((v) => BigInt(v[0] as string)));
  expect(stamps).toEqual([...stamps].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  expect(lines(winstonData).sort()).toEqual(
    Array.from({ length: LINES }, (_, i) => winstonLine(i)).sort(),
  );
  if (from === "store") expect(winstonData.stats.querier.store.totalChunksRef).toBeGreaterThan(0);

  // The needle: one trace's three lines, through the bloom-testable filter.
  const needle = await queryRange('{env="e2e"} | trace_id="trace-7"');
  expect(lines(needle).sort()).toEqual([pinoLine(21), pinoLine(22), pinoLine(23)].sort());
  expect(lines(await queryRange('{env="e2e"} | trace_id="absent"'))).toEqual([]);
  // With Loki's defaults (limit 100, backward) the oldest trace is past the newest 100 raw
  // lines: the ingester must filter before it limits, or the needle is lost.
  const oldest = (await getJson(sieve!.url, "/loki/api/v1/query_range", {
    query: '{app="pino"} | trace_id="trace-0"',
    ...window,
  })) as { data: StreamsData };
  expect(lines(oldest.data).sort()).toEqual([pinoLine(0), pinoLine(1), pinoLine(2)].sort());

  // Pipelines run on the stored lines.
  const errors = await queryRange('{app="pino"} | logfmt | status >= 500');
  expect(lines(errors).length).toBe(Math.ceil(LINES / 7));

  // categorize-labels: stream labels only, metadata in a third element.
  const categorized = await queryRange(
    '{app="pino"} | trace_id="trace-1"',
    {},
    { "X-Loki-Response-Encoding-Flags": "categorize-labels" },
  );
  expect(categorized.result.length).toBeGreaterThan(0);
  for (const s of categorized.result) {
    expect(s.stream).toEqual({ app: "pino", env: "e2e", level: "info", service_name: "pino" });
    for (const value of s.values) {
      expect(value[2]).toMatchObject({ structuredMetadata: { trace_id: "trace-1" } });
    }
  }

  // Metric queries: a matrix over the range, a vector at an instant.
  const matrix = (await getJson(sieve!.url, "/loki/api/v1/query_range", {
    query: 'sum by (app) (count_over_time({env="e2e"}[2h]))',
    ...window,
    step: "60",
  })) as {
    data: {
      resultType: string;
      result: { metric: Record<string, string>; values: [number, string][] }[];
    };
  };
  expect(matrix.data.resultType).toBe("matrix");
  const last = (app: string) =>
    Number(matrix.data.result.find((r) => r.metric.app === app)?.values.at(-1)?.[1]);
  expect(last("pino")).toBe(LINES);
  expect(last("winston")).toBe(LINES);
  const vector = (await getJson(sieve!.url, "/loki/api/v1/query", {
    query: 'count_over_time({app="pino"} | trace_id="trace-0" [2h])',
    time: window.end!,
  })) as { data: { resultType: string; result: { value: [number, string] }[] } };
  expect(vector.data.resultType).toBe("vector");
  expect(vector.data.result.map((r) => Number(r.value[1]))).toEqual([3]);

  // Labels, label values, series (Loki's match[] and logcli's match, GET and POST).
  const labels = (await getJson(sieve!.url, "/loki/api/v1/labels", window)) as { data: string[] };
  expect(labels.data).toEqual(expect.arrayContaining(["app", "env", "level"]));
  const apps = (await getJson(sieve!.url, "/loki/api/v1/label/app/values", window)) as {
    data: string[];
  };
  expect(apps.data).toEqual(["pino", "winston"]);
  const series = (await getJson(sieve!.url, "/loki/api/v1/series", {
    "match[]": '{env="e2e"}',
    ...window,
  })) as { data: Record<string, string>[] };
  expect(series.data).toEqual(
    expect.arrayContaining([
      { app: "pino", env: "e2e", level: "info", service_name: "pino" },
      { app: "winston", env: "e2e", level: "info", service_name: "winston" },
    ]),
  );
  const posted = await fetch(new URL("/loki/api/v1/series", sieve!.url), {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ match: '{app="winston"}', ...window }),
  });
  expect(posted.status).toBe(200);
  expect(((await posted.json()) as { data: unknown[] }).data).toEqual([
    { app: "winston", env: "e2e", level: "info", service_name: "winston" },
  ]);
  const stats = (await getJson(sieve!.url, "/loki/api/v1/index/stats", {
    query: '{env="e2e"}',
    ...window,
  })) as { streams: number; entries: number; chunks: number };
  expect(stats.streams).toBe(2);
  if (from === "store") {
    expect(stats.entries).toBe(2 * LINES);
    expect(stats.chunks).toBeGreaterThanOrEqual(2);
  }
}

describe("sieve all", () => {
  it("answers every endpoint from the ingester's unflushed data", async () => {
    const ready = await fetch(new URL("/ready", sieve!.url));
    expect(ready.status).toBe(200);
    await checkEveryEndpoint("ingester");
  });

  it("answers the same from the store after POST /flush, with blooms pruning", async () => {
    const flushed = await fetch(new URL("/flush", sieve!.url), { method: "POST" });
    expect(flushed.status).toBe(204);
    // Nothing is left in memory: the query workers answer from the store alone, without
    // asking the ingesters (their watermark says no range can find a line there).
    const asked = async (): Promise<number> => {
      const text = await (await fetch(new URL("/metrics", sieve!.url))).text();
      return [...text.matchAll(/^sieve_ingester_queries_total\{[^}]*\} (\d+)$/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
    };
    const before = await asked();
    expect(before).toBeGreaterThan(0);
    await checkEveryEndpoint("store");
    expect(await asked()).toBe(before);
    const metrics = await (await fetch(new URL("/metrics", sieve!.url))).text();
    expect(metrics).toMatch(/sieve_discarded_lines_total|sieve_received_lines_total/);
  });

  it("keeps every line across a graceful restart (SIGTERM flushes and exits 0), then ingests on worker threads", async () => {
    expect(await sieve!.stop("SIGTERM")).toBe(0);
    // The same data directory, now with the ingester on two worker threads.
    sieve = await spawnSieve(["all", "--data-dir", dir], { SIEVE_INGESTER_WORKERS: "2" });
    // The query workers loaded the newest index and its bloom blocks before the server
    // listened (querier.queryReadyDays): the first needle reads no bloom block.
    // The main thread rehearsed its queries through the query routes before it listened,
    // 30 rounds of four, and none of them reached the request log.
    const records = sieve
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { msg?: string; queries?: number; req?: unknown });
    const ready = records.findIndex((r) => r.msg?.endsWith("is ready") === true);
    const rehearsed = records.findIndex((r) => r.msg === "rehearsed the query routes");
    expect(rehearsed).toBeGreaterThanOrEqual(0);
    expect(rehearsed).toBeLessThan(ready);
    expect(records[rehearsed]!.queries).toBe(120);
    expect(records.slice(0, ready).filter((r) => r.msg === "incoming request")).toEqual([]);
    // Nor does the way it is left out warn (fastify deprecated its first spelling).
    expect(sieve.output()).not.toMatch(/Deprecation/);
    // Its needles (three of four a round) ran on the main thread: the compactor, whose runs
    // send needles to the workers, starts after it.
    const inline = (await (await fetch(new URL("/metrics", sieve.url))).text()).match(
      /^sieve_querier_inline_queries_total\{outcome="answered"\} (\d+)$/m,
    );
    expect(Number(inline?.[1])).toBe(90);
    const first = await queryRange('{app="pino"} | trace_id="trace-7"');
    expect(lines(first)).toHaveLength(3);
    const gateway = first.stats.sieve?.bloomGateway as { blocksRead: number; cacheHits: number };
    expect(gateway.blocksRead).toBe(0);
    expect(gateway.cacheHits).toBeGreaterThan(0);
    await checkEveryEndpoint("store");
    const metrics = await (await fetch(new URL("/metrics", sieve.url))).text();
    // The workers' metrics reach /metrics, summed: both consumed the log's partitions.
    expect(metrics).toMatch(/^sieve_ingester_heads_in_memory \d+$/m);
    expect(metrics).toMatch(/^sieve_ingester_head_bytes \d+$/m);
  });

  it("rejects bad queries with Loki's 400 and its parse error", async () => {
    const response = await fetch(
      new URL(`/loki/api/v1/query_range?query=${encodeURIComponent('{app="pino"')}`, sieve!.url),
    );
    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/parse error at line 1, col \d+/);
  });
});

describe("sieve all with authentication on", () => {
  it("keeps tenants apart and refuses requests without X-Scope-OrgID", async () => {
    const authDir = await mkdtemp(join(tmpdir(), "sieve-auth-"));
    const file = join(authDir, "sieve.yaml");
    await writeFile(file, "distributor:\n  authEnabled: true\nquerier:\n  authEnabled: true\n");
    const tenants = await spawnSieve(["all", "--data-dir", authDir, "--config-file", file]);
    try {
      const ts = String(Date.now() * 1e6);
      const push = (tenant: string | undefined, line: string) =>
        fetch(new URL("/loki/api/v1/push", tenants.url), {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            ...(tenant !== undefined && { "X-Scope-OrgID": tenant }),
          },
          body: JSON.stringify({ streams: [{ stream: { app: "t" }, values: [[ts, line]] }] }),
        });
      expect((await push("team-a", "secret of a")).status).toBe(204);
      expect((await push("team-b", "secret of b")).status).toBe(204);
      expect((await push(undefined, "no tenant")).status).toBe(401);
      const read = async (tenant: string) => {
        const body = (await getJson(
          tenants.url,
          "/loki/api/v1/query_range",
          { query: '{app="t"}', ...window },
          { "X-Scope-OrgID": tenant },
        )) as { data: StreamsData };
        return lines(body.data);
      };
      expect(
        await waitFor(
          async () => ((await read("team-a")).length > 0 ? read("team-a") : undefined),
          "a's line",
        ),
      ).toEqual(["secret of a"]);
      expect(await read("team-b")).toEqual(["secret of b"]);
      const anonymous = await fetch(
        new URL(`/loki/api/v1/query_range?query=${encodeURIComponent('{app="t"}')}`, tenants.url),
      );
      expect(anonymous.status).toBe(401);
    } finally {
      await tenants.stop();
      await rm(authDir, { recursive: true, force: true });
    }
  });
});
