/**
 * The querier over what the real ingester (`@sieve/ingester`) writes and serves: records
 * on a real write-ahead log, consumed into head chunks (queried before any flush, in
 * process and over the ingester's HTTP API with `IngesterHttpClient`), then flushed into a
 * real FsObjectStore (chunks, bloom blocks, index segments) and queried there through the
 * real BloomGateway. The answer is the same at every stage.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BloomGateway, DEFAULT_CONFIG as GATEWAY_CONFIG } from "@sieve/bloom-gateway";
import {
  DEFAULT_CONFIG as INGESTER_CONFIG,
  IngesterHttpClient,
  createIngester,
  type IngesterService,
} from "@sieve/ingester";
import { fingerprint, fingerprintKey, labelsString, parseLabels, partitionOf } from "@sieve/labels";
import { encodeQueueRecord } from "@sieve/proto";
import { openWal, type LocalWal } from "@sieve/queue";
import { waitFor } from "@sieve/queue/testing";
import { FsObjectStore } from "@sieve/storage";
import Fastify, { type FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import type { IngesterQuerier } from "@sieve/proto";
import { createQuerierServer } from "./http.js";
import { createQuerier } from "./index.js";

const PARTITIONS = 2;
const S = 1_000_000_000n;
const T0 = (BigInt(Date.now()) / 1000n - 600n) * S; // ten minutes ago, whole seconds
const LINES = 400;
const PODS = 4;

let dir: string;
let wal: LocalWal;
let store: FsObjectStore;
let service: IngesterService;
let ingesterApp: FastifyInstance;
let ingesterUrl: string;
const servers: FastifyInstance[] = [];
const logger = pino({ level: "silent" });

/** One record of `count` lines of a pod from line `from` (the ingester checks sizes per record). */
function record(pod: number, from: number, count: number) {
  const canonical = labelsString(parseLabels(`{app="api", pod="pod-${pod}"}`));
  const fp = fingerprint(canonical);
  return {
    partition: partitionOf(fp, PARTITIONS),
    key: fingerprintKey(fp),
    value: encodeQueueRecord({
      tenant: "team-a",
      labels: canonical,
      fingerprint: fp,
      entries: Array.from({ length: count }, (_, k) => from + k).map((i) => ({
        timestampNs: T0 + BigInt(i) * 100_000_000n,
        line: `pod ${pod} request ${i} ${"x".repeat(100)}`,
        structuredMetadata: [{ name: "trace_id", value: `tr-${pod}-${Math.floor(i / 5)}` }],
      })),
    }),
  };
}

async function serve(ingesters: IngesterQuerier, blooms: boolean): Promise<string> {
  const registry = new Registry();
  const querier = createQuerier({
    config: { ...DEFAULT_CONFIG, authEnabled: true },
    store,
    ingesters,
    ...(blooms && { chunkFilter: new BloomGateway(GATEWAY_CONFIG, store, logger, new Registry()) }),
    registry,
  });
  const app = await createQuerierServer({ querier, authEnabled: true, registry });
  servers.push(app);
  return app.listen({ port: 0, host: "127.0.0.1" });
}

type Json = Record<string, unknown>;

async function query(base: string, q: string, tenant = "team-a") {
  const params = new URLSearchParams({
    query: q,
    start: String(T0),
    end: String(T0 + 3600n * S),
    limit: "5000",
    direction: "forward",
  });
  const res = await fetch(`${base}/loki/api/v1/query_range?${params.toString()}`, {
    headers: { "X-Scope-OrgID": tenant },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as {
    data: { result: { stream: Json; values: [string, string][] }[]; stats: Json };
  };
  return {
    lines: body.data.result.flatMap((s) => s.values.map(([ts, line]) => `${ts} ${line}`)).sort(),
    sieve: body.data.stats.sieve as Json,
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-querier-ingester-"));
  wal = await openWal({ dir: join(dir, "wal"), partitions: PARTITIONS });
  store = new FsObjectStore(join(dir, "objects"));
  service = createIngester({
    config: {
      ...INGESTER_CONFIG,
      instanceId: "querier-test",
      chunkTargetBytes: 2048,
      chunkBlockBytes: 512,
      flushCheckIntervalMs: 3_600_000,
    },
    consumer: wal.consumer,
    store,
    logger,
    registry: new Registry(),
  });
  await service.ingester.start();
  ingesterApp = Fastify();
  await ingesterApp.register(service.plugin({ serveOps: false }));
  ingesterUrl = await ingesterApp.listen({ port: 0, host: "127.0.0.1" });
  for (let from = 0; from < LINES; from += 20) {
    await wal.writer.append([...Array(PODS).keys()].map((pod) => record(pod, from, 20)));
  }
  // Lines are queryable once consumed: from head chunks, or from the store once a cut
  // chunk is flushed (the ingester may flush cut chunks before any POST /flush).
  const base = await serve(service.ingester, false);
  await waitFor(
    async () =>
      (await query(base, '{app="api"}')).lines.length === PODS * LINES ? true : undefined,
    {
      timeoutMs: 20_000,
      what: "every line queryable",
    },
  );
});

afterAll(async () => {
  for (const s of servers) await s.close();
  await ingesterApp.close();
  await service.ingester.stop();
  await wal.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the querier over the real ingester", () => {
  const needle = '{app="api"} | trace_id="tr-2-33"';
  const want = Array.from({ length: 5 }, (_, k) => {
    const i = 165 + k;
    return `${T0 + BigInt(i) * 100_000_000n} pod 2 request ${i} ${"x".repeat(100)}`;
  }).sort();

  test("head and flushed lines, in process and over HTTP; after a flush, from the store pruned by blooms", async () => {
    const inProcess = await serve(service.ingester, true);
    const overHttp = await serve(new IngesterHttpClient({ urls: [ingesterUrl] }), true);
    const before = await query(inProcess, needle);
    expect(before.lines).toEqual(want);
    expect((await query(overHttp, needle)).lines).toEqual(want);
    const all = await query(overHttp, '{app="api"}');
    expect(all.lines).toHaveLength(PODS * LINES);
    // Another tenant sees nothing, through either path.
    expect((await query(overHttp, '{app="api"}', "team-b")).lines).toEqual([]);

    await service.ingester.flushAll();
    const afterFlush = await query(inProcess, needle);
    expect(afterFlush.lines).toEqual(want);
    expect(afterFlush.sieve.ingesterLines).toBe(0);
    const inRange = afterFlush.sieve.chunksInRange as number;
    expect(inRange).toBeGreaterThan(PODS * 4); // 2 KiB chunks: many per stream
    expect(inRange).toBeGreaterThan(before.sieve.chunksInRange as number);
    // Only chunks of pod-2 around request 165..169 can hold tr-2-33.
    expect(afterFlush.sieve.chunksPrunedByBlooms as number).toBeGreaterThanOrEqual(inRange - 3);
    const everything = await query(inProcess, '{app="api"}');
    expect(everything.lines).toEqual(all.lines);
    const scan = await query(await serve(service.ingester, false), needle);
    expect(scan.lines).toEqual(want);
    expect(scan.sieve.chunksFetched).toBe(inRange);
  });
});
