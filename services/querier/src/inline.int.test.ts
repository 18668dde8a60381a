/**
 * Needle queries on the main thread (inline.ts) beside a real pool of query workers, over
 * loopback against the real server, a real in-process bloom gateway and real blooms in a
 * file store: a needle is answered on the main thread, exactly as a worker answers it;
 * what is not a needle goes to a worker; a needle past its budget (time, or chunks in
 * range) is answered by a worker, counted `over_budget`; and one runs at a time.
 */
import { BloomGateway, DEFAULT_CONFIG as GATEWAY_CONFIG } from "@sieve/bloom-gateway";
import type { Entry } from "@sieve/chunk";
import type { ChunkFilter, FilterRequest, FilterResponse } from "@sieve/proto";
import type { FsObjectStore } from "@sieve/storage";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import type { QueryTask } from "./handler.js";
import { createQuerierServer } from "./http.js";
import { createInlineQueries } from "./index.js";
import { InlineQueries } from "./inline.js";
import { QueryPool } from "./pool.js";
import { Querier } from "./querier.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const NOW = T0 + 3600n * S;
const range = { start: String(T0), end: String(NOW), limit: "1000" };
/** 8 streams × 600 entries in chunks of 100: 48 chunks in range of `{service="api"}`. */
const CHUNKS = 48;

let store: FsObjectStore;
let close: () => Promise<void>;
let pool: QueryPool;
const servers: FastifyInstance[] = [];

function gateway(): BloomGateway {
  return new BloomGateway(GATEWAY_CONFIG, store, pino({ level: "silent" }), new Registry());
}

/** A querier on this thread, counting on the pool's metrics (as createInlineQueries makes). */
function mainQuerier(chunkFilter: ChunkFilter = gateway()): Querier {
  return new Querier({
    config: pool.shared.config,
    store,
    chunkFilter,
    ...(pool.metrics !== undefined && { metrics: pool.metrics }),
    report: pool.report,
  });
}

async function serve(inline?: InlineQueries): Promise<string> {
  const app = await createQuerierServer({
    pool,
    ...(inline !== undefined && { inline }),
    authEnabled: false,
    registry: new Registry(),
    now: () => NOW,
  });
  servers.push(app);
  return app.listen({ port: 0, host: "127.0.0.1" });
}

/** The status and body of a `query_range`. */
async function ask(base: string, query: string): Promise<{ status: number; body: string }> {
  const params = new URLSearchParams({ query, ...range });
  const res = await fetch(`${base}/loki/api/v1/query_range?${params.toString()}`);
  return { status: res.status, body: await res.text() };
}

/** The lines of an answer, in order (stats and timings differ between threads). */
function linesOf(body: string): string[] {
  const json = JSON.parse(body) as { data: { result: { values: [string, string][] }[] } };
  return json.data.result.flatMap((r) => r.values.map(([, line]) => line));
}

async function inlineCounts(): Promise<{ answered: number; over_budget: number }> {
  const { values } = await pool.metrics!.inlineQueries.get();
  const count = (outcome: string) => values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
  return { answered: count("answered"), over_budget: count("over_budget") };
}

/** `ask`, and what it changed in the inline counts: [answered, over_budget]. */
async function askCounted(
  base: string,
  query: string,
): Promise<{ status: number; body: string; counts: [number, number] }> {
  const before = await inlineCounts();
  const answer = await ask(base, query);
  const after = await inlineCounts();
  const counts: [number, number] = [
    after.answered - before.answered,
    after.over_budget - before.over_budget,
  ];
  return { ...answer, counts };
}

const NEEDLE = '{service="api"} | trace_id="tr-3-7"';
/** {@link NEEDLE} as the HTTP layer hands it over. */
const NEEDLE_TASK: QueryTask = {
  route: "query_range",
  form: new URLSearchParams({ query: NEEDLE, ...range }).toString(),
  tenant: "fake",
  flags: [],
  nowNs: NOW,
};

beforeAll(async () => {
  ({ store, close } = await tempStore());
  const streams = [...Array(8).keys()].map((s) => ({
    labels: { service: "api", pod: `pod-${s}` },
    entries: [...Array(600).keys()].map((i): Entry => ({
      timestamp: T0 + BigInt(i) * S + BigInt(s),
      line: `pod ${s} request ${i} done`,
      structuredMetadata: [{ name: "trace_id", value: `tr-${s}-${Math.floor(i / 5)}` }],
    })),
  }));
  await writeFlush(store, "fake", streams, 100);
  pool = new QueryPool({
    workers: 1,
    shares: 2,
    setup: {
      config: DEFAULT_CONFIG,
      store: { backend: "filesystem", dir: store.root },
      chunkFilter: { local: GATEWAY_CONFIG },
      ingesters: "none",
    },
    registry: new Registry(),
  });
  await pool.ready();
}, 30_000);

afterAll(async () => {
  for (const app of servers) await app.close();
  await pool.close();
  await close();
});

describe("needle queries on the main thread beside a pool", () => {
  test("a needle is answered on the main thread, as a worker answers it", async () => {
    const inline = createInlineQueries(pool, { store, chunkFilter: gateway() }, 10_000);
    const [withInline, poolOnly] = [await serve(inline), await serve()];
    const answer = await askCounted(withInline, NEEDLE);
    expect(answer.counts).toEqual([1, 0]);
    expect(answer.status).toBe(200);
    const lines = linesOf(answer.body);
    expect(lines).toEqual([
      "pod 3 request 39 done",
      "pod 3 request 38 done",
      "pod 3 request 37 done",
      "pod 3 request 36 done",
      "pod 3 request 35 done",
    ]);
    const fromWorker = await ask(poolOnly, NEEDLE);
    expect(linesOf(fromWorker.body)).toEqual(lines);
    // Pruned by the blooms on the main thread too.
    const stats = (
      JSON.parse(answer.body) as { data: { stats: { sieve: { chunksPrunedByBlooms: number } } } }
    ).data.stats.sieve;
    expect(stats.chunksPrunedByBlooms).toBeGreaterThan(CHUNKS / 2);
  });

  test("what is not a needle goes to a worker; a query that does not parse is refused here", async () => {
    const base = await serve(createInlineQueries(pool, { store, chunkFilter: gateway() }, 10_000));
    for (const query of [
      '{service="api"} |= "request 7 "',
      'count_over_time({service="api"} | trace_id="tr-3-7" [1h])',
    ]) {
      const answer = await askCounted(base, query);
      expect(answer.counts).toEqual([0, 0]);
      expect(answer.status).toBe(200);
    }
    const refused = await askCounted(base, '{service="api"} | trace_id=');
    expect(refused.counts).toEqual([1, 0]);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatch(/^parse error/);
  });

  test("past its chunks or its time, a needle is answered by a worker, the same lines", async () => {
    const want = linesOf((await ask(await serve(), NEEDLE)).body);
    expect(want).toHaveLength(5);
    const tooManyChunks = new InlineQueries(mainQuerier(), 10_000, { maxChunks: CHUNKS - 1 });
    const tooSlow = new InlineQueries(mainQuerier(), 0.001);
    for (const inline of [tooManyChunks, tooSlow]) {
      const base = await serve(inline);
      const answer = await askCounted(base, NEEDLE);
      expect(answer.counts).toEqual([0, 1]);
      expect(answer.status).toBe(200);
      expect(linesOf(answer.body)).toEqual(want);
    }
    // At exactly its count of chunks, it stays.
    const enough = await serve(new InlineQueries(mainQuerier(), 10_000, { maxChunks: CHUNKS }));
    expect((await askCounted(enough, NEEDLE)).counts).toEqual([1, 0]);
  });

  test("one at a time: while a needle runs here, the next is not admitted", async () => {
    const real = gateway();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let asked = 0;
    const held: ChunkFilter = {
      filterChunkRefs: async (req: FilterRequest): Promise<FilterResponse> => {
        asked++;
        await gate;
        return real.filterChunkRefs(req);
      },
    };
    const inline = new InlineQueries(mainQuerier(held), 10_000);
    const task = NEEDLE_TASK;
    expect(inline.admits(task)).toBe(true);
    const first = inline.run(task);
    while (asked === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(inline.admits(task)).toBe(false);
    expect(await inline.run(task)).toBeUndefined();
    release();
    const answer = await first;
    expect(answer?.status).toBe(200);
    expect(linesOf(answer!.body)).toHaveLength(5);
    expect(inline.admits(task)).toBe(true);
    // Nor while the main thread is busy with its own work (a compaction run).
    let compacting = true;
    const yielding = new InlineQueries(mainQuerier(), 10_000, { busy: () => compacting });
    expect(yielding.admits(task)).toBe(false);
    expect(await yielding.run(task)).toBeUndefined();
    compacting = false;
    expect(yielding.admits(task)).toBe(true);
    // Nor a query of several tenants, nor a route that is not a log query's.
    expect(inline.admits({ ...task, tenant: "a|b" })).toBe(false);
    expect(inline.admits({ ...task, route: "labels" })).toBe(false);
  });

  test("a needle it runs is parsed once: the handler is given what admitting it read", async () => {
    const inline = new InlineQueries(mainQuerier(), 10_000);
    const task = NEEDLE_TASK;
    const parse = vi.spyOn(Querier, "parse");
    try {
      const answer = await inline.run(task);
      expect(linesOf(answer!.body)).toHaveLength(5);
      expect(parse.mock.calls).toEqual([[NEEDLE]]);
      // A query that does not parse is answered here, with the parser's error.
      parse.mockClear();
      const bad = await inline.run({ ...task, form: "query=%7Bapp%3D" });
      expect(bad?.status).toBe(400);
      expect(parse).toHaveBeenCalledTimes(2);
    } finally {
      parse.mockRestore();
    }
  });
});
