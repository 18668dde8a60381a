/**
 * Issue 10, items 2 and 3 (querier side): hostile queries over loopback against the real
 * server, each evaluated on a worker thread of a real pool, over a real in-process
 * ingester (write-ahead log, head chunks) holding the lines. Each answers a 4xx or 504
 * naming the limit; the process, the pool and every other query go on.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createIngester, DEFAULT_CONFIG as INGESTER_DEFAULTS } from "@sieve/ingester";
import type { IngesterService } from "@sieve/ingester";
import { fingerprint, fingerprintKey, labelsString, parseLabels, partitionOf } from "@sieve/labels";
import { encodeQueueRecord } from "@sieve/proto";
import { openWal, type LocalWal } from "@sieve/queue";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG, type QuerierConfig } from "./config.js";
import { ERR_DEADLINE_EXCEEDED } from "./errors.js";
import { createQuerierServer } from "./http.js";
import { QueryPool } from "./pool.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const NOW = T0 + 3000n * S;
const PARTITIONS = 2;
const SHORT_LINES = 5000;
const BIG_LINES = 4000;
// Generous for a loaded 2-core machine, where a fresh worker takes ~0.7 s to load.
const TIMEOUT_MS = 3000;
const silent = pino({ level: "silent" });

let dir: string;
let wal: LocalWal;
let ingester: IngesterService;
let pool: QueryPool;
let server: FastifyInstance;
let url: string;

function record(labels: string, lines: readonly string[], first: number) {
  const canonical = labelsString(parseLabels(labels));
  const fp = fingerprint(canonical);
  return {
    partition: partitionOf(fp, PARTITIONS),
    key: fingerprintKey(fp),
    value: encodeQueueRecord({
      tenant: "fake",
      labels: canonical,
      fingerprint: fp,
      entries: lines.map((line, i) => ({
        timestampNs: T0 + BigInt(first + i) * 100_000_000n,
        line,
        structuredMetadata: [],
      })),
    }),
  };
}

async function get(path: string, params: Record<string, string>, method = "GET") {
  const started = performance.now();
  const form = new URLSearchParams(params).toString();
  const res =
    method === "GET"
      ? await fetch(`${url}${path}?${form}`)
      : await fetch(`${url}${path}`, {
          method,
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: form,
        });
  const text = await res.text();
  return { status: res.status, text, ms: performance.now() - started };
}

const range = { start: String(T0), end: String(T0 + 1000n * S) };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-isolation-"));
  wal = await openWal({ dir: join(dir, "wal"), partitions: PARTITIONS });
  const storeDir = join(dir, "objects");
  ingester = createIngester({
    // Every line stays in the heads: the big stream's 20 MB would pass the default bound.
    config: {
      ...INGESTER_DEFAULTS,
      instanceId: "isolation",
      flushCheckIntervalMs: 3_600_000,
      chunkMaxUncompressedBytes: 64 * 1024 * 1024,
    },
    consumer: wal.consumer,
    store: (await import("@sieve/storage")).openStore({ backend: "filesystem", dir: storeDir }),
    logger: silent,
    registry: new Registry(),
  });
  await ingester.ingester.start();
  const short = Array.from(
    { length: SHORT_LINES },
    (_, i) => `{"i":${i},"level":"${i % 3 === 0 ? "error" : "info"}","msg":"hello ${i}"}`,
  );
  const big = Array.from({ length: BIG_LINES }, (_, i) => `${i} ${"x".repeat(5120)}`);
  // Records of 500 lines: under the write-ahead log's record size cap.
  for (let i = 0; i < SHORT_LINES; i += 500) {
    await wal.writer.append([
      record(`{app="qf"}`, short.slice(i, i + 500), i),
      ...(i < BIG_LINES ? [record(`{app="qb"}`, big.slice(i, i + 500), i)] : []),
    ]);
  }
  for (let i = 0; ; i++) {
    const got = await ingester.ingester.query({
      tenant: "fake",
      selector: `{app=~"q."}`,
      start: T0,
      end: NOW,
      direction: "forward",
      limit: 0,
    });
    if (got.reduce((n, s) => n + s.entries.length, 0) === SHORT_LINES + BIG_LINES) break;
    if (i > 200) throw new Error("the ingester did not take the lines");
    await new Promise((r) => setTimeout(r, 25));
  }
  const config: QuerierConfig = {
    ...DEFAULT_CONFIG,
    limits: { ...DEFAULT_CONFIG.limits, queryTimeoutMs: TIMEOUT_MS },
  };
  const registry = new Registry();
  pool = new QueryPool({
    workers: 3,
    heapMb: 512,
    setup: {
      config,
      store: { backend: "filesystem", dir: storeDir },
      chunkFilter: "none",
      ingesters: "port",
    },
    ingesters: ingester.ingester,
    registry,
    logger: silent,
  });
  await pool.ready();
  server = await createQuerierServer({
    pool,
    authEnabled: false,
    registry,
    logger: silent,
    now: () => NOW,
  });
  url = await server.listen({ port: 0, host: "127.0.0.1" });
}, 60_000);

afterAll(async () => {
  await server.close();
  await pool.close();
  await ingester.ingester.stop();
  await wal.close();
  await rm(dir, { recursive: true, force: true });
});

/** A cheap query that must keep answering while a hostile one runs. */
async function cheapQueryAnswers(): Promise<void> {
  const res = await get("/loki/api/v1/query_range", {
    query: `{app="qf"} |= "hello 4999"`,
    limit: "10",
    ...range,
  });
  expect(res.status).toBe(200);
  expect(res.text).toContain("hello 4999");
}

describe("hostile queries (issue 10, item 2)", () => {
  test("line_format repeat 1 MiB × limit 5000: 400 naming the memory limit, process alive", async () => {
    const res = await get("/loki/api/v1/query_range", {
      query: `{app="qf"} | line_format "{{ repeat 1048576 \\"a\\" }}"`,
      limit: "5000",
      ...range,
    });
    expect(res.status).toBe(400);
    expect(res.text).toContain("maxQueryMemoryBytes");
    await cheapQueryAnswers();
  }, 30_000);

  test("a sum of 1,000 identical count_over_time terms over 4,000 lines of 5 KB answers", async () => {
    const term = `count_over_time({app="qb"}[1m])`;
    const res = await get("/loki/api/v1/query_range", {
      query: Array.from({ length: 1000 }, () => term).join(" + "),
      step: "60",
      ...range,
    });
    expect(res.status, res.text.slice(0, 300)).toBeLessThan(500);
    if (res.status === 200) {
      const body = JSON.parse(res.text) as {
        data: { result: { values: [number, string][] }[] };
      };
      const total = body.data.result[0]!.values.reduce((n, [, v]) => n + Number(v), 0);
      // Every line is counted in each of the minutes its [1m] window covers.
      expect(total).toBeGreaterThan(0);
    }
    await cheapQueryAnswers();
  }, 30_000);

  test("5,000 | json stages with a short timeout: 504 at the deadline, others answered meanwhile", async () => {
    // About 10 s of work here (1,000 stages took 2 s): well past the 3 s deadline.
    const slow = get(
      "/loki/api/v1/query_range",
      { query: `{app="qf"}` + " | json".repeat(5000), limit: "5000", ...range },
      "POST",
    );
    // While it burns a worker, a cheap query and /ready answer promptly.
    const t0 = performance.now();
    await cheapQueryAnswers();
    const ready = await fetch(`${url}/ready`);
    expect(ready.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(1000);
    const res = await slow;
    expect(res.status, `${res.ms} ms`).toBe(504);
    expect(res.text).toBe(ERR_DEADLINE_EXCEEDED + "\n");
    expect(res.ms).toBeLessThan(TIMEOUT_MS + 1000);
    await cheapQueryAnswers();
    // Counted on the main thread's registry, as in process.
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(
      /sieve_querier_request_duration_seconds_count\{route="\/loki\/api\/v1\/query_range",status_code="504"\} 1/,
    );
  }, 30_000);
});

const EMPTY_COMPATIBLE =
  'parse error : queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~".*" does not meet this requirement, but app=~".+" will\n';

describe("user errors are 4xx on every route (issue 10, item 3)", () => {
  const selectors = [`{env!~"dev"}`, `{a=""}`, `{a=~".*"}`];
  const routes: [string, (sel: string) => Record<string, string>][] = [
    ["/loki/api/v1/index/stats", (query) => ({ query })],
    ["/loki/api/v1/series", (sel) => ({ "match[]": sel })],
    ["/loki/api/v1/labels", (query) => ({ query })],
    ["/loki/api/v1/label/app/values", (query) => ({ query })],
  ];
  for (const [path, params] of routes) {
    for (const sel of selectors) {
      test(`${path} ${sel}: 400 with Loki's text`, async () => {
        const res = await get(path, { ...params(sel), ...range });
        expect(res.status).toBe(400);
        expect(res.text).toBe(EMPTY_COMPATIBLE);
      });
    }
  }

  test("a 20,000-term 1 + 1 + ... chain (80 KB, a form body): 400, not 500", async () => {
    const res = await get(
      "/loki/api/v1/query",
      { query: Array.from({ length: 20_000 }, () => "1").join(" + "), time: String(NOW) },
      "POST",
    );
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/^parse error/);
    await cheapQueryAnswers();
  });
});

describe("Sieve's own failures", () => {
  test("a 500 names the request id its log line carries; the pool goes on", async () => {
    const logs: string[] = [];
    const logger = pino({ level: "error" }, { write: (line: string) => void logs.push(line) });
    const registry = new Registry();
    const broken = new QueryPool({
      workers: 1,
      setup: {
        config: DEFAULT_CONFIG,
        store: { backend: "filesystem", dir: join(dir, "objects") },
        chunkFilter: "none",
        ingesters: "port",
      },
      ingesters: {
        query: () => Promise.reject(new Error("ingester exploded")),
        series: () => Promise.resolve([]),
        volume: () => Promise.resolve([]),
        stats: () => Promise.resolve({ streams: 0, chunks: 0, bytes: 0, entries: 0 }),
        patterns: () => Promise.resolve([]),
        querySample: () => Promise.reject(new Error("ingester exploded")),
      },
      registry,
      logger,
    });
    const app = await createQuerierServer({ pool: broken, authEnabled: false, registry, logger });
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    try {
      const q = new URLSearchParams({ query: `{app="qf"}`, ...range });
      const res = await fetch(`${base}/loki/api/v1/query_range?${q.toString()}`);
      const text = await res.text();
      expect(res.status).toBe(500);
      const id = /\(request id: ([^)]+)\)\n$/.exec(text)?.[1];
      expect(text).toContain("ingester exploded");
      expect(id).toBeDefined();
      const line = logs.map((l) => JSON.parse(l) as { reqId?: string; msg?: string });
      expect(line.some((l) => l.reqId === id && l.msg === "query failed")).toBe(true);
      const labels = await fetch(
        `${base}/loki/api/v1/labels?${new URLSearchParams(range).toString()}`,
      );
      expect(labels.status).toBe(200);
    } finally {
      await app.close();
      await broken.close();
    }
  });
});
