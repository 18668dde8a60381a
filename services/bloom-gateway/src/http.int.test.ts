import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import type { BloomBlockStore } from "@sieve/index";
import { extractBloomTests, parseExpr } from "@sieve/logql";
import { encodeFilterRequest } from "@sieve/proto";
import { FsObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BloomGatewayClient } from "./client.js";
import { DEFAULT_CONFIG } from "./config.js";
import type { BloomGatewayConfig } from "./config.js";
import { keptChunks, writeBlock } from "./fixtures.test-helper.js";
import type { SeriesSpec, WrittenSeries } from "./fixtures.test-helper.js";
import { BloomGateway } from "./gateway.js";
import type { FilterRequest, FilterSeries } from "@sieve/proto";
import { createBloomGatewayServer, FILTER_PATH, PROTOBUF_TYPE } from "./http.js";

const logger = pino({ level: "silent" });
let dir: string;
let store: FsObjectStore;

interface Running {
  app: FastifyInstance;
  url: string;
  gateway: BloomGateway;
}

async function start(
  config: Partial<BloomGatewayConfig> = {},
  s: BloomBlockStore = store,
): Promise<Running> {
  const full = { ...DEFAULT_CONFIG, ...config };
  const registry = new Registry();
  const gateway = new BloomGateway(full, s, logger, registry);
  const app = await createBloomGatewayServer({ config: full, store: s, logger, registry, gateway });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, gateway };
}

const servers: Running[] = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-gateway-http-"));
  store = new FsObjectStore(dir);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.app.close()));
  await rm(dir, { recursive: true, force: true });
});

function request(query: string, series: readonly FilterSeries[]): FilterRequest {
  return {
    tenant: "team-a",
    from: 0n,
    through: 2n ** 62n,
    test: extractBloomTests(parseExpr(query)),
    series,
  };
}

function specs(block: number, n: number): SeriesSpec[] {
  return Array.from({ length: n }, (_, s) => ({
    labels: { app: "api", pod: `b${block}-p${s}` },
    chunks: Array.from({ length: 6 }, (_, c) =>
      Array.from({ length: 10 }, (_, l) => ({ trace_id: `t-${block}-${s}-${c}-${l}` })),
    ),
  }));
}

/** 12 blocks of 4 series, interleaved as a querier would list them (by fingerprint). */
async function dataset(prefix: string): Promise<WrittenSeries[]> {
  const all: WrittenSeries[] = [];
  for (let b = 0; b < 12; b++)
    all.push(...(await writeBlock(store, `${prefix}/block-${b}`, specs(b, 4))));
  return all.sort((a, b) => (a.fingerprint < b.fingerprint ? -1 : 1));
}

describe("two gateways over loopback", () => {
  test("the client routes each block to one gateway and answers as the gateway in process", async () => {
    const series = await dataset("team-a/route");
    const a = await start();
    const b = await start();
    servers.push(a, b);
    const client = new BloomGatewayClient({ urls: [a.url, b.url] });
    const inProcess = new BloomGateway(DEFAULT_CONFIG, store, logger, new Registry());
    const queries = ['{app="api"} | trace_id="t-3-1-2-5"', '{app="api"} | trace_id="nope"'];
    queries.push('{app="api"} | trace_id="t-0-0-0-0" or trace_id="t-11-3-5-9"');
    for (const [i, q] of queries.entries()) {
      const remote = await client.filterChunkRefs(request(q, series));
      const local = await inProcess.filterChunkRefs(request(q, series));
      expect(remote.series).toEqual(local.series);
      // Cold on the first query on both sides; warm afterwards on both.
      expect(remote.stats).toEqual(local.stats);
      // 12 blocks of 4 series: each block read once, its other series served from it.
      if (i === 0) expect(remote.stats).toMatchObject({ blocksRead: 12, cacheHits: 36 });
      else expect(remote.stats).toMatchObject({ blocksRead: 0, cacheHits: 48 });
    }
    // Each block's blooms were read by the one gateway the hash names, and only there.
    const keys = [...new Set(series.map((s) => (s.bloom as { key: string }).key))];
    const owned = [0, 0];
    for (const key of keys) owned[client.gatewayFor(key)]! += 1;
    expect(owned[0]! > 0 && owned[1]! > 0).toBe(true);
    expect(a.gateway.cacheStats()).toMatchObject({ entries: owned[0], misses: owned[0] });
    expect(b.gateway.cacheStats()).toMatchObject({ entries: owned[1], misses: owned[1] });
    // A client made later with the same URLs routes the same way.
    const again = new BloomGatewayClient({ urls: [a.url, `${b.url}/`] });
    for (const key of keys) expect(again.gatewayFor(key)).toBe(client.gatewayFor(key));
  });

  test("explain: the gateways' verdicts cross the wire, and the client adds its own", async () => {
    const series = await dataset("team-a/explain");
    const a = await start();
    const b = await start();
    servers.push(a, b);
    const client = new BloomGatewayClient({ urls: [a.url, b.url] });
    const inProcess = new BloomGateway(DEFAULT_CONFIG, store, logger, new Registry());
    const q = '{app="api"} | trace_id="t-3-1-2-5"';
    const ask = { ...request(q, series), explain: true };
    const sorted = (vs: readonly { fingerprint: bigint; from: bigint }[] | undefined) =>
      [...(vs ?? [])].sort((x, y) =>
        x.fingerprint !== y.fingerprint
          ? x.fingerprint < y.fingerprint
            ? -1
            : 1
          : x.from < y.from
            ? -1
            : 1,
      );
    const remote = await client.filterChunkRefs(ask);
    const local = await inProcess.filterChunkRefs(ask);
    expect(remote.series).toEqual(local.series);
    expect(remote.verdicts).toHaveLength(remote.stats.chunksPruned);
    expect(sorted(remote.verdicts)).toEqual(sorted(local.verdicts));
    for (const v of remote.verdicts!) expect(v.test).toBe('trace_id="t-3-1-2-5"');
    // Each series' bloom covers its 6 chunks, all prefixed: pruned chunk by chunk.
    expect(remote.verdicts!.filter((v) => v.outcome === "chunk").length).toBeGreaterThan(0);
    // Not asked: nothing on the wire.
    expect((await client.filterChunkRefs(request(q, series))).verdicts).toBeUndefined();

    // A gateway that is down: its chunks kept untested, with or without explain.
    const down = new BloomGatewayClient({ urls: [a.url, `http://127.0.0.1:${await freePort()}`] });
    const toDown = series.filter((s) => down.gatewayFor((s.bloom as { key: string }).key) === 1);
    const failed = (await down.filterChunkRefs(request(q, series))).verdicts ?? [];
    expect(failed).toHaveLength(toDown.length * 6);
    for (const v of failed)
      expect(v).toMatchObject({ outcome: "failed_open", reason: "gateway_error" });
  });

  test("series without a bloom are kept by the client without a call", async () => {
    const series = (await dataset("team-a/missing")).map((s) => ({
      ...s,
      bloom: { kind: "missing", reason: "disabled" } as const,
    }));
    const client = new BloomGatewayClient({ urls: ["http://127.0.0.1:1"] });
    const res = await client.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    expect(res.stats).toMatchObject({ series: 48, chunks: 288, chunksPruned: 0 });
    expect(res.stats.failedOpen).toEqual({ missing_bloom: 288 });
  });

  test("a gateway that is down or too slow fails open for its blocks only", async () => {
    const series = await dataset("team-a/down");
    const up = await start();
    servers.push(up);
    const down = await freePort();
    const client = new BloomGatewayClient({ urls: [up.url, `http://127.0.0.1:${down}`] });
    const res = await client.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    const toDown = series.filter((s) => client.gatewayFor((s.bloom as { key: string }).key) === 1);
    const downChunks = toDown.length * 6;
    expect(downChunks).toBeGreaterThan(0);
    expect(res.stats.failedOpen).toEqual({ gateway_error: downChunks });
    expect(res.stats.chunks).toBe(288);
    expect(keptChunks(res).size).toBeGreaterThanOrEqual(downChunks);
    for (const s of toDown)
      for (const c of s.chunks)
        expect(keptChunks(res).has(`${s.fingerprint}/${c.from}`)).toBe(true);

    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const stuck: BloomBlockStore = {
      getRange: async (k, o, l) => {
        await gate;
        return store.getRange(k, o, l);
      },
      head: (k) => store.head(k),
    };
    const slow = await start({ readTimeoutMs: 60_000 }, stuck);
    servers.push(slow);
    const impatient = new BloomGatewayClient({ urls: [slow.url], timeoutMs: 100 });
    const timedOut = await impatient.filterChunkRefs(request('{app="api"} | trace_id="x"', series));
    expect(timedOut.stats.failedOpen).toEqual({ timeout: 288 });
    expect(keptChunks(timedOut).size).toBe(288);
    release();
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  return port;
}

describe("HTTP API", () => {
  let gw: Running;
  beforeAll(async () => {
    gw = await start({ maxRequestBytes: 4096 });
    servers.push(gw);
  });

  async function post(body: Uint8Array, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(gw.url + FILTER_PATH, {
      method: "POST",
      headers: { "content-type": PROTOBUF_TYPE, ...headers },
      body,
    });
  }

  test.each<[string, () => Uint8Array, Record<string, string>, number, RegExp]>([
    ["garbage bytes", () => Uint8Array.of(0x0a, 0xff, 0x01), {}, 400, /malformed protobuf/],
    [
      "no tenant",
      () => encodeFilterRequest({ ...request('{a="b"} | c="d"', []), tenant: "" }),
      {},
      400,
      /no tenant/,
    ],
    [
      "an unknown missing reason",
      () =>
        encodeFilterRequest(
          request('{a="b"} | c="d"', [
            {
              fingerprint: 1n,
              labels: "{}",
              bloom: { kind: "missing", reason: "lost" } as never,
              chunks: [],
            },
          ]),
        ),
      {},
      400,
      /unknown missing reason "lost"/,
    ],
    [
      "another tenant's header",
      () => encodeFilterRequest(request('{a="b"} | c="d"', [])),
      { "x-scope-orgid": "team-b" },
      400,
      /does not match/,
    ],
    [
      "a body over the limit",
      () => new Uint8Array(5000),
      {},
      413,
      /too large \(limit 4096 bytes\)/,
    ],
    [
      "JSON",
      () => new TextEncoder().encode("{}"),
      { "content-type": "application/json" },
      415,
      /x-protobuf/,
    ],
  ])("refuses %s", async (_name, body, headers, status, message) => {
    const res = await post(body(), headers);
    expect(res.status).toBe(status);
    expect(await res.text()).toMatch(message);
  });

  test("/ready and /metrics", async () => {
    const ready = await fetch(`${gw.url}/ready`);
    expect(ready.status).toBe(200);
    const ok = await post(encodeFilterRequest(request('{a="b"} | c="d"', [])), {
      "x-scope-orgid": "team-a",
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toBe(PROTOBUF_TYPE);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(
      /sieve_bloom_gateway_request_duration_seconds_count\{status_code="200"\} [1-9]/,
    );
    expect(metrics).toMatch(
      /sieve_bloom_gateway_request_duration_seconds_count\{status_code="413"\} [1-9]/,
    );
    expect(metrics).toContain("sieve_bloom_gateway_cache_bytes");
  });
});
