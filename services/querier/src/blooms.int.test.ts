/**
 * The querier with the real in-process BloomGateway (`@sieve/bloom-gateway`) over real
 * blooms in a real FsObjectStore: a needle query reads only the chunks its blooms cannot
 * rule out, returns exactly the lines a scan of every chunk returns, and, with a bloom
 * block deleted, the same lines with less pruning (fail open).
 */
import {
  BloomGateway,
  BloomGatewayClient,
  DEFAULT_CONFIG as GATEWAY_CONFIG,
  createBloomGatewayServer,
} from "@sieve/bloom-gateway";
import type { Entry } from "@sieve/chunk";
import type { FsObjectStore } from "@sieve/storage";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { KEEP_ALL_FILTER } from "./deps.js";
import type { ChunkFilter } from "@sieve/proto";
import { createQuerierServer } from "./http.js";
import { createQuerier } from "./index.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const range = { start: String(T0), end: String(T0 + 3600n * S), limit: "1000" };

type Json = Record<string, unknown>;

/** 8 streams × 600 entries; each trace id on 5 consecutive lines of one stream. */
function needleStreams(): { labels: Record<string, string>; entries: Entry[] }[] {
  return [...Array(8).keys()].map((s) => ({
    labels: { service: "api", pod: `pod-${s}` },
    entries: [...Array(600).keys()].map((i) => ({
      timestamp: T0 + BigInt(i) * S + BigInt(s),
      line: `pod ${s} request ${i} done`,
      structuredMetadata: [{ name: "trace_id", value: `tr-${s}-${Math.floor(i / 5)}` }],
    })),
  }));
}

let store: FsObjectStore;
let close: () => Promise<void>;
const servers: FastifyInstance[] = [];

async function serve(chunkFilter: ChunkFilter, authEnabled = false): Promise<string> {
  const registry = new Registry();
  const querier = createQuerier({ config: DEFAULT_CONFIG, store, chunkFilter, registry });
  const app = await createQuerierServer({
    querier,
    authEnabled,
    registry,
    now: () => T0 + 3600n * S,
  });
  servers.push(app);
  return app.listen({ port: 0, host: "127.0.0.1" });
}

function gateway(): BloomGateway {
  return new BloomGateway(GATEWAY_CONFIG, store, pino({ level: "silent" }), new Registry());
}

/** The real gateway, counting the requests it gets. */
function countingGateway(): ChunkFilter & { asked: number } {
  const real = gateway();
  const counting = {
    asked: 0,
    filterChunkRefs: (req: Parameters<ChunkFilter["filterChunkRefs"]>[0]) => {
      counting.asked++;
      return real.filterChunkRefs(req);
    },
  };
  return counting;
}

async function query(base: string, q: string): Promise<{ lines: string[]; stats: Json }> {
  const res = await fetch(
    `${base}/loki/api/v1/query_range?${new URLSearchParams({ query: q, ...range }).toString()}`,
  );
  expect(res.status).toBe(200);
  const body = (await res.json()) as {
    data: { result: { values: [string, string][] }[]; stats: Json };
  };
  const lines = body.data.result
    .flatMap((s) => s.values.map(([ts, line]) => `${ts} ${line}`))
    .sort();
  return { lines, stats: body.data.stats.sieve as Json };
}

beforeAll(async () => {
  ({ store, close } = await tempStore());
  // Two flushes, so that two bloom blocks and two segments cover the data.
  const all = needleStreams();
  await writeFlush(
    store,
    "fake",
    all.map((s) => ({ ...s, entries: s.entries.slice(0, 300) })),
    20,
  );
  await writeFlush(
    store,
    "fake",
    all.map((s) => ({ ...s, entries: s.entries.slice(300) })),
    20,
  );
});

afterAll(async () => {
  for (const s of servers) await s.close();
  await close();
});

describe("bloom pruning through the real gateway", () => {
  test("present and absent needles: the lines of a full scan, ≥ 95% of the chunks pruned", async () => {
    const pruned = await serve(gateway());
    const scan = await serve(KEEP_ALL_FILTER);
    for (const trace of ["tr-3-17", "tr-0-0", "tr-7-119", "tr-5-60", "tr-9-1", "tr-3-999"]) {
      const q = `{service="api"} | trace_id="${trace}"`;
      const got = await query(pruned, q);
      const want = await query(scan, q);
      expect(got.lines).toEqual(want.lines);
      const present = !trace.startsWith("tr-9") && !trace.endsWith("999");
      expect(got.lines.length).toBe(present ? 5 : 0);
      expect(got.stats.chunksInRange).toBe(240);
      expect(want.stats.chunksFetched).toBe(240);
      // 240 chunks of 20 lines; a trace id's 5 lines sit in one chunk (20 is a multiple of 5).
      expect(got.stats.chunksPrunedByBlooms as number).toBeGreaterThanOrEqual(0.95 * 240);
      expect(got.stats.chunksFetched).toBe(240 - (got.stats.chunksPrunedByBlooms as number));
      expect(got.stats.chunksFetched as number).toBeGreaterThanOrEqual(present ? 1 : 0);
      expect((got.stats.bloomGateway as Json).chunks).toBe(240);
    }
  });

  test("needles over a selection's whole span send one series array, which the gateway keeps a table for", async () => {
    const real = gateway();
    const sent: unknown[] = [];
    const base = await serve({
      filterChunkRefs: (req) => {
        sent.push(req.series);
        return real.filterChunkRefs(req);
      },
    });
    const scan = await serve(KEEP_ALL_FILTER);
    const cut = vi.spyOn(real.cache, "cutHeld");
    for (const trace of ["tr-3-17", "tr-0-0", "tr-9-1", "tr-7-119"]) {
      const q = `{service="api"} | trace_id="${trace}"`;
      expect((await query(base, q)).lines).toEqual((await query(scan, q)).lines);
    }
    expect(new Set(sent).size).toBe(1);
    // The first needle read the blocks; the second cut each group's bloom from them and made
    // the table; the last two cut none.
    expect(cut).toHaveBeenCalledTimes((sent[0] as unknown[]).length);
    // Over part of the span, the series are cut to it: an array of their own each time.
    const part = { ...range, end: String(T0 + 300n * S) };
    for (let i = 0; i < 2; i++) {
      const params = new URLSearchParams({ query: '{service="api"} | trace_id="x"', ...part });
      expect((await fetch(`${base}/loki/api/v1/query_range?${params.toString()}`)).status).toBe(
        200,
      );
    }
    expect(new Set(sent).size).toBe(3);
  });

  test("a needle over a chunk its stream's retention cuts through: the lines after the cutoff", async () => {
    const own = await tempStore();
    try {
      // One chunk of 8 lines an hour apart, the retention period's end between the 4th and 5th.
      const day = 86_400n * S;
      const now = BigInt(Date.now()) * 1_000_000n;
      const first = now - day - 4n * 3600n * S + 1800n * S;
      const entries = [...Array(8).keys()].map((i) => ({
        timestamp: first + BigInt(i) * 3600n * S,
        line: `line ${i}`,
        structuredMetadata: [{ name: "trace_id", value: "tr-kept" }],
      }));
      await writeFlush(own.store, "t", [{ labels: { app: "db" }, entries }], 8);
      const querier = createQuerier({
        config: DEFAULT_CONFIG,
        store: own.store,
        chunkFilter: new BloomGateway(
          GATEWAY_CONFIG,
          own.store,
          pino({ level: "silent" }),
          new Registry(),
        ),
        retention: {
          enabled: true,
          limits: { retentionPeriodMs: 86_400_000, retentionStream: [] },
          overrides: {},
        },
      });
      // Asked three times: the gateway answers the last from its table.
      for (let i = 0; i < 3; i++) {
        const got = await querier.selectLogs({
          tenant: "t",
          query: '{app="db"} | trace_id="tr-kept"',
          start: now - 2n * day,
          end: now,
          limit: 100,
          direction: "forward",
        });
        expect(got.entries.map((e) => e.line)).toEqual(["line 4", "line 5", "line 6", "line 7"]);
      }
    } finally {
      await own.close();
    }
  });

  test("inside the chunks it reads, only the blocks that hold the needle are decompressed", async () => {
    const scan = await serve(KEEP_ALL_FILTER); // no bloom: every chunk is fetched
    const want = needleStreams()
      .flatMap((s) => s.entries)
      .filter((e) => e.structuredMetadata[0]!.value === "tr-3-17")
      .map((e) => `${e.timestamp} ${e.line}`)
      .sort();
    const needle = await query(scan, '{service="api"} | trace_id="tr-3-17"');
    expect(needle.lines).toEqual(want);
    expect(needle.stats.chunksFetched).toBe(240);
    expect((await query(scan, '{service="api"} |= "request"')).stats.blocksSkipped).toBe(0);
    // The 239 chunks without the id: nearly all refused by their symbol filters (read no
    // further than their ends), the few a filter matched by chance (at most 2^-5 each) by
    // their symbols, every block skipped; the one with it reads a block or two of its own
    // (blocks of 512 bytes): not the 240 chunks' 140 KB.
    const refused = needle.stats.chunksRefusedByFilter as number;
    expect(refused).toBeGreaterThanOrEqual(0.9 * 239);
    expect(refused).toBeLessThanOrEqual(239);
    expect(needle.stats.blocksSkipped as number).toBeGreaterThanOrEqual(239 - refused);
    expect(needle.stats.bytesDecompressed as number).toBeLessThan(1200);
    // Inside those, only the needle's lines are decoded.
    expect(needle.stats.linesScanned).toBe(5);
    // A name every entry has, and a stream label's name (not in any block): nothing skipped.
    for (const q of ['{service="api"} | trace_id=~".+"', '{service="api"} | pod="pod-3"']) {
      const got = await query(scan, q);
      expect(got.stats.blocksSkipped, q).toBe(0);
      expect(got.lines.length, q).toBe(q.includes("pod-3") ? 600 : 1000);
    }
  });

  test("through two gateway processes' HTTP API (BloomGatewayClient, jump hash): the same answer", async () => {
    const urls: string[] = [];
    for (let i = 0; i < 2; i++) {
      const app = await createBloomGatewayServer({
        config: GATEWAY_CONFIG,
        store,
        logger: pino({ level: "silent" }),
        registry: new Registry(),
      });
      servers.push(app);
      urls.push(await app.listen({ port: 0, host: "127.0.0.1" }));
    }
    const remote = await serve(new BloomGatewayClient({ urls }));
    const local = await serve(gateway());
    const q = '{service="api"} | trace_id="tr-6-100"';
    const got = await query(remote, q);
    const want = await query(local, q);
    expect(got.lines).toHaveLength(5);
    expect(got.lines).toEqual(want.lines);
    expect(got.stats.chunksPrunedByBlooms).toBe(want.stats.chunksPrunedByBlooms);
  });

  test("a gateway that fails: every ref kept, the same lines", async () => {
    const failing: ChunkFilter = {
      filterChunkRefs: () => Promise.reject(new Error("gateway down")),
    };
    const got = await query(await serve(failing), '{service="api"} | trace_id="tr-4-4"');
    expect(got.lines).toHaveLength(5);
    expect(got.stats.chunksPrunedByBlooms).toBe(0);
    expect(got.stats.chunksFetched).toBe(240);
    expect((got.stats.bloomGateway as Json).failedOpen).toEqual({ gateway_error: 240 });
  });

  test("metric queries are pruned too, and count as a full scan does", async () => {
    const q = `sum by (pod) (count_over_time({service="api"} | trace_id="tr-1-7" |= "request" [1h]))`;
    const params = { query: q, time: String(T0 + 3599n * S) };
    const ask = async (base: string) => {
      const res = await fetch(
        `${base}/loki/api/v1/query?${new URLSearchParams(params).toString()}`,
      );
      return (await res.json()) as { data: { result: unknown; stats: { sieve: Json } } };
    };
    const pruned = await ask(await serve(gateway()));
    const scan = await ask(await serve(KEEP_ALL_FILTER));
    expect(pruned.data.result).toEqual([
      { metric: { pod: "pod-1" }, value: [Number(T0 / S) + 3599, "5"] },
    ]);
    expect(scan.data.result).toEqual(pruned.data.result);
    expect(pruned.data.stats.sieve.chunksPrunedByBlooms as number).toBeGreaterThanOrEqual(
      0.95 * 240,
    );
  });

  test("a query without a bloom test does not ask the gateway", async () => {
    const counting = countingGateway();
    const base = await serve(counting);
    const got = await query(base, '{service="api", pod="pod-1"} |= "request 42 "');
    expect(got.lines).toHaveLength(1);
    expect(got.stats.chunksPrunedByBlooms).toBe(0);
    expect(counting.asked).toBe(0);
    await query(base, '{service="api"} | trace_id="tr-1-1"');
    expect(counting.asked).toBe(1);
  });

  test("line filters ask the gateway only where the index records n-grams, and prune there", async () => {
    // Tenant "grams": the same streams, blooms with 4-grams (one flush).
    await writeFlush(store, "grams", needleStreams(), 20, 512, { length: 4, skip: 0 });
    const counting = countingGateway();
    const base = await serve(counting, true);
    const ask = async (tenant: string, q: string) => {
      const url = `${base}/loki/api/v1/query_range?${new URLSearchParams({ query: q, ...range }).toString()}`;
      const res = await fetch(url, { headers: { "X-Scope-OrgID": tenant } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        data: { result: { values: [string, string][] }[]; stats: { sieve: Json } };
      };
      return {
        lines: body.data.result.flatMap((r) => r.values.map(([, line]) => line)),
        stats: body.data.stats.sieve,
      };
    };
    const q = '{service="api"} |= "pod 3 request 421 "';
    const plain = await ask("fake", q);
    expect(plain.lines).toEqual(["pod 3 request 421 done"]);
    expect(counting.asked).toBe(0);
    const grams = await ask("grams", q);
    expect(grams.lines).toEqual(plain.lines);
    expect(counting.asked).toBe(1);
    // 8 streams of 30 chunks: the needle's chunk stays, a stray false positive or two.
    expect(grams.stats.chunksInRange).toBe(240);
    expect(grams.stats.chunksPrunedByLineFilters as number).toBeGreaterThanOrEqual(240 - 3);
    expect(grams.stats.chunksPrunedByBlooms).toBe(grams.stats.chunksPrunedByLineFilters);
    // With a metadata filter too: the plain tenant sends only the metadata part.
    const both = '{service="api"} |= "pod 3 request 421 " | trace_id="tr-3-84"';
    expect((await ask("fake", both)).lines).toEqual(plain.lines);
    expect(counting.asked).toBe(2);
    const combined = await ask("grams", both);
    expect(combined.lines).toEqual(plain.lines);
    expect(combined.stats.chunksPrunedByBlooms as number).toBeGreaterThanOrEqual(240 - 2);
  });

  test("a deleted bloom block: the same lines, less pruning (fail open)", async () => {
    const q = '{service="api"} | trace_id="tr-2-70"'; // line 350: in the second flush
    const before = await query(await serve(gateway()), q);
    const blocks = (await store.list("fake/blooms/")).sort();
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    await store.delete(blocks[blocks.length - 1]!);
    const after = await query(await serve(gateway()), q);
    expect(after.lines).toEqual(before.lines);
    expect(after.lines).toHaveLength(5);
    expect(after.stats.chunksPrunedByBlooms as number).toBeLessThan(
      before.stats.chunksPrunedByBlooms as number,
    );
    const failedOpen = (after.stats.bloomGateway as { failedOpen: Record<string, number> })
      .failedOpen;
    expect(Object.values(failedOpen).reduce((a, b) => a + b, 0)).toBe(120);
  });
});
