/**
 * `pnpm --filter @sieve/querier bench`: the querier's chunk-scan path over a real
 * FsObjectStore (chunks, blooms and index segments written with the real libraries):
 * a full scan (a line filter that matches nothing, so every chunk in range is decoded and
 * every line tested) with a cold and a warm chunk cache, a `limit 100` backward query
 * (reads only the newest chunks), and a `count_over_time` metric query. No HTTP, no gateway:
 * the index → fetch → decode → pipeline loop alone. Prints a table of medians over the runs
 * and writes every run as JSON under bench/results/.
 *
 *   pnpm --filter @sieve/querier bench [--lines 200000] [--streams 20] [--runs 5]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { mulberry32 } from "@sieve/kit";
import type { Entry } from "@sieve/chunk";
import { DEFAULT_CONFIG } from "../src/config.js";
import { createQuerier } from "../src/index.js";
import type { Querier } from "../src/querier.js";
import { tempStore, writeFlush } from "../src/testdata.test-helper.js";

const { values } = parseArgs({
  options: {
    lines: { type: "string", default: "200000" },
    streams: { type: "string", default: "20" },
    runs: { type: "string", default: "5" },
  },
});
const LINES = Number(values.lines);
const STREAMS = Number(values.streams);
const RUNS = Number(values.runs);
const PER_CHUNK = 5000;
const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

function makeStreams(): {
  streams: { labels: Record<string, string>; entries: Entry[] }[];
  raw: number;
} {
  const rand = mulberry32(7);
  const hex = (n: number) => {
    let s = "";
    for (let i = 0; i < n; i++) s += Math.floor(rand() * 16).toString(16);
    return s;
  };
  const per = Math.floor(LINES / STREAMS);
  let raw = 0;
  const streams = [...Array(STREAMS).keys()].map((s) => {
    const entries: Entry[] = [];
    for (let i = 0; i < per; i++) {
      const trace = hex(16);
      const line = `ts=${i} level=${rand() < 0.1 ? "error" : "info"} method=GET path=/api/v1/items/${Math.floor(rand() * 1e6)} status=200 duration_ms=${Math.floor(rand() * 500)} user=${hex(8)} msg="request completed" bytes=${Math.floor(rand() * 1e5)} trace=${trace}`;
      raw += line.length + 8 + 16;
      entries.push({
        timestamp: T0 + BigInt(i) * 10_000_000n + BigInt(s),
        line,
        structuredMetadata: [{ name: "trace_id", value: trace }],
      });
    }
    return { labels: { service: "api", pod: `pod-${s}` }, entries };
  });
  return { streams, raw };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const { store, close } = await tempStore();
const { streams, raw } = makeStreams();
let chunks = 0;
for (const part of [0, 1]) {
  const half = streams.map((s) => ({
    labels: s.labels,
    entries: s.entries.slice(part * (s.entries.length / 2), (part + 1) * (s.entries.length / 2)),
  }));
  chunks += await writeFlush(store, "fake", half, PER_CHUNK, 256 * 1024);
}
const end = T0 + BigInt(Math.ceil(LINES / STREAMS)) * 10_000_000n + S;

const fresh = (): Querier => createQuerier({ config: DEFAULT_CONFIG, store });

interface Run {
  case: string;
  ms: number;
  linesScanned: number;
  chunksFetched: number;
  bytesDecompressed: number;
}
const runs: Run[] = [];

async function scan(q: Querier, name: string, limit: number, query: string): Promise<void> {
  const t0 = performance.now();
  const r = await q.selectLogs({
    tenant: "fake",
    query,
    start: T0,
    end,
    limit,
    direction: "backward",
  });
  const ms = performance.now() - t0;
  runs.push({
    case: name,
    ms,
    linesScanned: r.stats.linesScanned,
    chunksFetched: r.stats.chunksFetched,
    bytesDecompressed: r.stats.bytesDecompressed,
  });
}

for (let i = 0; i < RUNS; i++) {
  await scan(fresh(), "full scan, cold cache", 100, '{service="api"} |= "no-such-text"');
  const warm = fresh();
  await scan(warm, "(warm-up)", 100, '{service="api"} |= "no-such-text"');
  await scan(warm, "full scan, warm cache", 100, '{service="api"} |= "no-such-text"');
  await scan(fresh(), "limit 100 backward, cold", 100, '{service="api"}');
  const t0 = performance.now();
  const m = await fresh().selectMatrix({
    tenant: "fake",
    query: 'sum by (pod) (count_over_time({service="api"} |= "level=error" [1m]))',
    start: T0,
    end,
    step: 60n * S,
  });
  runs.push({
    case: "count_over_time by pod, cold",
    ms: performance.now() - t0,
    linesScanned: m.stats.linesScanned,
    chunksFetched: m.stats.chunksFetched,
    bytesDecompressed: m.stats.bytesDecompressed,
  });
}
await close();

const cases = [...new Set(runs.map((r) => r.case))].filter((c) => !c.startsWith("("));
const rows = cases.map((c) => {
  const rs = runs.filter((r) => r.case === c);
  const ms = median(rs.map((r) => r.ms));
  const lines = rs[0]!.linesScanned;
  const mb = rs[0]!.bytesDecompressed / 1e6;
  return {
    case: c,
    medianMs: Math.round(ms * 10) / 10,
    chunksFetched: rs[0]!.chunksFetched,
    linesScanned: lines,
    mLinesPerS: Math.round((lines / ms / 1000) * 100) / 100,
    mbPerS: Math.round((mb / ms) * 1000 * 10) / 10,
  };
});
console.log(
  `\n${LINES} lines (${(raw / 1e6).toFixed(0)} MB raw) in ${STREAMS} streams, ${chunks} chunks; ${RUNS} runs; ${cpus()[0]?.model ?? "?"}\n`,
);
console.log(
  "| case | median ms | chunks fetched | lines scanned | M lines/s | MB/s decompressed |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (const r of rows) {
  console.log(
    `| ${r.case} | ${r.medianMs} | ${r.chunksFetched} | ${r.linesScanned} | ${r.mLinesPerS} | ${r.mbPerS} |`,
  );
}
mkdirSync(new URL("./results/", import.meta.url), { recursive: true });
const file = new URL(
  `./results/scan-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
  import.meta.url,
);
writeFileSync(
  file,
  JSON.stringify({ lines: LINES, streams: STREAMS, chunks, rawBytes: raw, runs, rows }, null, 2),
);
console.log(`\nwrote ${file.pathname}`);
