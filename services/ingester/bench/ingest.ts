/**
 * `pnpm bench:ingest`: throughput from queue records to flushed chunks in one process,
 * with blooms off, metadata blooms, and metadata blooms with line n-grams of 3, 4 and 5
 * code points (`BENCH_SETUPS=off,metadata` picks some). Lines of about 200 bytes whose `trace_id` structured metadata is
 * shared by 10 lines on average, spread over 16 streams, 100 entries a record (what a
 * Loki client batch becomes). Each run: a fresh ingester consumes every record through an
 * in-memory queue (decoding, head chunks, blooms), then `flushAll` writes the chunks, bloom
 * blocks, manifests and index segments to a file-system store (fsync included); the clock
 * stops when the flush is durable.
 *
 * Prints a markdown table of medians; writes every run as JSON under bench/results/.
 * Targets (issue 5): ≥ 30 MB/s of raw lines with blooms on, blooms adding ≤ 25 % time,
 * bloom bytes ≤ 1 % of compressed chunk bytes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fingerprint, fingerprintKey, labelsString, parseLabels } from "@sieve/labels";
import { encodeQueueRecord } from "@sieve/proto";
import type {
  ConsumedBatch,
  ConsumedRecord,
  PartitionListener,
  QueueConsumer,
  QueuePosition,
} from "@sieve/queue";
import { FsObjectStore } from "@sieve/storage";
import pino from "pino";
import { Registry } from "prom-client";
import { createIngester, DEFAULT_CONFIG } from "../src/index.js";

const LINES = Number(process.env.BENCH_LINES ?? 200_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const STREAMS = 16;
const TEMPLATES = process.env.BENCH_TEMPLATES === "1";
const PARTITIONS = 4;
const PER_RECORD = 100;
const BATCH_RECORDS = 100;

/** The records, generated once: deterministic pseudo-random content. */
function generate(): { batches: ConsumedBatch[]; rawBytes: number } {
  let seed = 42;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const words = [
    "GET",
    "POST",
    "/api/v1/users",
    "/api/v1/orders",
    "200",
    "404",
    "500",
    "ms",
    "user",
    "id",
    "latency",
    "cache",
    "hit",
    "miss",
    "region=eu-west-1",
  ];
  const perPartition: ConsumedRecord[][] = Array.from({ length: PARTITIONS }, () => []);
  let rawBytes = 0;
  let line = 0;
  const t0 = BigInt(Date.now()) * 1_000_000n;
  while (line < LINES) {
    for (let s = 0; s < STREAMS && line < LINES; s++) {
      const labels = labelsString(parseLabels(`{app="app-${s % 4}", pod="pod-${s}", env="prod"}`));
      const fp = fingerprint(labels);
      const entries = [];
      for (let i = 0; i < PER_RECORD && line < LINES; i++, line++) {
        let text = `ts=${line} level=info msg="request served"`;
        // BENCH_TEMPLATES=1: keys in one of 8 fixed orders (lines of templates, values
        // varying, as most logs); by default every key is random (no template: the worst
        // case of patterns, which pause learning once evictions pass a quarter of the lines).
        const order = line % 8;
        for (let k = 0; text.length < 190; k++) {
          const key = TEMPLATES
            ? words[(order + k * 3) % words.length]
            : words[Math.floor(rand() * words.length)];
          text += ` ${key}=${Math.floor(rand() * 100000)}`;
        }
        text = text.slice(0, 200);
        rawBytes += Buffer.byteLength(text);
        const trace = Math.floor(line / 10)
          .toString(16)
          .padStart(16, "0");
        entries.push({
          timestampNs: t0 + BigInt(line) * 1_000_000n,
          line: text,
          structuredMetadata: [{ name: "trace_id", value: trace }],
        });
      }
      const p = s % PARTITIONS;
      perPartition[p]!.push({
        partition: p,
        offset: perPartition[p]!.length,
        key: fingerprintKey(fp),
        value: encodeQueueRecord({ tenant: "bench", labels, fingerprint: fp, entries }),
      });
    }
  }
  const batches: ConsumedBatch[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const records = perPartition[p]!;
    for (let i = 0; i < records.length; i += BATCH_RECORDS) {
      batches.push({ partition: p, records: records.slice(i, i + BATCH_RECORDS) });
    }
  }
  return { batches, rawBytes };
}

/** A queue consumer over batches in memory: delivers each partition's batches in order. */
class MemoryConsumer implements QueueConsumer {
  done: Promise<void> = Promise.resolve();
  constructor(private readonly batches: readonly ConsumedBatch[]) {}
  async start(
    handler: (b: ConsumedBatch) => Promise<void>,
    listener?: PartitionListener,
  ): Promise<void> {
    await listener?.assigned?.(Array.from({ length: PARTITIONS }, (_, p) => p));
    this.done = Promise.all(
      Array.from({ length: PARTITIONS }, async (_, p) => {
        for (const b of this.batches) if (b.partition === p) await handler(b);
      }),
    ).then(() => undefined);
  }
  commit(): Promise<void> {
    return Promise.resolve();
  }
  /** After each partition's last batch; nothing committed. */
  positions(): Promise<ReadonlyMap<number, QueuePosition>> {
    const ends = new Map<number, QueuePosition>();
    for (const b of this.batches) {
      ends.set(b.partition, { end: b.records.at(-1)!.offset + 1, committed: -1 });
    }
    return Promise.resolve(ends);
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
}

/** What a run ingests with: blooms off, metadata blooms, or metadata and line n-grams. */
interface Setup {
  readonly name: string;
  readonly blooms: boolean;
  /** Line n-gram length; 0: none. */
  readonly ngramLength: number;
  /** Whether lines are learned into patterns (Drain, patterns.ts). */
  readonly patterns: boolean;
}

const SETUPS: readonly Setup[] = [
  { name: "off", blooms: false, ngramLength: 0, patterns: false },
  { name: "metadata", blooms: true, ngramLength: 0, patterns: false },
  { name: "metadata + 3-grams", blooms: true, ngramLength: 3, patterns: false },
  { name: "metadata + 4-grams", blooms: true, ngramLength: 4, patterns: false },
  { name: "metadata + 5-grams", blooms: true, ngramLength: 5, patterns: false },
  { name: "metadata + patterns", blooms: true, ngramLength: 0, patterns: true },
];

interface Run {
  setup: string;
  seconds: number;
  chunkBytes: number;
  bloomBytes: number;
  chunks: number;
  /** Series blooms dropped (too large) or incomplete: their chunks cannot be pruned. */
  bloomsMissing: number;
}

async function metric(registry: Registry, name: string): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.reduce((sum, v) => sum + v.value, 0);
}

async function once(batches: ConsumedBatch[], setup: Setup): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-bench-ingest-"));
  try {
    const registry = new Registry();
    const consumer = new MemoryConsumer(batches);
    const { ingester } = createIngester({
      config: {
        ...DEFAULT_CONFIG,
        flushCheckIntervalMs: 3_600_000,
        blooms: {
          ...DEFAULT_CONFIG.blooms,
          bloomsEnabled: setup.blooms,
          ngramLength: setup.ngramLength,
          patternsEnabled: setup.patterns,
        },
      },
      consumer,
      store: new FsObjectStore(dir),
      logger: pino({ level: "silent" }),
      registry,
    });
    const started = performance.now();
    await ingester.start();
    await consumer.done;
    await ingester.flushAll();
    const seconds = (performance.now() - started) / 1000;
    await ingester.stop();
    return {
      setup: setup.name,
      seconds,
      chunkBytes: await metric(registry, "sieve_ingester_chunk_bytes_total"),
      bloomBytes: await metric(registry, "sieve_ingester_bloom_bytes_total"),
      chunks: await metric(registry, "sieve_ingester_chunks_flushed_total"),
      bloomsMissing: setup.blooms ? await missing(registry) : 0,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Blooms recorded as missing for a reason other than blooms being off. */
async function missing(registry: Registry): Promise<number> {
  const values = (await registry.getSingleMetric("sieve_ingester_blooms_missing_total")?.get())
    ?.values;
  return (values ?? [])
    .filter((v) => v.labels.reason !== "disabled")
    .reduce((sum, v) => sum + v.value, 0);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const { batches, rawBytes } = generate();
const only = process.env.BENCH_SETUPS?.split(",");
const setups = only === undefined ? SETUPS : SETUPS.filter((s) => only.includes(s.name));
await once(batches, SETUPS[1]!); // warm-up
const all: Run[] = [];
for (let i = 0; i < RUNS; i++) {
  // Rotate the order so drift on the shared machine hits every setup alike.
  for (let k = 0; k < setups.length; k++)
    all.push(await once(batches, setups[(i + k) % setups.length]!));
}
const rows = setups.map((setup) => {
  const runs = all.filter((r) => r.setup === setup.name);
  const seconds = median(runs.map((r) => r.seconds));
  return {
    setup: setup.name,
    seconds,
    mbPerSec: rawBytes / seconds / 1e6,
    linesPerSec: LINES / seconds,
    chunks: runs[0]!.chunks,
    chunkBytes: runs[0]!.chunkBytes,
    bloomBytes: runs[0]!.bloomBytes,
    bloomShare: runs[0]!.bloomBytes / runs[0]!.chunkBytes,
    bloomsMissing: runs[0]!.bloomsMissing,
  };
});

/** The median over rounds of `setup`'s time over `base`'s in the same round, minus one. */
function overhead(setup: string, base: string): number | undefined {
  const ratios: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const round = all.slice(i * setups.length, (i + 1) * setups.length);
    const a = round.find((r) => r.setup === setup);
    const b = round.find((r) => r.setup === base);
    if (a !== undefined && b !== undefined) ratios.push(a.seconds / b.seconds);
  }
  return ratios.length === 0 ? undefined : median(ratios) - 1;
}

console.log(
  `\ningest: ${LINES} lines, ${(rawBytes / 1e6).toFixed(1)} MB raw, ${STREAMS} streams, medians of ${RUNS} runs\n`,
);
console.log(
  "| blooms | MB/s (raw lines) | lines/s | time vs metadata | chunks | chunk bytes | bloom bytes | bloom / chunk bytes | blooms dropped |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  const vs = overhead(r.setup, "metadata");
  console.log(
    `| ${r.setup} | ${r.mbPerSec.toFixed(1)} | ${Math.round(r.linesPerSec)} | ${vs === undefined ? "" : `${vs >= 0 ? "+" : ""}${(vs * 100).toFixed(1)} %`} | ${r.chunks} | ${r.chunkBytes} | ${r.bloomBytes} | ${(r.bloomShare * 100).toFixed(2)} % | ${r.bloomsMissing} |`,
  );
}
const on = rows.find((r) => r.setup === "metadata");
const bloomOverhead = overhead("metadata", "off");
if (on !== undefined && bloomOverhead !== undefined) {
  console.log(
    `\nmetadata blooms add ${(bloomOverhead * 100).toFixed(1)} % time (median of per-round ratios)`,
  );
}
const targets =
  on === undefined || bloomOverhead === undefined
    ? undefined
    : {
        mbPerSecWithBlooms: { target: 30, measured: on.mbPerSec, met: on.mbPerSec >= 30 },
        bloomOverhead: { target: 0.25, measured: bloomOverhead, met: bloomOverhead <= 0.25 },
        bloomShare: { target: 0.01, measured: on.bloomShare, met: on.bloomShare <= 0.01 },
      };
if (targets !== undefined) {
  console.log(
    `targets (metadata blooms): ≥30 MB/s ${targets.mbPerSecWithBlooms.met ? "met" : "MISSED"}; ≤25 % bloom time ${targets.bloomOverhead.met ? "met" : "MISSED"}; ≤1 % bloom bytes ${targets.bloomShare.met ? "met" : "MISSED"}`,
  );
}

const root = new URL("../../../", import.meta.url);
const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`ingest-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
const result = {
  benchmark: "ingest",
  lines: LINES,
  rawBytes,
  runs: RUNS,
  machine,
  medians: rows,
  bloomOverhead,
  targets,
  all,
};
writeFileSync(file, JSON.stringify(result, null, 2));
console.log(JSON.stringify({ medians: rows, bloomOverhead, targets }));
console.log(`\nwrote ${file.pathname}`);
