/**
 * `pnpm bench:query`: needle queries over a generated dataset of at least 1 GiB of raw lines
 * in at least 2,000 chunks (see dataset.ts: written through the write-ahead log by a real
 * ingester, cached under .cache/bench-query/<params-hash>, `--regenerate` rebuilds it).
 *
 * Each query is `{env="bench"} | trace_id="<id>"` over the whole range, limit 100,
 * backward (Loki's default): trace ids sampled uniformly from the generated traces, plus
 * ids that were never generated. Three ways:
 *   - with blooms, cold: a new Querier and a new in-process BloomGateway per query (no
 *     index segment, bloom block or chunk in memory; the OS page cache is warm);
 *   - with blooms, warm: one Querier and one BloomGateway for every query, after a warm-up
 *     with absent ids (segments and bloom blocks cached; needle chunks are not, each query
 *     wants other chunks);
 *   - without blooms: a new Querier without a chunk filter per query (every ref kept; a
 *     fresh chunk cache), on fewer queries because each reads every chunk in range: its
 *     end at least (chunk format 3), whose symbol filter refuses most chunks without the
 *     id before their blocks are read, decompressed and scanned.
 * Every answer is checked against the lines generated for the trace (none for an absent
 * id), and the with/without answers against each other.
 *
 * Prints a markdown table (p50/p99 latency, chunks in range, fetched, holding the needle,
 * excess fetched as a share of the chunks without the needle) and writes everything as JSON
 * under bench/results/query-<time>.json. Targets (issue 6): p50 ≤ 100 ms with blooms, ≥ 50×
 * faster than without, fetched ≤ needle chunks + 1.5 % of the rest; the verdict is printed
 * for warm (a running querier) and cold. Wall times on this shared 2-core machine swing with
 * its load, so CPU time per query and the load average are printed beside them.
 *
 * Chunk size: the ingester's estimate of a head chunk's compressed size counts the open
 * block at ratio 1 until the first block (256 KiB raw) is cut, so a 192 KiB target cuts
 * chunks at about 192 KiB of raw lines (about 84 KB compressed): 11 chunks a stream here.
 *
 * Metric queries (issue 15): Grafana's log-volume query, `sum by (level)
 * (count_over_time({env="bench"} | logfmt level [1m]))` at 1-minute steps, over the last
 * hour of the data and over 24 hours ending where the data ends (the dataset spans
 * `spanHours`, 6: the 24 h query reads all of it), pushed down and split by hour as a
 * querier runs it; p50/p99 wall and CPU time. The 24 h answer's counts must add up to the
 * dataset's lines (the 1-minute windows tile the range).
 *
 *   pnpm bench:query [--queries 100] [--absent 20] [--without 5] [--regenerate]
 *                    [--metric-1h 7] [--metric-24h 3]
 *                    [--streams 500] [--bytes 1073741824] [--chunk-target-bytes N] [--seed 1]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BloomGateway, DEFAULT_CONFIG as GATEWAY_DEFAULTS } from "@sieve/bloom-gateway";
import type { IndexedSeries } from "@sieve/index";
import {
  createQuerier,
  DEFAULT_CONFIG as QUERIER_DEFAULTS,
  type Querier,
  type ResultEntry,
  type StageSeconds,
} from "@sieve/querier";
import { FsObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import {
  absentTraceIds,
  datasetDir,
  generateDataset,
  loadDataset,
  readDatasetIndex,
  type DatasetInfo,
  type DatasetParams,
  type SampledTrace,
} from "./dataset.js";

const { values } = parseArgs({
  options: {
    queries: { type: "string", default: "100" },
    absent: { type: "string", default: "20" },
    without: { type: "string", default: "5" },
    regenerate: { type: "boolean", default: false },
    streams: { type: "string", default: "500" },
    bytes: { type: "string", default: String(1024 ** 3) },
    "chunk-target-bytes": { type: "string", default: String(192 * 1024) },
    seed: { type: "string", default: "1" },
    "metric-1h": { type: "string", default: "7" },
    "metric-24h": { type: "string", default: "3" },
  },
});
const QUERIES = Number(values.queries);
const ABSENT = Number(values.absent);
const WITHOUT = Number(values.without);
const LIMIT = 100;
const TARGET_P50_MS = 100;
const TARGET_RATIO = 50;
const TARGET_EXCESS = 0.015;

const params: DatasetParams = {
  streams: Number(values.streams),
  rawBytes: Number(values.bytes),
  chunkTargetBytes: Number(values["chunk-target-bytes"]),
  partitions: 4,
  spanHours: 6,
  linesPerRecord: 100,
  sampleTraces: Math.max(1000, QUERIES),
  seed: Number(values.seed),
};
const root = fileURLToPath(new URL("../../../", import.meta.url));
const dir = datasetDir(root, params);
const log = (message: string): void => {
  process.stderr.write(`${message}\n`);
};

// ---- the dataset ----------------------------------------------------------------------

let info = values.regenerate ? undefined : await loadDataset(dir);
const generated = info === undefined;
if (info === undefined) {
  log(`generating ${(params.rawBytes / 1e9).toFixed(2)} GB of lines into ${dir} …`);
  info = await generateDataset(dir, params, log);
} else {
  log(`reusing the dataset in ${dir} (--regenerate to rebuild it)`);
}
const dataset: DatasetInfo = info;
log(
  `dataset: ${dataset.lines} lines, ${(dataset.rawLineBytes / 1e9).toFixed(3)} GB raw, ${dataset.chunks} chunks (${(dataset.chunkBytes / 1e6).toFixed(0)} MB), ${dataset.series} series, ${dataset.segments} index segments; ingest ${dataset.ingestMBps.toFixed(1)} MB/s`,
);
if (dataset.rawLineBytes < 1e9 || dataset.chunks < 2000) {
  log(`!! the dataset is below the issue's floor (1 GB of raw lines, 2,000 chunks)`);
}
const index = await readDatasetIndex(dir, dataset);
const seriesByLabels = new Map<string, IndexedSeries>(index.map((s) => [s.labels, s]));

// ---- the needles ----------------------------------------------------------------------

interface Needle {
  readonly traceId: string;
  /** The generated lines, null for an absent id. */
  readonly trace: SampledTrace | null;
  /** Chunks holding a line of the trace (from the index: the stream's chunks whose range has one of its timestamps). */
  readonly needleChunks: number;
}

function needleChunks(trace: SampledTrace): number {
  const series = seriesByLabels.get(trace.stream);
  if (series === undefined) throw new Error(`stream ${trace.stream} is not in the index`);
  let n = 0;
  for (const c of series.chunks) {
    if (trace.lines.some((l) => BigInt(l.ts) >= c.ref.from && BigInt(l.ts) <= c.ref.through)) n++;
  }
  if (n === 0) throw new Error(`no chunk of ${trace.stream} holds trace ${trace.traceId}`);
  return n;
}

const present: Needle[] = dataset.sample
  .slice(0, QUERIES)
  .map((t) => ({ traceId: t.traceId, trace: t, needleChunks: needleChunks(t) }));
const absent: Needle[] = absentTraceIds(ABSENT + 3, params.seed).map((id) => ({
  traceId: id,
  trace: null,
  needleChunks: 0,
}));
const warmup = absent.splice(ABSENT, 3);
// Present and absent interleaved, so drift on the shared machine hits both alike.
const needles: Needle[] = [];
const every = Math.max(
  1,
  Math.floor((present.length + absent.length) / Math.max(1, absent.length)),
);
for (let i = 0, j = 0; i < present.length || j < absent.length;) {
  const takeAbsent =
    j < absent.length && (i >= present.length || (needles.length + 1) % every === 0);
  needles.push(takeAbsent ? absent[j++]! : present[i++]!);
}
const withoutNeedles = [...present.slice(0, Math.max(0, WITHOUT - 1)), ...absent.slice(0, 1)];

// ---- queriers -------------------------------------------------------------------------

const storeDir = join(dir, "store");
const logger = pino({ level: "warn" });

function querier(blooms: boolean): Querier {
  // Each querier here runs one query at a time, as a query worker does: it reads as one.
  const store = new FsObjectStore(storeDir, { blockingReads: true });
  return createQuerier({
    config: {
      ...QUERIER_DEFAULTS,
      // The scan without blooms reads everything: no timeout, so it is measured whole.
      limits: { ...QUERIER_DEFAULTS.limits, queryTimeoutMs: 0 },
    },
    store,
    ...(blooms && {
      chunkFilter: new BloomGateway(GATEWAY_DEFAULTS, store, logger, new Registry()),
    }),
  });
}

const START = BigInt(dataset.startNs);
const END = BigInt(dataset.endNs);

type Mode = "cold" | "warm" | "without";
interface QueryRow {
  mode: Mode;
  traceId: string;
  present: boolean;
  ms: number;
  /** CPU time of the process during the query (user + system): what the machine's load does not inflate. */
  cpuMs: number;
  entries: number;
  correct: boolean;
  chunksInRange: number;
  chunksFetched: number;
  needleChunks: number;
  chunksPruned: number;
  bytesFetched: number;
  linesScanned: number;
  segmentsRead: number;
  /** What the gateway was asked and did: (series, bloom record) groups, records read from the store, series skipped. */
  bloomGroups: number;
  bloomRecordsRead: number;
  seriesSkipped: number;
  stages: StageSeconds;
}

/** One answer line as a comparable string. */
function entryKey(e: ResultEntry): string {
  const stream = Object.keys(e.stream)
    .sort()
    .map((k) => `${k}="${e.stream[k]}"`)
    .join(", ");
  return `${e.timestamp}\t{${stream}}\t${e.metadata.trace_id ?? ""}\t${e.line}`;
}

/** The answer the generator implies: the trace's lines, newest first (backward). */
function expected(n: Needle): string[] {
  if (n.trace === null) return [];
  const t = n.trace;
  return [...t.lines]
    .sort((a, b) => (BigInt(b.ts) > BigInt(a.ts) ? 1 : BigInt(b.ts) < BigInt(a.ts) ? -1 : 0))
    .slice(0, LIMIT)
    .map((l) => `${l.ts}\t${t.stream}\t${t.traceId}\t${l.line}`);
}

const answers = new Map<string, string[]>(); // `${mode}:${traceId}` → answer
async function run(q: Querier, mode: Mode, n: Needle): Promise<QueryRow> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await q.selectLogs({
    tenant: dataset.tenant,
    query: `{env="bench"} | trace_id="${n.traceId}"`,
    start: START,
    end: END,
    limit: LIMIT,
    direction: "backward",
  });
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const got = result.entries.map(entryKey);
  answers.set(`${mode}:${n.traceId}`, got);
  const want = expected(n);
  const s = result.stats;
  return {
    mode,
    traceId: n.traceId,
    present: n.trace !== null,
    ms,
    cpuMs: (cpu.user + cpu.system) / 1000,
    entries: got.length,
    correct: got.length === want.length && got.every((g, i) => g === want[i]),
    chunksInRange: s.chunksInRange,
    chunksFetched: s.chunksFetched,
    needleChunks: n.needleChunks,
    chunksPruned: s.chunksPrunedByBlooms,
    bytesFetched: s.bytesFetched,
    linesScanned: s.linesScanned,
    segmentsRead: s.segmentsRead,
    bloomGroups: s.bloom?.series ?? 0,
    bloomRecordsRead: s.bloom?.blocksRead ?? 0,
    seriesSkipped: s.bloom?.seriesSkipped ?? 0,
    stages: { ...s.stages },
  };
}

const loadBefore = loadavg();
const rows: QueryRow[] = [];
log(`with blooms, cold: ${needles.length} queries, a new querier and gateway each`);
for (const n of needles) rows.push(await run(querier(true), "cold", n));

log(`with blooms, warm: ${needles.length} queries through one querier and gateway`);
const warm = querier(true);
for (const n of warmup) await run(warm, "warm", n);
for (const n of needles) rows.push(await run(warm, "warm", n));

log(
  `without blooms: ${withoutNeedles.length} queries, a new querier each (every chunk's end read, its blocks unless its filter refuses)`,
);
for (const n of withoutNeedles) {
  const row = await run(querier(false), "without", n);
  log(`  ${n.traceId}: ${row.ms.toFixed(0)} ms, ${row.chunksFetched} chunks`);
  rows.push(row);
}

// ---- metric queries -------------------------------------------------------------------

const METRIC_QUERY = `sum by (level) (count_over_time({env="bench"} | logfmt level [1m]))`;
interface MetricRow {
  hours: number;
  ms: number;
  cpuMs: number;
  series: number;
  points: number;
  total: number;
  linesScanned: number;
  chunksFetched: number;
}
const metricRows: MetricRow[] = [];
const MINUTE = 60_000_000_000n;
// The last step at or after the data's end, on a minute: every line is in some window.
const metricEnd = ((END + MINUTE - 1n) / MINUTE) * MINUTE;
for (const [hours, runs] of [
  [1, Number(values["metric-1h"])],
  [24, Number(values["metric-24h"])],
] as const) {
  log(`metric queries over ${hours} h: ${runs} runs, one querier (${METRIC_QUERY})`);
  const q = querier(false);
  for (let i = 0; i < runs; i++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const answer = await q.selectMatrix({
      tenant: dataset.tenant,
      query: METRIC_QUERY,
      start: metricEnd - BigInt(hours) * 60n * MINUTE + MINUTE,
      end: metricEnd,
      step: MINUTE,
    });
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    let total = 0;
    let points = 0;
    for (const s of answer.result) {
      points += s.values.length;
      for (const [, v] of s.values) total += Number(v);
    }
    const row = {
      hours,
      ms,
      cpuMs: (cpu.user + cpu.system) / 1000,
      series: answer.result.length,
      points,
      total,
      linesScanned: answer.stats.linesScanned,
      chunksFetched: answer.stats.chunksFetched,
    };
    log(`  ${ms.toFixed(0)} ms, ${row.total} lines counted in ${row.series} series`);
    metricRows.push(row);
  }
}
const metricSummary = [1, 24].map((hours) => {
  const rs = metricRows.filter((r) => r.hours === hours);
  return {
    hours,
    runs: rs.length,
    p50Ms: pct(rs, (r) => r.ms, 50),
    p99Ms: pct(rs, (r) => r.ms, 99),
    p50CpuMs: pct(rs, (r) => r.cpuMs, 50),
    lines: rs[0]?.total ?? 0,
    linesScanned: rs[0]?.linesScanned ?? 0,
    chunksFetched: rs[0]?.chunksFetched ?? 0,
    series: rs[0]?.series ?? 0,
  };
});
const metricWrong = metricRows.filter((r) => r.hours === 24 && r.total !== dataset.lines).length;

// ---- checks and figures ---------------------------------------------------------------

const loadAfter = loadavg();
const wrong = rows.filter((r) => !r.correct);
const mismatched = withoutNeedles.filter((n) => {
  const a = answers.get(`without:${n.traceId}`)!;
  const b = answers.get(`warm:${n.traceId}`)!;
  const c = answers.get(`cold:${n.traceId}`)!;
  return a.join("\n") !== b.join("\n") || a.join("\n") !== c.join("\n");
});

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
/** The `p`th percentile of one figure of each row. */
function pct<R>(rs: readonly R[], figure: (r: R) => number, p: number): number {
  return percentile(rs.map(figure), p);
}
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Chunks fetched beyond those holding the needle, as a share of the chunks without it. */
const excess = (r: QueryRow): number =>
  (r.chunksFetched - r.needleChunks) / (r.chunksInRange - r.needleChunks);

const summary = (["cold", "warm", "without"] as const).map((mode) => {
  const rs = rows.filter((r) => r.mode === mode);
  const stage = (k: keyof StageSeconds): number => pct(rs, (r) => r.stages[k] * 1000, 50);
  return {
    mode,
    queries: rs.length,
    p50Ms: pct(rs, (r) => r.ms, 50),
    p99Ms: pct(rs, (r) => r.ms, 99),
    p50CpuMs: pct(rs, (r) => r.cpuMs, 50),
    p99CpuMs: pct(rs, (r) => r.cpuMs, 99),
    chunksInRange: mean(rs.map((r) => r.chunksInRange)),
    meanChunksFetched: mean(rs.map((r) => r.chunksFetched)),
    meanNeedleChunks: mean(rs.map((r) => r.needleChunks)),
    meanExcess: mean(rs.map(excess)),
    maxExcess: Math.max(...rs.map(excess)),
    meanBloomGroups: mean(rs.map((r) => r.bloomGroups)),
    meanBloomRecordsRead: mean(rs.map((r) => r.bloomRecordsRead)),
    meanBytesFetched: mean(rs.map((r) => r.bytesFetched)),
    meanLinesScanned: mean(rs.map((r) => r.linesScanned)),
    stageMedianMs: {
      index: stage("index"),
      blooms: stage("blooms"),
      fetch: stage("fetch"),
      eval: stage("eval"),
    },
  };
});
const [cold, warmSummary, without] = summary as [
  (typeof summary)[number],
  (typeof summary)[number],
  (typeof summary)[number],
];
const ratioWarm = without.p50Ms / warmSummary.p50Ms;
const ratioWarmCpu = without.p50CpuMs / warmSummary.p50CpuMs;
const ratioCold = without.p50Ms / cold.p50Ms;
const withBlooms = rows.filter((r) => r.mode !== "without");
const overTarget = withBlooms.filter((r) => excess(r) > TARGET_EXCESS).length;
const targets = {
  p50WarmMs: {
    target: TARGET_P50_MS,
    measured: warmSummary.p50Ms,
    met: warmSummary.p50Ms <= TARGET_P50_MS,
  },
  p50ColdMs: { target: TARGET_P50_MS, measured: cold.p50Ms, met: cold.p50Ms <= TARGET_P50_MS },
  ratioWarm: { target: TARGET_RATIO, measured: ratioWarm, met: ratioWarm >= TARGET_RATIO },
  ratioCold: { target: TARGET_RATIO, measured: ratioCold, met: ratioCold >= TARGET_RATIO },
  excessFetched: {
    target: TARGET_EXCESS,
    measured: Math.max(cold.maxExcess, warmSummary.maxExcess),
    queriesOver: overTarget,
    met: overTarget === 0,
  },
  answersCorrect: {
    wrong: wrong.length,
    mismatched: mismatched.length,
    met: wrong.length + mismatched.length === 0,
  },
};

const gb = (dataset.rawLineBytes / 1e9).toFixed(3);
console.log(
  `\nneedle queries: ${gb} GB raw in ${dataset.lines} lines, ${dataset.series} streams, ${dataset.chunks} chunks (${(dataset.chunkBytes / 1e6).toFixed(0)} MB), ${dataset.segments} index segments; Node ${process.version}, ${cpus().length} cores`,
);
console.log(
  `dataset ${generated ? "generated now" : "reused from the cache"}: ${dataset.records} records (${(dataset.walBytes / 1e6).toFixed(0)} MB) generated and appended to the WAL in ${dataset.appendSeconds.toFixed(0)} s; a real ingester consumed and flushed them at ${dataset.ingestMBps.toFixed(1)} MB/s of raw lines (${dataset.ingestSeconds.toFixed(0)} s)\n`,
);
console.log(
  "| mode | queries | p50 ms | p99 ms | p50 / p99 CPU ms | chunks in range | mean fetched | mean needle chunks | (fetched − needle) / (in range − needle) | index / blooms / fetch / eval ms (p50) |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
const label = { cold: "with blooms, cold", warm: "with blooms, warm", without: "without blooms" };
for (const s of summary) {
  const st = s.stageMedianMs;
  console.log(
    `| ${label[s.mode]} | ${s.queries} | ${s.p50Ms.toFixed(1)} | ${s.p99Ms.toFixed(1)} | ${s.p50CpuMs.toFixed(1)} / ${s.p99CpuMs.toFixed(1)} | ${s.chunksInRange.toFixed(0)} | ${s.meanChunksFetched.toFixed(2)} | ${s.meanNeedleChunks.toFixed(2)} | ${(s.meanExcess * 100).toFixed(3)} % mean, ${(s.maxExcess * 100).toFixed(3)} % max | ${st.index.toFixed(1)} / ${st.blooms.toFixed(1)} / ${st.fetch.toFixed(1)} / ${st.eval.toFixed(1)} |`,
  );
}
console.log(
  `\nratio of p50s, without / with: ${ratioWarm.toFixed(0)}× warm, ${ratioCold.toFixed(0)}× cold; of CPU-time p50s ${ratioWarmCpu.toFixed(0)}× warm (without: ${without.queries} queries, so its p99 is its slowest)`,
);
console.log(
  `load average (1 min) ${loadBefore[0]!.toFixed(1)} before the queries, ${loadAfter[0]!.toFixed(1)} after, on ${cpus().length} cores: wall times above CPU times are waiting for a core`,
);
console.log(
  `bloom gateway: ${cold.meanBloomGroups.toFixed(0)} (series, bloom record) groups a query; bloom objects read from the store a query (whole blocks, or records past maxBlockBytes): ${cold.meanBloomRecordsRead.toFixed(0)} cold, ${warmSummary.meanBloomRecordsRead.toFixed(0)} warm`,
);
const verdict = (met: boolean): string => (met ? "met" : "MISSED");
console.log(
  `targets: p50 ≤ ${TARGET_P50_MS} ms ${verdict(targets.p50WarmMs.met)} warm, ${verdict(targets.p50ColdMs.met)} cold; ≥ ${TARGET_RATIO}× ${verdict(targets.ratioWarm.met)} warm, ${verdict(targets.ratioCold.met)} cold; fetched ≤ needle + ${TARGET_EXCESS * 100} % of the rest ${verdict(targets.excessFetched.met)} (${overTarget} of ${withBlooms.length} queries over)`,
);
console.log(
  `answers: ${rows.length - wrong.length}/${rows.length} equal to the generated lines; with and without blooms ${mismatched.length === 0 ? "identical" : `DIFFER on ${mismatched.length}`}`,
);

console.log(`\nmetric queries: \`${METRIC_QUERY}\`, 1-minute steps, split by hour`);
console.log(
  "| range | runs | p50 ms | p99 ms | p50 CPU ms | lines counted | lines scanned | chunks fetched | series |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
// A range asked 0 times (`--metric-1h 0`) has no figures to print.
for (const m of metricSummary.filter((x) => x.runs > 0)) {
  console.log(
    `| ${m.hours} h | ${m.runs} | ${m.p50Ms.toFixed(0)} | ${m.p99Ms.toFixed(0)} | ${m.p50CpuMs.toFixed(0)} | ${m.lines} | ${m.linesScanned} | ${m.chunksFetched} | ${m.series} |`,
  );
}
console.log(
  `24 h answers adding up to the dataset's ${dataset.lines} lines: ${metricRows.filter((r) => r.hours === 24).length - metricWrong}/${metricRows.filter((r) => r.hours === 24).length}`,
);

const resultsDir = join(root, "bench", "results");
mkdirSync(resultsDir, { recursive: true });
const file = join(resultsDir, `query-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
const datasetFigures = { ...dataset, sample: undefined }; // the sample's lines are in the cache
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "query",
      machine: { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model },
      dataset: { ...datasetFigures, generatedThisRun: generated, dir },
      limit: LIMIT,
      summary,
      ratios: { warm: ratioWarm, cold: ratioCold, warmCpu: ratioWarmCpu },
      loadAverage: { before: loadBefore, after: loadAfter },
      targets,
      metric: { query: METRIC_QUERY, summary: metricSummary, all: metricRows },
      all: rows,
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file}`);
if (!targets.answersCorrect.met || metricWrong > 0) process.exitCode = 1;
