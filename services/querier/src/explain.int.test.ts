/**
 * `explain=true` and the false-positive audit over loopback against the real server, with
 * real chunks, blooms and index segments in a real FsObjectStore and the real bloom gateway:
 * in process, over its HTTP API (BloomGatewayClient ↔ gateway server, so the verdicts cross
 * the protobuf), and behind a worker pool whose gateway is the main thread's (as `sieve all`
 * runs it), so the explain and the audit's counts cross the threads too.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BloomGateway,
  BloomGatewayClient,
  DEFAULT_CONFIG as GATEWAY_CONFIG,
  createBloomGatewayServer,
} from "@sieve/bloom-gateway";
import type { ChunkFilter } from "@sieve/proto";
import { FsObjectStore } from "@sieve/storage";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { EXPLAIN_MAX_CHUNKS, type ExplainChunk, type QueryExplain } from "./explain.js";
import { createQuerierServer } from "./http.js";
import { createQuerier } from "./index.js";
import { QueryPool } from "./pool.js";
import {
  bloomBlockKey,
  flushCount,
  identity,
  writeFlush,
  type TestStream,
} from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const NOW = T0 + 3600n * S;
const range = { start: String(T0), end: String(NOW), limit: "100" };
const silent = pino({ level: "silent" });

type Json = Record<string, unknown>;

/** A stream `pod` of app `app` with one entry a second from `T0 + at` s, one trace id each. */
function stream(app: string, pod: string, traces: readonly string[], at = 0): TestStream {
  return {
    labels: { app, pod },
    entries: traces.map((trace, i) => ({
      timestamp: T0 + BigInt(at + i) * S,
      line: `${pod} request ${i} trace ${trace}`,
      structuredMetadata: [{ name: "trace_id", value: trace }],
    })),
  };
}

let dir: string;
let store: FsObjectStore;
const servers: FastifyInstance[] = [];
const pools: QueryPool[] = [];

function gateway(): BloomGateway {
  return new BloomGateway(GATEWAY_CONFIG, store, silent, new Registry());
}

/** A querier server over `chunkFilter`, and its registry. */
async function serve(chunkFilter: ChunkFilter): Promise<{ url: string; registry: Registry }> {
  const registry = new Registry();
  const querier = createQuerier({ config: DEFAULT_CONFIG, store, chunkFilter, registry });
  const app = await createQuerierServer({ querier, authEnabled: true, registry, now: () => NOW });
  servers.push(app);
  return { url: await app.listen({ port: 0, host: "127.0.0.1" }), registry };
}

interface Answer {
  status: number;
  data: { result: unknown[]; stats: { sieve: Json }; explain?: QueryExplain };
}

async function ask(
  url: string,
  tenant: string,
  params: Record<string, string>,
  path = "query_range",
): Promise<Answer> {
  const res = await fetch(`${url}/loki/api/v1/${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", "x-scope-orgid": tenant },
    body: new URLSearchParams(params).toString(),
  });
  const text = await res.text();
  const data = res.status === 200 ? (JSON.parse(text) as { data: Answer["data"] }).data : undefined;
  return { status: res.status, data: data! };
}

/** `stream from` → the chunk's explain entry. */
function byChunk(explain: QueryExplain | undefined): Map<string, ExplainChunk> {
  return new Map((explain?.chunks ?? []).map((c) => [`${c.stream} ${c.from}`, c]));
}

const key = (labels: Record<string, string>, at: number) =>
  `${identity(labels).canonical} ${T0 + BigInt(at) * S}`;

// Tenant "explain": a (pod=a) holds the needle in its first chunk only (its bloom covers both
// chunks, so they are tested one by one); b never, flushed a chunk at a time (so each bloom
// is tested as a series); c's bloom is recorded missing (too large); d's bloom block is
// deleted after the flush.
const a = stream("shop", "a", ["needle", "a-1", "a-2", "a-3"]);
const b = stream("shop", "b", ["b-0", "b-1"], 10);
const bLater = stream("shop", "b", ["b-2", "b-3"], 12);
const c = stream("shop", "c", ["c-0", "c-1"], 20);
const d = stream("shop", "d", ["d-0", "d-1"], 30);
const NEEDLE = '{app="shop"} | trace_id="needle"';

/** The explain `{app="shop"} | trace_id="needle"` must answer, by chunk. */
const expected: [string, Partial<ExplainChunk>][] = [
  [key(a.labels, 0), { outcome: "kept", reason: "passed" }],
  [key(a.labels, 2), { outcome: "pruned", reason: "chunk", test: 'trace_id="needle"' }],
  [key(b.labels, 10), { outcome: "pruned", reason: "series", test: 'trace_id="needle"' }],
  [key(b.labels, 12), { outcome: "pruned", reason: "series", test: 'trace_id="needle"' }],
  [key(c.labels, 20), { outcome: "kept", reason: "no_bloom", detail: "too_large" }],
  [key(d.labels, 30), { outcome: "kept", reason: "fail_open", detail: "block_not_found" }],
];

function expectNeedleExplain(answer: Answer): void {
  expect(answer.status).toBe(200);
  const explain = answer.data.explain!;
  expect(explain).toMatchObject({ total: 6, truncated: false, limit: EXPLAIN_MAX_CHUNKS });
  expect(explain.chunks).toHaveLength(6);
  const got = byChunk(explain);
  for (const [k, want] of expected) expect(got.get(k), k).toMatchObject(want);
  // The kept chunks carry neither a test nor, when they passed, a detail.
  const passed = got.get(key(a.labels, 0))!;
  expect(passed).not.toHaveProperty("test");
  expect(passed).not.toHaveProperty("detail");
  expect(passed.through).toBe(String(T0 + S));
  expect(passed.bytes).toBeGreaterThan(0);
  expect(Number.isInteger(passed.checksum)).toBe(true);
  // d is kept untested (and holds no needle): no false positive of the blooms.
  expect(answer.data.stats.sieve.falsePositiveChunks).toBe(0);
}

// Tenant "audit": the bloom of e's middle chunk holds trace_id=ghost, which no entry has.
const e = stream("audit", "e", ["e-0", "e-1", "e-2", "e-3", "e-4", "e-5"]);
// Tenant "lines": the same with a line n-gram ghost ("ghost words" on no line).
const f = stream("lines", "f", ["f-0", "f-1", "f-2", "f-3", "f-4", "f-5"]);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-explain-"));
  store = new FsObjectStore(dir);
  await writeFlush(store, "explain", [a, b], 2);
  await writeFlush(store, "explain", [bLater], 2);
  await writeFlush(store, "explain", [c], 2, 512, undefined, { missing: "too_large" });
  await writeFlush(store, "explain", [d], 2);
  await store.delete(bloomBlockKey("explain", flushCount()));
  const ghost = { stream: 0, chunk: 1 };
  await writeFlush(store, "audit", [e], 2, 512, undefined, {
    ghost: { ...ghost, pairs: [{ name: "trace_id", value: "ghost" }] },
  });
  await writeFlush(
    store,
    "lines",
    [f],
    2,
    512,
    { length: 4, skip: 0 },
    {
      ghost: { ...ghost, line: "ghost words" },
    },
  );
  // 1,001 one-line chunks: past the explain's cap.
  const many = stream(
    "many",
    "m",
    Array.from({ length: EXPLAIN_MAX_CHUNKS + 1 }, (_, i) => `m-${i}`),
  );
  await writeFlush(store, "many", [many], 1);
});

afterAll(async () => {
  for (const s of servers) await s.close();
  for (const p of pools) await p.close();
  await rm(dir, { recursive: true, force: true });
});

describe("explain=true", () => {
  test("pruned at series level, at chunk level, kept by a missing bloom and by fail-open: each with its reason", async () => {
    const { url } = await serve(gateway());
    const answer = await ask(url, "explain", { query: NEEDLE, explain: "true", ...range });
    expectNeedleExplain(answer);
    expect(answer.data.result).toHaveLength(1);
    // Asked without explain: no explain.
    const plain = await ask(url, "explain", { query: NEEDLE, ...range });
    expect(plain.data.explain).toBeUndefined();
    expect(plain.data.result).toEqual(answer.data.result);
  });

  test("the same through the gateway's HTTP API (the verdicts cross the protobuf)", async () => {
    const gw = await createBloomGatewayServer({
      config: GATEWAY_CONFIG,
      store,
      logger: silent,
      registry: new Registry(),
    });
    servers.push(gw);
    const gwUrl = await gw.listen({ port: 0, host: "127.0.0.1" });
    const { url } = await serve(new BloomGatewayClient({ urls: [gwUrl] }));
    const remote = await ask(url, "explain", { query: NEEDLE, explain: "true", ...range });
    expectNeedleExplain(remote);
    const { url: local } = await serve(gateway());
    const inProcess = await ask(local, "explain", { query: NEEDLE, explain: "true", ...range });
    expect(remote.data.explain).toEqual(inProcess.data.explain);
  });

  test("a gateway that fails: every tested chunk kept by fail-open, naming the failure", async () => {
    const { url } = await serve({ filterChunkRefs: () => Promise.reject(new Error("down")) });
    const got = byChunk(
      (await ask(url, "explain", { query: NEEDLE, explain: "1", ...range })).data.explain,
    );
    for (const k of [key(a.labels, 0), key(b.labels, 12), key(d.labels, 30)]) {
      expect(got.get(k)).toMatchObject({
        outcome: "kept",
        reason: "fail_open",
        detail: "gateway_error",
      });
    }
    expect(got.get(key(c.labels, 20))).toMatchObject({ reason: "no_bloom", detail: "too_large" });
  });

  test("metric queries, on query_range and query, explain the same chunks", async () => {
    const { url } = await serve(gateway());
    const metric = `count_over_time(${NEEDLE} [1h])`;
    const matrix = await ask(url, "explain", {
      query: metric,
      explain: "true",
      ...range,
      step: "60",
    });
    expectNeedleExplain(matrix);
    const vector = await ask(
      url,
      "explain",
      { query: metric, explain: "true", time: String(T0 + 3599n * S) },
      "query",
    );
    expectNeedleExplain(vector);
  });

  test("past the cap the list is truncated and `total` counts every chunk", async () => {
    const { url } = await serve(gateway());
    const answer = await ask(url, "many", {
      query: '{app="many"}',
      explain: "true",
      ...range,
      limit: "1",
    });
    const explain = answer.data.explain!;
    expect(explain).toMatchObject({
      total: EXPLAIN_MAX_CHUNKS + 1,
      truncated: true,
      limit: EXPLAIN_MAX_CHUNKS,
    });
    expect(explain.chunks).toHaveLength(EXPLAIN_MAX_CHUNKS);
    // No bloom-testable matcher: nothing tested.
    expect(explain.chunks[0]).toMatchObject({
      outcome: "kept",
      reason: "no_bloom",
      detail: "no_test",
    });
  });

  test("a bad value is a 400", async () => {
    const { url } = await serve(gateway());
    const res = await ask(url, "explain", { query: NEEDLE, explain: "yes", ...range });
    expect(res.status).toBe(400);
  });
});

describe("false-positive audit", () => {
  const GHOST = '{app="audit"} | trace_id="ghost"';

  test("a chunk whose bloom holds a token none of its entries has counts once, per query and per tenant", async () => {
    const { url, registry } = await serve(gateway());
    const answer = await ask(url, "audit", { query: GHOST, explain: "true", ...range });
    expect(answer.data.result).toEqual([]);
    expect(answer.data.stats.sieve).toMatchObject({
      chunksInRange: 3,
      chunksPrunedByBlooms: 2,
      chunksFetched: 1,
      falsePositiveChunks: 1,
    });
    expect(byChunk(answer.data.explain).get(key(e.labels, 2))).toMatchObject({ reason: "passed" });
    // A metric query reads the chunk whole too.
    const metric = await ask(
      url,
      "audit",
      { query: `count_over_time(${GHOST} [1h])`, time: String(T0 + 3599n * S) },
      "query",
    );
    expect(metric.data.stats.sieve.falsePositiveChunks).toBe(1);
    const text = await registry.metrics();
    expect(text).toContain('sieve_querier_bloom_false_positive_chunks_total{tenant="audit"} 2');
    expect(text).toContain('sieve_querier_bloom_pruned_chunks_total{tenant="audit"} 4');
  });

  test("a chunk with a matching entry, or not read whole (partly out of range), does not count", async () => {
    const { url } = await serve(gateway());
    const real = await ask(url, "audit", { query: '{app="audit"} | trace_id="e-3"', ...range });
    expect(real.data.result).toHaveLength(1);
    expect(real.data.stats.sieve).toMatchObject({ chunksFetched: 1, falsePositiveChunks: 0 });
    // The ghost chunk holds the entries at T0+2s and T0+3s: a range from T0+3s cuts it.
    const cut = { ...range, start: String(T0 + 3n * S) };
    const partial = await ask(url, "audit", { query: GHOST, ...cut });
    expect(partial.data.stats.sieve).toMatchObject({ chunksFetched: 1, falsePositiveChunks: 0 });
  });

  test("a line filter's n-grams all present in a chunk with no line holding the literal counts too", async () => {
    const { url } = await serve(gateway());
    const answer = await ask(url, "lines", { query: '{app="lines"} |= "ghost words"', ...range });
    expect(answer.data.result).toEqual([]);
    expect(answer.data.stats.sieve).toMatchObject({
      chunksInRange: 3,
      chunksPrunedByBlooms: 2,
      falsePositiveChunks: 1,
    });
  });

  test("on worker threads with the main thread's gateway (sieve all): explain and counts come back", async () => {
    const registry = new Registry();
    const pool = new QueryPool({
      workers: 1,
      heapMb: 256,
      setup: {
        config: DEFAULT_CONFIG,
        store: { backend: "filesystem", dir },
        chunkFilter: "port",
        ingesters: "none",
      },
      chunkFilter: gateway(),
      registry,
      logger: silent,
    });
    pools.push(pool);
    await pool.ready();
    const app = await createQuerierServer({ pool, authEnabled: true, registry, now: () => NOW });
    servers.push(app);
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    expectNeedleExplain(await ask(url, "explain", { query: NEEDLE, explain: "true", ...range }));
    const ghost = await ask(url, "audit", { query: GHOST, ...range });
    expect(ghost.data.stats.sieve.falsePositiveChunks).toBe(1);
    const text = await registry.metrics();
    expect(text).toContain('sieve_querier_bloom_false_positive_chunks_total{tenant="audit"} 1');
    expect(text).toContain('sieve_querier_bloom_pruned_chunks_total{tenant="audit"} 2');
    expect(text).toContain('sieve_querier_bloom_pruned_chunks_total{tenant="explain"} 3');
  });
});
