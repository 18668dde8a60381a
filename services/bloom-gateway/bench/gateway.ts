/**
 * `pnpm bench:gateway`: a needle query (`| trace_id="…"`) over 500 series × 20 chunks
 * (blooms built by the ingester's builder, in bloom blocks of 50 series on the file-system
 * store), filtered by the gateway in process with a cold cache (a new gateway a query: every
 * block read whole and every record decoded), cold again with blocks read record by record
 * (`maxBlockBytes: 1`, the path of blocks past the limit), with a warm cache (every bloom in
 * memory), and through the HTTP client to one gateway on loopback (warm). Series/s and chunks/s are medians over runs;
 * every run goes to bench/results/gateway-<time>.json.
 *
 *   pnpm bench:gateway [--series 500] [--chunks 20] [--lines 50] [--runs 7] [--queries 20]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { extractBloomTests, parseExpr } from "@sieve/logql";
import type { ChunkFilter, FilterRequest, FilterSeries } from "@sieve/proto";
import { FsObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import {
  BloomGateway,
  BloomGatewayClient,
  DEFAULT_CONFIG,
  createBloomGatewayServer,
} from "../src/index.js";
import { writeBlock } from "../src/fixtures.test-helper.js";

const { values } = parseArgs({
  options: {
    series: { type: "string", default: "500" },
    chunks: { type: "string", default: "20" },
    lines: { type: "string", default: "50" },
    runs: { type: "string", default: "7" },
    queries: { type: "string", default: "20" },
  },
});
const SERIES = Number(values.series);
const CHUNKS = Number(values.chunks);
const LINES = Number(values.lines);
const RUNS = Number(values.runs);
const QUERIES = Number(values.queries);
const PER_BLOCK = 50;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

const dir = await mkdtemp(join(tmpdir(), "sieve-bench-gateway-"));
const store = new FsObjectStore(dir);
const logger = pino({ level: "silent" });

console.error(`building ${SERIES} series × ${CHUNKS} chunks × ${LINES} lines of blooms…`);
const series: FilterSeries[] = [];
for (let b = 0; b * PER_BLOCK < SERIES; b++) {
  const specs = Array.from({ length: Math.min(PER_BLOCK, SERIES - b * PER_BLOCK) }, (_, i) => {
    const s = b * PER_BLOCK + i;
    return {
      labels: { service: "api", pod: `pod-${s}` },
      // Each trace_id on 5 lines of one chunk, as a request's spans would be.
      chunks: Array.from({ length: CHUNKS }, (_, c) =>
        Array.from({ length: LINES }, (_, l) => ({
          trace_id: `${s.toString(16)}-${c.toString(16)}-${Math.floor(l / 5)}`,
          level: l % 7 === 0 ? "error" : "info",
        })),
      ),
    };
  });
  series.push(...(await writeBlock(store, `bench/blooms/block-${b}`, specs)));
}
const chunkCount = series.reduce((n, s) => n + s.chunks.length, 0);

function needle(i: number): FilterRequest {
  // Half present (a random series' chunk), half absent.
  const s = (i * 7919) % SERIES;
  const c = (i * 31) % CHUNKS;
  const id = i % 2 === 0 ? `${s.toString(16)}-${c.toString(16)}-1` : `absent-${i}`;
  return {
    tenant: "bench",
    from: 0n,
    through: 2n ** 62n,
    test: extractBloomTests(parseExpr(`{service="api"} | trace_id="${id}"`)),
    series,
  };
}

interface Sample {
  mode: string;
  seconds: number;
  queries: number;
  pruned: number;
  chunks: number;
}

async function timeQueries(mode: string, filter: () => ChunkFilter, n: number): Promise<Sample> {
  let pruned = 0;
  let chunks = 0;
  let seconds = 0;
  for (let i = 0; i < n; i++) {
    const f = filter();
    const req = needle(i);
    const start = process.hrtime.bigint();
    const res = await f.filterChunkRefs(req);
    seconds += Number(process.hrtime.bigint() - start) / 1e9;
    pruned += res.stats.chunksPruned;
    chunks += res.stats.chunks;
  }
  return { mode, seconds, queries: n, pruned, chunks };
}

const config = { ...DEFAULT_CONFIG };
const warm = new BloomGateway(config, store, logger, new Registry());
await warm.filterChunkRefs(needle(0));
const registry = new Registry();
const app = await createBloomGatewayServer({ config, store, logger, registry });
await app.listen({ host: "127.0.0.1", port: 0 });
const { port } = app.server.address() as AddressInfo;
const client = new BloomGatewayClient({ urls: [`http://127.0.0.1:${port}`] });
await client.filterChunkRefs(needle(0));

const all: Sample[] = [];
for (let run = 0; run < RUNS; run++) {
  // Cold: a fresh gateway per query, so every record is read from disk and decoded.
  all.push(
    await timeQueries(
      "in process, cold cache",
      () => new BloomGateway(config, store, logger, new Registry()),
      Math.max(2, Math.floor(QUERIES / 4)),
    ),
  );
  all.push(
    await timeQueries(
      "in process, cold cache, record by record",
      () => new BloomGateway({ ...config, maxBlockBytes: 1 }, store, logger, new Registry()),
      Math.max(2, Math.floor(QUERIES / 4)),
    ),
  );
  all.push(await timeQueries("in process, warm cache", () => warm, QUERIES));
  all.push(await timeQueries("HTTP client → 1 gateway, warm", () => client, QUERIES));
}
await app.close();
await rm(dir, { recursive: true, force: true });

const modes = [...new Set(all.map((s) => s.mode))];
const rows = modes.map((mode) => {
  const runs = all.filter((s) => s.mode === mode);
  const perQuery = runs.map((r) => r.seconds / r.queries);
  const ms = median(perQuery) * 1000;
  return {
    mode,
    msPerQuery: ms,
    seriesPerSec: SERIES / (ms / 1000),
    chunksPerSec: chunkCount / (ms / 1000),
    prunedShare: runs.reduce((n, r) => n + r.pruned, 0) / runs.reduce((n, r) => n + r.chunks, 0),
  };
});
console.log(
  `\n| ${SERIES} series × ${CHUNKS} chunks, needle query | ms/query | series/s | chunks/s | pruned |`,
);
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.mode} | ${r.msPerQuery.toFixed(2)} | ${r.seriesPerSec.toFixed(0)} | ${r.chunksPerSec.toFixed(0)} | ${(r.prunedShare * 100).toFixed(2)} % |`,
  );
}
const cold = rows[0]!.msPerQuery;
const warmMs = rows.find((r) => r.mode === "in process, warm cache")!.msPerQuery;
console.log(
  `\nwarm/cold speed-up: ${(cold / warmMs).toFixed(1)}×; cache ${warm.cacheStats().bytes} bytes`,
);

const root = new URL("../../../", import.meta.url);
const out = new URL("bench/results/", root);
mkdirSync(out, { recursive: true });
const file = new URL(`gateway-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, out);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "gateway",
      series: SERIES,
      chunks: CHUNKS,
      lines: LINES,
      runs: RUNS,
      queries: QUERIES,
      cacheBytes: warm.cacheStats().bytes,
      machine,
      medians: rows,
      all,
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
