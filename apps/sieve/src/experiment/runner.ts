/**
 * Runs an experiment: for each dataset, the blooms-off baseline and then every
 * configuration of the matrix, each on the real path in this process (`sieve all` on a
 * fresh data directory: HTTP push → distributor → write-ahead log → ingester → flush of
 * chunks, blooms and index → bloom gateway → querier, queried over HTTP). Nothing about
 * pruning is modelled here: every figure is what the querier reports in `data.stats`.
 */
import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { stringify as toYaml } from "yaml";
import { snappyCompress } from "@sieve/kit";
import { encodePushRequest, type PushStream } from "@sieve/proto";
import { loadSieveConfig } from "../config.js";
import { start, type Running } from "../targets.js";
import type { Dataset } from "./datasets.js";
import type { ConfigurationSettings, Latency, ResultRow } from "./results.js";
import { SpecError, TOKEN_KINDS } from "./spec.js";
import type { ExperimentSpec, MatrixSpec, ShapeSpec, TokenKind } from "./spec.js";

/** One configuration to run: the baseline has blooms off. */
export interface Configuration {
  readonly name: string;
  readonly settings: ConfigurationSettings;
}

/** Short names of token kinds, for configuration names. */
const TOKEN_ABBREVIATIONS: Record<TokenKind, string> = {
  key: "k",
  "key=value": "kv",
  prefixed: "p",
};

/**
 * The baseline (blooms off, the first matrix's first chunk sizes), then every matrix's
 * product in spec order, each configuration once. A name shows the rate and layout, and
 * the n-grams, tokens and chunk sizes where they are not the defaults.
 */
export function configurations(matrices: readonly MatrixSpec[]): Configuration[] {
  const first = matrices[0]!;
  const target0 = first.chunkTargetBytes[0]!;
  const block0 = first.chunkBlockBytes[0]!;
  const out = new Map<string, Configuration>();
  out.set("blooms-off", {
    name: "blooms-off",
    settings: {
      blooms: false,
      falsePositiveRate: first.falsePositiveRate[0]!,
      layout: first.filterLayout[0]!,
      ngramLength: 0,
      ngramSkip: 0,
      tokens: [],
      chunkTargetBytes: target0,
      chunkBlockBytes: block0,
    },
  });
  for (const m of matrices)
    for (const fp of m.falsePositiveRate)
      for (const layout of m.filterLayout)
        for (const ngrams of m.ngrams)
          for (const tokens of m.tokens)
            for (const target of m.chunkTargetBytes)
              for (const block of m.chunkBlockBytes) {
                const n = ngrams === "off" ? { length: 0, skip: 0 } : ngrams;
                const parts = [`fp${fp}`, layout];
                if (n.length > 0) parts.push(`ngram${n.length}s${n.skip}`);
                if (tokens.length < TOKEN_KINDS.length) {
                  const kinds = tokens.map((k) => TOKEN_ABBREVIATIONS[k]).join("+");
                  parts.push(`tokens-${kinds === "" ? "none" : kinds}`);
                }
                if (target !== target0) parts.push(`chunk${target}`);
                if (block !== block0) parts.push(`block${block}`);
                const name = parts.join("-");
                out.set(name, {
                  name,
                  settings: {
                    blooms: true,
                    falsePositiveRate: fp,
                    layout,
                    ngramLength: n.length,
                    ngramSkip: n.skip,
                    tokens,
                    chunkTargetBytes: target,
                    chunkBlockBytes: block,
                  },
                });
              }
  return [...out.values()];
}

/** One concrete query of a shape. */
export interface PlannedQuery {
  readonly shape: ShapeSpec;
  readonly logql: string;
}

function quote(value: string): string {
  return JSON.stringify(value);
}

/**
 * `repetitions` queries per shape, the same for every configuration: present needles from
 * the dataset's sample (in order, so each query asks other values), absent ones generated.
 */
export function planQueries(spec: ExperimentSpec, dataset: Dataset): PlannedQuery[] {
  const out: PlannedQuery[] = [];
  let absent = 0;
  for (const shape of spec.queries.shapes) {
    const candidates = dataset.sample.filter((s) => shape.fields.every((f) => f in s.values));
    if (shape.values === "present" && candidates.length === 0) {
      throw new SpecError(
        `queries.shapes ${shape.name}`,
        `dataset ${dataset.summary.name} has no line with ${shape.fields.join(", ")}`,
      );
    }
    for (let i = 0; i < spec.queries.repetitions; i++) {
      const picked = candidates[(i * 7919) % Math.max(1, candidates.length)];
      const values = shape.fields.map((f) =>
        shape.values === "present" ? picked!.values[f]! : dataset.absentValue(f, absent++),
      );
      const streams = [...new Set(dataset.sample.map((s) => s.stream))];
      const stream =
        shape.values === "present" ? picked!.stream : streams[i % Math.max(1, streams.length)]!;
      const selector = shape.selector === "narrow" ? stream : dataset.wideSelector;
      const joiner = shape.combine === "and" ? " and " : " or ";
      const filter =
        shape.filter === "line"
          ? shape.combine === "and"
            ? values.map((v) => ` |= ${quote(v)}`).join("")
            : ` |= ${values.map(quote).join(" or ")}`
          : ` | ${shape.fields.map((f, j) => `${f}=${quote(values[j]!)}`).join(joiner)}`;
      out.push({ shape, logql: `${selector}${filter}` });
    }
  }
  return out;
}

/** What the runner reports while it works. */
export interface Progress {
  /** A configuration begins; `steps` is the number of {@link step} calls it will make. */
  begin(configuration: string, steps: number): void;
  step(phase: string, n?: number): void;
  end(): void;
}

export interface RunOptions {
  readonly workDir: string;
  readonly progress: Progress;
  /** Checked between steps: true stops the run, keeping what finished. */
  readonly stopped: () => boolean;
  /** Keep each configuration's data directory (default: deleted when done). */
  readonly keepData?: boolean;
}

/** The figures of one configuration over one dataset, before the baseline's ratios. */
interface ConfigurationRun {
  readonly ingestSeconds: number;
  readonly chunkBytes: number;
  readonly bloomBytes: number;
  readonly perQuery: QueryFigures[];
}

interface QueryFigures {
  readonly query: PlannedQuery;
  readonly answer: string;
  readonly cold: number | undefined;
  readonly warm: number | undefined;
  readonly stats: SieveStats;
}

/** The part of `data.stats.sieve` the harness reads. */
interface SieveStats {
  readonly chunksInRange: number;
  readonly chunksPrunedByBlooms: number;
  readonly chunksFetched: number;
  readonly bytesFetched: number;
  readonly falsePositiveChunks: number;
}

/** One query answered: its wall time, its answer in canonical form, its stats. */
interface Answered {
  readonly ms: number;
  readonly answer: string;
  readonly stats: SieveStats;
}

/** Thrown when a configuration's answers differ from the baseline's: blooms lost lines. */
export class WrongAnswerError extends Error {
  constructor(configuration: string, query: string) {
    super(`${configuration}: the answer to ${query} differs from the blooms-off baseline's`);
    this.name = "WrongAnswerError";
  }
}

/**
 * Raw line bytes of a push body: about 1 MiB as clients send, and at least 64 pushes for a
 * small dataset (the ingester cuts a chunk between queue records, so one push of a whole
 * small stream would be one chunk whatever its target size).
 */
function batchBytes(rawBytes: number): number {
  return Math.min(1024 * 1024, Math.max(16 * 1024, Math.ceil(rawBytes / 64)));
}

const PUSH_CONNECTIONS = 4;

/**
 * Runs every configuration over `dataset`; rows come out per configuration as they finish
 * (`onRow`), so a stopped run keeps them. Throws {@link WrongAnswerError} on a difference.
 */
export async function runDataset(
  spec: ExperimentSpec,
  dataset: Dataset,
  options: RunOptions,
  onRow: (row: ResultRow) => void,
): Promise<void> {
  const queries = planQueries(spec, dataset);
  const raw = dataset.summary.rawBytes;
  const batches = Math.ceil(raw / batchBytes(raw)) + PUSH_CONNECTIONS;
  let baseline: ConfigurationRun | undefined;
  for (const configuration of configurations(spec.configurations)) {
    if (options.stopped()) return;
    const passes = (spec.queries.cold ? 1 : 0) + (spec.queries.warm ? 2 : 0);
    options.progress.begin(
      `${dataset.summary.name}/${configuration.name}`,
      batches + 1 + queries.length * passes,
    );
    let run: ConfigurationRun | undefined;
    try {
      run = await runConfiguration(spec, dataset, configuration, queries, options);
    } finally {
      options.progress.end();
    }
    if (run === undefined) return; // stopped
    baseline ??= run;
    for (const [i, q] of run.perQuery.entries()) {
      if (q.answer !== baseline.perQuery[i]!.answer) {
        throw new WrongAnswerError(configuration.name, q.query.logql);
      }
    }
    for (const row of rows(dataset, configuration, run, baseline)) onRow(row);
  }
}

function rows(
  dataset: Dataset,
  configuration: Configuration,
  run: ConfigurationRun,
  baseline: ConfigurationRun,
): ResultRow[] {
  const byShape = new Map<string, QueryFigures[]>();
  for (const q of run.perQuery) {
    const list = byShape.get(q.query.shape.name) ?? [];
    list.push(q);
    byShape.set(q.query.shape.name, list);
  }
  return [...byShape].map(([shape, qs]) => {
    const sum = (f: (s: SieveStats) => number) => qs.reduce((n, q) => n + f(q.stats), 0);
    const pruned = sum((s) => s.chunksPrunedByBlooms);
    const inRange = sum((s) => s.chunksInRange);
    const fp = sum((s) => s.falsePositiveChunks);
    const blooms = configuration.settings.blooms;
    return {
      dataset: dataset.summary.name,
      configuration: configuration.name,
      settings: configuration.settings,
      query: shape,
      example: qs[0]!.query.logql,
      queries: qs.length,
      chunksInRange: inRange,
      chunksPruned: pruned,
      chunksFetched: sum((s) => s.chunksFetched),
      falsePositiveChunks: fp,
      observedFalsePositiveRate: blooms && fp + pruned > 0 ? fp / (fp + pruned) : null,
      bytesFetched: sum((s) => s.bytesFetched),
      prunedShare: inRange > 0 ? pruned / inRange : 0,
      chunkBytes: run.chunkBytes,
      bloomBytes: run.bloomBytes,
      bloomRatio: run.chunkBytes > 0 ? run.bloomBytes / run.chunkBytes : 0,
      ingestSeconds: run.ingestSeconds,
      ingestCostRatio:
        baseline.ingestSeconds > 0 ? run.ingestSeconds / baseline.ingestSeconds : null,
      cold: latency(qs.flatMap((q) => (q.cold === undefined ? [] : [q.cold]))),
      warm: latency(qs.flatMap((q) => (q.warm === undefined ? [] : [q.warm]))),
      correct: true,
    };
  });
}

/** p50 and p99 (nearest rank) of `ms`. */
export function latency(ms: readonly number[]): Latency {
  const sorted = [...ms].sort((a, b) => a - b);
  const rank = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0;
  return { p50: rank(0.5), p99: rank(0.99), samples: sorted.length };
}

/** The YAML configuration of one configuration's `sieve all`. */
export function configurationYaml(c: ConfigurationSettings, dataDir: string): string {
  const unlimited = 1024 * 1024 * 1024;
  return toYaml({
    dataDir,
    logLevel: "error",
    server: { host: "127.0.0.1", port: 0 },
    distributor: {
      limits: {
        ingestionRateBytes: unlimited,
        ingestionBurstBytes: unlimited,
        perStreamRateBytes: unlimited,
        perStreamBurstBytes: unlimited,
        rejectOldSamples: false,
        // The data is the dataset's: nothing added.
        discoverServiceName: [],
        discoverLogLevels: false,
      },
    },
    ingester: {
      chunkTargetBytes: c.chunkTargetBytes,
      chunkBlockBytes: c.chunkBlockBytes,
      // Chunks are cut by size and by the flush at the end of the push, not by time.
      chunkIdleMs: 24 * 3_600_000,
      chunkMaxAgeMs: 24 * 3_600_000,
      // /flush waits until every line pushed is consumed: however long a big dataset lags.
      flushAllWaitMs: 3_600_000,
      blooms: {
        bloomsEnabled: c.blooms,
        falsePositiveRate: c.falsePositiveRate,
        filterLayout: c.layout,
        keyTokens: c.tokens.includes("key"),
        keyValueTokens: c.tokens.includes("key=value"),
        prefixedTokens: c.tokens.includes("prefixed"),
        ngramLength: c.ngramLength,
        ngramSkip: c.ngramSkip,
      },
    },
  });
}

async function startSieve(configFile: string): Promise<Running> {
  const config = loadSieveConfig({ file: configFile, env: {} });
  return start("all", { config, logger: pino({ level: config.logLevel }) });
}

async function runConfiguration(
  spec: ExperimentSpec,
  dataset: Dataset,
  configuration: Configuration,
  queries: readonly PlannedQuery[],
  options: RunOptions,
): Promise<ConfigurationRun | undefined> {
  const { progress, stopped } = options;
  const dir = join(options.workDir, dataset.summary.name, configuration.name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const configFile = join(dir, "sieve.yaml");
  await writeFile(configFile, configurationYaml(configuration.settings, join(dir, "data")));
  const storeDir = loadSieveConfig({ file: configFile, env: {} }).storage.dir;
  let sieve: Running | undefined = await startSieve(configFile);
  try {
    const t0 = performance.now();
    const pushed = await push(sieve.url, dataset, progress, stopped);
    if (!pushed) return undefined;
    // /flush answers once every line acknowledged is consumed, flushed and committed.
    await post(`${sieve.url}/flush`);
    const ingestSeconds = (performance.now() - t0) / 1000;
    progress.step("flush");
    const { chunkBytes, bloomBytes } = await storedBytes(storeDir);
    const cold = new Map<PlannedQuery, Answered>();
    if (spec.queries.cold) {
      // A fresh process per query: no segment, bloom block or chunk cached.
      for (const q of queries) {
        if (stopped()) return undefined;
        await sieve.close();
        sieve = undefined;
        sieve = await startSieve(configFile);
        cold.set(q, await query(sieve.url, q, dataset, spec.queries.limit));
        progress.step("cold queries");
      }
    }
    const warm = new Map<PlannedQuery, Answered>();
    if (spec.queries.warm) {
      for (const pass of [0, 1]) {
        for (const q of queries) {
          if (stopped()) return undefined;
          const r = await query(sieve.url, q, dataset, spec.queries.limit);
          if (pass === 1) warm.set(q, r);
          progress.step(pass === 0 ? "warming" : "warm queries");
        }
      }
    }
    return {
      ingestSeconds,
      chunkBytes,
      bloomBytes,
      perQuery: queries.map((q) => {
        const c = cold.get(q);
        const w = warm.get(q);
        const first = (c ?? w)!;
        if (c !== undefined && w !== undefined && c.answer !== w.answer) {
          throw new Error(`${configuration.name}: ${q.logql} answered differently cold and warm`);
        }
        return { query: q, answer: first.answer, cold: c?.ms, warm: w?.ms, stats: first.stats };
      }),
    };
  } finally {
    await sieve?.close();
    if (options.keepData !== true) await rm(join(dir, "data"), { recursive: true, force: true });
  }
}

async function post(url: string): Promise<void> {
  const res = await fetch(url, { method: "POST" });
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
}

/** One connection's batch and the push it has in flight. */
interface Lane {
  batch: Map<string, PushStream>;
  bytes: number;
  inFlight: Promise<void>;
}

/**
 * Pushes the dataset as protobuf+snappy bodies of about 1 MiB over a few connections. A
 * stream always goes over the same connection, one push at a time, so its lines arrive in
 * order, as from a real client: the chunks cut are the same run after run.
 */
async function push(
  url: string,
  dataset: Dataset,
  progress: Progress,
  stopped: () => boolean,
): Promise<boolean> {
  let failure: Error | undefined;
  const limit = batchBytes(dataset.summary.rawBytes);
  const lanes: Lane[] = Array.from({ length: PUSH_CONNECTIONS }, () => ({
    batch: new Map(),
    bytes: 0,
    inFlight: Promise.resolve(),
  }));
  const laneOf = new Map<string, Lane>();
  const send = async (lane: Lane): Promise<void> => {
    await lane.inFlight;
    if (failure !== undefined) throw failure;
    const body = snappyCompress(encodePushRequest({ streams: [...lane.batch.values()] }));
    lane.batch = new Map();
    lane.bytes = 0;
    lane.inFlight = fetch(`${url}/loki/api/v1/push`, {
      method: "POST",
      headers: { "content-type": "application/x-protobuf" },
      body,
    }).then(
      async (res) => {
        if (res.status !== 204) failure ??= new Error(`push: ${res.status} ${await res.text()}`);
        progress.step("pushing");
      },
      (error: unknown) => {
        failure ??= error as Error;
      },
    );
  };
  for await (const e of dataset.entries()) {
    let lane = laneOf.get(e.stream);
    if (lane === undefined) {
      lane = lanes[laneOf.size % lanes.length]!;
      laneOf.set(e.stream, lane);
    }
    let s = lane.batch.get(e.stream);
    if (s === undefined) {
      s = { labels: e.stream, entries: [] };
      lane.batch.set(e.stream, s);
    }
    s.entries.push({
      timestamp: { seconds: Number(e.ts / 1_000_000_000n), nanos: Number(e.ts % 1_000_000_000n) },
      line: e.line,
      structuredMetadata: e.metadata.map((m) => ({ name: m.name, value: m.value })),
    });
    lane.bytes += e.line.length;
    if (lane.bytes >= limit) {
      await send(lane);
      if (stopped()) {
        await Promise.all(lanes.map((l) => l.inFlight));
        return false;
      }
    }
  }
  for (const lane of lanes) if (lane.batch.size > 0) await send(lane);
  await Promise.all(lanes.map((l) => l.inFlight));
  if (failure !== undefined) throw failure;
  return true;
}

interface QueryResponse {
  status: string;
  data: {
    result: { stream: Record<string, string>; values: [string, string][] }[];
    stats: { sieve: SieveStats };
  };
}

/** One query over HTTP: its wall time, a canonical form of its answer, and its stats. */
async function query(
  url: string,
  q: PlannedQuery,
  dataset: Dataset,
  limit: number,
): Promise<Answered> {
  const params = new URLSearchParams({
    query: q.logql,
    start: dataset.startNs.toString(),
    end: dataset.endNs.toString(),
    limit: String(limit),
    direction: "backward",
  });
  const t0 = performance.now();
  const res = await fetch(`${url}/loki/api/v1/query_range?${params.toString()}`);
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${q.logql}: ${res.status} ${text.slice(0, 500)}`);
  const body = JSON.parse(text) as QueryResponse;
  const lines = body.data.result.flatMap((s) => {
    const stream = JSON.stringify(Object.entries(s.stream).sort(([a], [b]) => (a < b ? -1 : 1)));
    return s.values.map(([ts, line]) => `${stream}\t${ts}\t${line}`);
  });
  return { ms, answer: lines.sort().join("\n"), stats: body.data.stats.sieve };
}

/** Bytes of chunk and bloom objects under a filesystem store. */
async function storedBytes(dir: string): Promise<{ chunkBytes: number; bloomBytes: number }> {
  let chunkBytes = 0;
  let bloomBytes = 0;
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    const parts = path.slice(dir.length).split("/");
    if (parts.includes("chunks")) chunkBytes += (await stat(path)).size;
    else if (parts.includes("blooms")) bloomBytes += (await stat(path)).size;
  }
  return { chunkBytes, bloomBytes };
}
