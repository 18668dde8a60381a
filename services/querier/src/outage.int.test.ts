/**
 * Queries while the object store is down or frozen, on a private MinIO (never the shared
 * one): the real server over loopback answers 503 naming the store, fast when the store is
 * stopped and by the store's read deadline when it is frozen, and answers correctly again
 * once the store is back.
 */
import type { Entry } from "@sieve/chunk";
import type { FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startPrivateMinio, type PrivateMinio } from "@sieve/storage/testing";
import { DEFAULT_CONFIG } from "./config.js";
import { createQuerierServer } from "./http.js";
import { createQuerier } from "./index.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const READ_TIMEOUT_MS = 1_000;
/** Time an answer may take past the store's deadline: timers, sockets, a loaded machine. */
const SLACK_MS = 1_000;

let minio: PrivateMinio;
let store: Awaited<ReturnType<PrivateMinio["bucket"]>>;
let server: FastifyInstance;
let url: string;

const entries: Entry[] = Array.from({ length: 50 }, (_, i) => ({
  timestamp: T0 + BigInt(i) * S,
  line: `line ${i}`,
  structuredMetadata: [],
}));

beforeAll(async () => {
  minio = await startPrivateMinio();
  store = await minio.bucket({ readTimeoutMs: READ_TIMEOUT_MS });
  // Written as a flush writes it, then copied object by object into the bucket.
  const local = await tempStore();
  await writeFlush(local.store, "fake", [{ labels: { app: "api" }, entries }], 10);
  for (const key of await local.store.list("")) await store.put(key, await local.store.get(key));
  await local.close();
  const registry = new Registry();
  // Caches off: every query must reach the store.
  const config = { ...DEFAULT_CONFIG, segmentCacheBytes: 1, chunkCacheBytes: 1 };
  const querier = createQuerier({ config, store, registry });
  server = await createQuerierServer({ querier, authEnabled: false, registry });
  url = await server.listen({ port: 0, host: "127.0.0.1" });
}, 90_000);

afterAll(async () => {
  await server.close();
  store.close();
  await minio.close();
});

const range = { start: String(T0 - 60n * S), end: String(T0 + 120n * S) };
const QUERIES: [path: string, params: Record<string, string>][] = [
  ["/loki/api/v1/query_range", { ...range, query: '{app="api"}', limit: "1000" }],
  ["/loki/api/v1/labels", range],
  ["/loki/api/v1/series", { ...range, "match[]": '{app="api"}' }],
  ["/loki/api/v1/index/stats", { ...range, query: '{app="api"}' }],
];

async function timed(path: string, params: Record<string, string>) {
  const t0 = performance.now();
  const res = await fetch(`${url}${path}?${new URLSearchParams(params).toString()}`);
  const text = await res.text();
  return { status: res.status, text, ms: performance.now() - t0 };
}

/** Every query answers 200, and query_range returns all 50 lines. */
async function expectHealthy(): Promise<void> {
  for (const [path, params] of QUERIES) {
    const res = await timed(path, params);
    expect(res.status, `${path}: ${res.text}`).toBe(200);
  }
  const res = await timed(QUERIES[0]![0], QUERIES[0]![1]);
  const body = JSON.parse(res.text) as { data: { result: { values: unknown[] }[] } };
  expect(body.data.result.flatMap((r) => r.values)).toHaveLength(50);
}

describe("queries during an object store outage", () => {
  test("store stopped: 503 naming the store in under 2 s; correct again after a restart", async () => {
    await expectHealthy();
    await minio.stop();
    try {
      for (const [path, params] of QUERIES) {
        const res = await timed(path, params);
        expect(res.status, `${path}: ${res.text}`).toBe(503);
        expect(res.text).toContain("object store unavailable");
        expect(res.text).toContain(store.label);
        expect(res.ms, path).toBeLessThan(2_000);
      }
    } finally {
      await minio.start();
    }
    await expectHealthy();
  });

  test("store frozen: 503 by the read deadline, not the whole freeze; correct after", async () => {
    minio.freeze();
    try {
      for (const [path, params] of QUERIES) {
        const res = await timed(path, params);
        expect(res.status, `${path}: ${res.text}`).toBe(503);
        expect(res.text).toContain(`gave no answer within ${READ_TIMEOUT_MS} ms`);
        expect(res.ms, path).toBeLessThan(READ_TIMEOUT_MS + SLACK_MS);
      }
    } finally {
      minio.thaw();
    }
    await expectHealthy();
  });
});
