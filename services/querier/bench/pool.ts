/**
 * What the worker hop costs a warm needle query: the same `{env="bench"} | trace_id="…"`
 * queries over HTTP (loopback) against one store, pruned by an in-process bloom gateway,
 * answered in process and by a
 * QueryPool, alternating, after a warm-up of both. Prints medians and p90 per way, and
 * the load average (this shared machine's wall times swing with it).
 *
 *   pnpm --filter @sieve/querier exec tsx bench/pool.ts [--streams 100] [--lines 2000] [--queries 300]
 */
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { BloomGateway, DEFAULT_CONFIG as GATEWAY_DEFAULTS } from "@sieve/bloom-gateway";
import type { Entry } from "@sieve/chunk";
import { pino } from "pino";
import { Registry } from "prom-client";
import { DEFAULT_CONFIG } from "../src/config.js";
import { createQuerierServer } from "../src/http.js";
import { createQuerier } from "../src/index.js";
import { QueryPool } from "../src/pool.js";
import { tempStore, writeFlush, type TestStream } from "../src/testdata.test-helper.js";

const { values } = parseArgs({
  options: {
    streams: { type: "string", default: "100" },
    lines: { type: "string", default: "2000" },
    queries: { type: "string", default: "300" },
  },
});
const STREAMS = Number(values.streams);
const LINES = Number(values.lines);
const QUERIES = Number(values.queries);
const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

const { store, close } = await tempStore();
const streams: TestStream[] = [];
for (let s = 0; s < STREAMS; s++) {
  const entries: Entry[] = [];
  for (let i = 0; i < LINES; i++) {
    entries.push({
      timestamp: T0 + BigInt(i) * S,
      line: `level=info stream=${s} i=${i} msg="request served" ${"x".repeat(100)}`,
      structuredMetadata: [{ name: "trace_id", value: `t-${s}-${Math.floor(i / 10)}` }],
    });
  }
  streams.push({ labels: { env: "bench", pod: `p${s}` }, entries });
}
await writeFlush(store, "fake", streams, 500, 16 * 1024);

const inProcess = await createQuerierServer({
  querier: createQuerier({
    config: DEFAULT_CONFIG,
    store,
    chunkFilter: new BloomGateway(GATEWAY_DEFAULTS, store, pino({ level: "warn" }), new Registry()),
    registry: new Registry(),
  }),
  authEnabled: false,
  registry: new Registry(),
});
const pool = new QueryPool({
  workers: 2,
  setup: {
    config: DEFAULT_CONFIG,
    store: { backend: "filesystem", dir: store.root },
    chunkFilter: { local: GATEWAY_DEFAULTS },
    ingesters: "none",
  },
  registry: new Registry(),
});
await pool.ready();
const pooled = await createQuerierServer({ pool, authEnabled: false, registry: new Registry() });
const urls = {
  "in process": await inProcess.listen({ port: 0, host: "127.0.0.1" }),
  pool: await pooled.listen({ port: 0, host: "127.0.0.1" }),
};

const range = { start: String(T0), end: String(T0 + BigInt(LINES) * S) };
async function needle(url: string, i: number): Promise<number> {
  const s = i % STREAMS;
  const trace = `t-${s}-${(i * 7) % Math.floor(LINES / 10)}`;
  const q = new URLSearchParams({ query: `{env="bench"} | trace_id="${trace}"`, ...range });
  const t0 = performance.now();
  const res = await fetch(`${url}/loki/api/v1/query_range?${q.toString()}`);
  const body = (await res.json()) as { data: { result: { values: unknown[] }[] } };
  const ms = performance.now() - t0;
  const n = body.data.result.reduce((k, r) => k + r.values.length, 0);
  if (res.status !== 200 || n !== 10) throw new Error(`${url}: ${res.status}, ${n} lines`);
  return ms;
}

// Warm-up: index segments and chunks cached in the main thread and in every worker.
for (let i = 0; i < 50; i++) for (const url of Object.values(urls)) await needle(url, i);
const times: Record<string, number[]> = { "in process": [], pool: [] };
for (let i = 0; i < QUERIES; i++) {
  for (const [way, url] of Object.entries(urls)) times[way]!.push(await needle(url, i));
}
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!;
console.log(
  `${STREAMS} streams × ${LINES} lines, ${QUERIES} needle queries each way, loadavg ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
console.log("| way | p50 ms | p90 ms |");
console.log("| --- | --- | --- |");
for (const [way, xs] of Object.entries(times)) {
  console.log(`| ${way} | ${pct(xs, 0.5).toFixed(2)} | ${pct(xs, 0.9).toFixed(2)} |`);
}
await inProcess.close();
await pooled.close();
await pool.close();
await close();
