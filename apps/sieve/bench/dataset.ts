/**
 * The needle-query dataset of `pnpm bench:query`: generated once, then reused from a
 * git-ignored cache directory keyed by its parameters.
 *
 * The lines go through the real write path below the distributor: each stream's batch is
 * encoded as the distributor encodes it (`encodeQueueRecord`, partition of the stream's
 * fingerprint) and appended to a real write-ahead log (`openWal`, fsynced), which a real
 * `Ingester` consumes and flushes to a file-system store: the chunks, bloom blocks, flush
 * manifests and index segments are exactly what `sieve all` writes. (The distributor's HTTP
 * decoding and validation are left out: they cost the same with and without blooms and are
 * benchmarked by `pnpm bench:push`.)
 *
 * Content: `streams` streams `{env="bench", namespace, app, pod}`; lines of 150–250 bytes
 * (mean about 200) in logfmt; each line carries a `trace_id` structured-metadata value
 * (32 hex characters) shared by 2–8 consecutive lines of one stream, so a trace's lines
 * are seconds apart; every stream's timestamps spread evenly over `spanHours`. A uniform
 * sample of traces (reservoir sampling) is kept with their lines, to check answers.
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { readIndex, type IndexedSeries } from "@sieve/index";
import { createIngester, DEFAULT_CONFIG as INGESTER_DEFAULTS } from "@sieve/ingester";
import { fingerprint, fingerprintKey, labelsString, parseLabels, partitionOf } from "@sieve/labels";
import { encodeQueueRecord, type QueueEntry } from "@sieve/proto";
import { openWal, type OutgoingRecord } from "@sieve/queue";
import { mulberry32 } from "@sieve/kit";
import { FsObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";

/**
 * Bumped whenever the generator's output changes, its lines or how Sieve stores them, so an
 * old cache is not reused (2: blooms key chunk tokens by checksum).
 */
const GENERATOR_VERSION = 2;

/** What the dataset is made of; every field goes into the cache key. */
export interface DatasetParams {
  readonly streams: number;
  /** Raw line bytes to generate at least. */
  readonly rawBytes: number;
  /** Ingester chunk target (compressed bytes). */
  readonly chunkTargetBytes: number;
  /** Queue partitions (write-ahead log). */
  readonly partitions: number;
  readonly spanHours: number;
  /** Lines per queue record (a client batch of one stream). */
  readonly linesPerRecord: number;
  /** Traces kept with their lines for checking answers. */
  readonly sampleTraces: number;
  readonly seed: number;
}

/** One trace of the sample: its stream and lines, oldest first. */
export interface SampledTrace {
  readonly traceId: string;
  readonly stream: string;
  readonly lines: readonly { readonly ts: string; readonly line: string }[];
}

/** What generation measured and what the store holds. */
export interface DatasetInfo {
  readonly params: DatasetParams;
  readonly tenant: string;
  /** Query range, ns as decimal strings, [start, end). */
  readonly startNs: string;
  readonly endNs: string;
  readonly lines: number;
  readonly rawLineBytes: number;
  readonly traces: number;
  readonly records: number;
  readonly walBytes: number;
  /** Generating, encoding and appending every record to the log (fsynced). */
  readonly appendSeconds: number;
  /** The ingester consuming the whole log, then `flushAll` (chunks, blooms, index written). */
  readonly ingestSeconds: number;
  readonly ingestMBps: number;
  readonly chunks: number;
  readonly chunkBytes: number;
  readonly series: number;
  readonly segments: number;
  readonly bloomBytes: number;
  readonly sample: readonly SampledTrace[];
}

/** Tenant of every stream. */
export const TENANT = "bench";
/** First timestamp: a fixed instant, so the dataset is the same on every machine. */
const T0_NS = BigInt(Date.UTC(2026, 0, 15, 6, 0, 0)) * 1_000_000n;

const hex8 = (n: number): string => (n >>> 0).toString(16).padStart(8, "0");

/** A trace id (32 hex characters) from a generator: four 32-bit draws. */
function traceId(rand: () => number): string {
  const r = (): number => Math.floor(rand() * 4294967296);
  return hex8(r()) + hex8(r()) + hex8(r()) + hex8(r());
}

/** An id of the same shape that the generator never made (another seed's stream of draws). */
export function absentTraceIds(count: number, seed: number): string[] {
  const rand = mulberry32(seed ^ 0x5bd1e995);
  return Array.from({ length: count }, () => `ffff${traceId(rand).slice(4)}`);
}

const LEVELS = ["info", "info", "info", "info", "debug", "warn", "error"];
const METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"];
const RESOURCES = ["users", "orders", "carts", "payments", "sessions", "items", "search"];
const MESSAGES = [
  "request served",
  "request served from cache",
  "upstream call finished",
  "slow request",
  "retrying upstream call",
  "validation failed",
  "session refreshed",
];
const WORDS = ["alpha", "bravo", "eu-west-1", "us-east-2", "tcp", "tls1.3", "gzip", "json"];

/** A logfmt line of 150–250 bytes. */
function makeLine(rand: () => number, tsMs: number, stream: number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const level = pick(LEVELS);
  const status = level === "error" ? 500 : level === "warn" ? 429 : rand() < 0.9 ? 200 : 404;
  let line =
    `ts=${new Date(tsMs).toISOString()} level=${level} caller=handler.go:${100 + Math.floor(rand() * 400)}` +
    ` method=${pick(METHODS)} path=/api/v1/${pick(RESOURCES)}/${Math.floor(rand() * 1e6)}` +
    ` status=${status} duration_ms=${(rand() * 900).toFixed(3)} bytes=${Math.floor(rand() * 65536)}` +
    ` user=u${Math.floor(rand() * 50000)} worker=${stream % 16} msg="${pick(MESSAGES)}"`;
  const target = 150 + Math.floor(rand() * 101);
  while (line.length < target) line += ` ${pick(WORDS)}=${Math.floor(rand() * 100000)}`;
  return line.length > target ? line.slice(0, target) : line;
}

/**
 * The directory of a parameter set: `<root>/.cache/bench-query/<hash of params>`. The
 * ingester's chunk block size is in the hash too: the stored layout follows the default,
 * and a changed default must not go on measuring the old one.
 */
export function datasetDir(root: string, params: DatasetParams): string {
  const { chunkBlockBytes } = INGESTER_DEFAULTS;
  const hash = createHash("sha256")
    .update(JSON.stringify({ GENERATOR_VERSION, chunkBlockBytes, ...params }))
    .digest("hex")
    .slice(0, 16);
  return join(root, ".cache", "bench-query", hash);
}

const MARKER = "complete.json";

/** The finished dataset in `dir`, or undefined when it was never completed. */
export async function loadDataset(dir: string): Promise<DatasetInfo | undefined> {
  if (!existsSync(join(dir, MARKER))) return undefined;
  return JSON.parse(await readFile(join(dir, MARKER), "utf8")) as DatasetInfo;
}

/** The store's whole index of the dataset. */
export function readDatasetIndex(dir: string, info: DatasetInfo): Promise<IndexedSeries[]> {
  return readIndex(
    new FsObjectStore(join(dir, "store")),
    info.tenant,
    BigInt(info.startNs),
    BigInt(info.endNs) - 1n,
  );
}

async function metric(registry: Registry, name: string): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.reduce((sum, v) => sum + v.value, 0);
}

/**
 * Generates the dataset into `dir` (wiping what is there) through the write-ahead log and
 * a real ingester, writes the marker last, and answers what it measured.
 */
export async function generateDataset(
  dir: string,
  params: DatasetParams,
  progress: (message: string) => void,
): Promise<DatasetInfo> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const walDir = join(dir, "wal");
  const store = new FsObjectStore(join(dir, "store"));
  const registry = new Registry();
  const wal = await openWal({ dir: walDir, partitions: params.partitions });
  const { ingester } = createIngester({
    config: {
      ...INGESTER_DEFAULTS,
      chunkTargetBytes: params.chunkTargetBytes,
      // Only size cuts chunks: idle and age checks would depend on this machine's speed.
      flushCheckIntervalMs: 3_600_000,
      chunkIdleMs: 7 * 86_400_000,
      chunkMaxAgeMs: 7 * 86_400_000,
    },
    consumer: wal.consumer,
    store,
    logger: pino({ level: "warn" }),
    registry,
  });

  const streams = Array.from({ length: params.streams }, (_, s) => {
    const labels = labelsString(
      parseLabels(
        `{env="bench", namespace="ns-${s % 5}", app="app-${s % 25}", pod="pod-${s.toString().padStart(4, "0")}"}`,
      ),
    );
    const fp = fingerprint(labels);
    return {
      labels,
      fp,
      key: fingerprintKey(fp),
      partition: partitionOf(fp, params.partitions),
      next: 0, // index of the stream's next line
      traceLeft: 0,
      trace: "",
      traceLines: [] as { ts: string; line: string }[],
      rand: mulberry32(params.seed * 1_000_003 + s),
    };
  });
  const perStream = Math.ceil(params.rawBytes / 200 / params.streams);
  const spanNs = BigInt(params.spanHours * 3_600_000) * 1_000_000n;
  const stepNs = spanNs / BigInt(perStream);
  const sampleRand = mulberry32(params.seed ^ 0x9e3779b9);
  const sample: SampledTrace[] = [];
  let traces = 0;
  let lines = 0;
  let rawLineBytes = 0;
  let records = 0;
  let walBytes = 0;
  let endNs = T0_NS;

  /** Reservoir sampling (algorithm R) over finished traces: a uniform sample. */
  const finishTrace = (s: (typeof streams)[number]): void => {
    if (s.trace === "") return;
    traces++;
    const kept = { traceId: s.trace, stream: s.labels, lines: s.traceLines };
    if (sample.length < params.sampleTraces) sample.push(kept);
    else {
      const j = Math.floor(sampleRand() * traces);
      if (j < params.sampleTraces) sample[j] = kept;
    }
  };

  // Phase 1: generate and append every record (fsynced). Phase 2: the ingester consumes the
  // log and flushes. Apart, so the ingest rate is the ingester's alone.
  const started = performance.now();
  let inFlight: Promise<void> = Promise.resolve();
  let reported = 0;
  for (let round = 0; lines < perStream * params.streams; round++) {
    const batch: OutgoingRecord[] = [];
    for (let si = 0; si < streams.length; si++) {
      const s = streams[si]!;
      const entries: QueueEntry[] = [];
      for (let i = 0; i < params.linesPerRecord && s.next < perStream; i++, s.next++) {
        if (s.traceLeft === 0) {
          finishTrace(s);
          s.trace = traceId(s.rand);
          s.traceLeft = 2 + Math.floor(s.rand() * 7);
          s.traceLines = [];
        }
        s.traceLeft--;
        // Streams are offset by a few microseconds so no two share a timestamp.
        const ts =
          T0_NS + BigInt(s.next) * stepNs + BigInt(si * 1000 + Math.floor(s.rand() * 1000));
        const line = makeLine(s.rand, Number(ts / 1_000_000n), si);
        const lineBytes = Buffer.byteLength(line);
        rawLineBytes += lineBytes;
        lines++;
        if (ts >= endNs) endNs = ts + 1n;
        s.traceLines.push({ ts: ts.toString(), line });
        entries.push({
          timestampNs: ts,
          line,
          structuredMetadata: [{ name: "trace_id", value: s.trace }],
        });
      }
      if (entries.length === 0) continue;
      const value = encodeQueueRecord({
        tenant: TENANT,
        labels: s.labels,
        fingerprint: s.fp,
        entries,
      });
      walBytes += value.byteLength;
      batch.push({ partition: s.partition, key: s.key, value });
    }
    // One append in flight while the next round is generated: fsync overlaps generation.
    await inFlight;
    records += batch.length;
    inFlight = wal.writer.append(batch);
    if (rawLineBytes - reported >= 100e6) {
      reported = rawLineBytes;
      progress(
        `  ${(rawLineBytes / 1e6).toFixed(0)} MB appended to the log, ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    }
  }
  await inFlight;
  for (const s of streams) finishTrace(s);
  const appendSeconds = (performance.now() - started) / 1000;
  progress(`  log written in ${appendSeconds.toFixed(0)} s; ingesting …`);

  const ingestStarted = performance.now();
  await ingester.start();
  for (let tick = 1; ; tick++) {
    const consumed = await metric(registry, "sieve_ingester_records_consumed_total");
    if (consumed >= records) break;
    if (tick % 200 === 0) {
      progress(
        `  ${consumed}/${records} records consumed, ${((performance.now() - ingestStarted) / 1000).toFixed(0)} s`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await ingester.flushAll();
  const ingestSeconds = (performance.now() - ingestStarted) / 1000;
  const bloomBytes = await metric(registry, "sieve_ingester_bloom_bytes_total");
  const chunksFlushed = await metric(registry, "sieve_ingester_chunks_flushed_total");
  const dropped = await metric(registry, "sieve_ingester_entries_dropped_total");
  await ingester.stop();
  await wal.close();
  await rm(walDir, { recursive: true, force: true });
  if (dropped > 0) throw new Error(`the ingester dropped ${dropped} entries`);

  const partial: Omit<DatasetInfo, "chunks" | "chunkBytes" | "series" | "segments"> = {
    params,
    tenant: TENANT,
    startNs: T0_NS.toString(),
    endNs: endNs.toString(),
    lines,
    rawLineBytes,
    traces,
    records,
    walBytes,
    appendSeconds,
    ingestSeconds,
    ingestMBps: rawLineBytes / 1e6 / ingestSeconds,
    bloomBytes,
    sample,
  };
  const index = await readDatasetIndex(dir, { ...partial } as DatasetInfo);
  const chunks = index.reduce((n, s) => n + s.chunks.length, 0);
  if (chunks !== chunksFlushed) {
    throw new Error(`the index lists ${chunks} chunks, the ingester flushed ${chunksFlushed}`);
  }
  const info: DatasetInfo = {
    ...partial,
    chunks,
    chunkBytes: index.reduce((n, s) => n + s.chunks.reduce((m, c) => m + c.bytes, 0), 0),
    series: index.length,
    segments: (await store.list(`${TENANT}/index/`)).length,
  };
  await writeFile(join(dir, MARKER), JSON.stringify(info));
  return info;
}
