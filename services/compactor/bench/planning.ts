/**
 * `pnpm bench:compactor`: query planning over one tenant's day of many index segments,
 * before and after the compactor merges them. Planning's index step is what a querier does
 * for every query over the day with a cold segment cache (`readSeries` in
 * services/querier/src/plan.ts): list the day, get and decode every segment, merge them
 * into series → chunk refs (`readIndex` of `@sieve/index`, the same functions).
 *
 * The day: `--segments` flushes (500), each listing `--series` series (100) with two
 * chunks each and one bloom block, as an ingester flushing every few minutes writes. Only
 * the segments are written (planning reads nothing else).
 *
 *   pnpm bench:compactor [--segments 500] [--series 100] [--runs 5] [--store fs|s3]
 *
 * With `--store s3`, S3_ENDPOINT and the AWS_* variables name a MinIO (a new bucket).
 * Prints a markdown table of medians; writes the run as JSON under bench/results/.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import {
  decodeSegment,
  encodeSegment,
  listSegments,
  mergeSegments,
  newSegmentId,
  readIndex,
  segmentKey,
  type SegmentSeries,
} from "@sieve/index";
import { mapLimit } from "@sieve/kit";
import { FsObjectStore, S3ObjectStore, type ObjectStore } from "@sieve/storage";
import pino from "pino";
import { CompactorMetrics } from "../src/metrics.js";
import { Retention, NO_RETENTION } from "@sieve/logql";
import { runOnce } from "../src/run.js";

const { values } = parseArgs({
  options: {
    segments: { type: "string", default: "500" },
    series: { type: "string", default: "100" },
    runs: { type: "string", default: "5" },
    store: { type: "string", default: "fs" },
  },
});
const SEGMENTS = Number(values.segments);
const SERIES = Number(values.series);
const RUNS = Number(values.runs);
const TENANT = "bench";
const DAY = Math.floor(Date.now() / 86_400_000) - 1;
const DAY_NS = BigInt(DAY) * 86_400_000_000_000n;
const MIN_NS = 60_000_000_000n;

async function open(): Promise<{ store: ObjectStore; close: () => Promise<void> }> {
  if (values.store === "s3") {
    const store = new S3ObjectStore({
      bucket: `sieve-bench-${randomBytes(6).toString("hex")}`,
      endpoint: process.env.S3_ENDPOINT ?? "",
      forcePathStyle: true,
    });
    await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
    return {
      store,
      close: async () => {
        await mapLimit(await store.list(""), 16, (k) => store.delete(k));
        store.close();
      },
    };
  }
  const dir = await mkdtemp(join(tmpdir(), "sieve-bench-planning-"));
  return { store: new FsObjectStore(dir), close: () => rm(dir, { recursive: true, force: true }) };
}

/** Flush `f`: every series, two chunks of about a minute each, its bloom in the flush's block. */
function flushSegment(f: number): Uint8Array {
  const base = DAY_NS + BigInt(f) * 2n * MIN_NS;
  const block = `${TENANT}/blooms/${new Date(DAY * 86_400_000).toISOString().slice(0, 10)}/f${f}`;
  const series: SegmentSeries[] = Array.from({ length: SERIES }, (_, s) => ({
    fingerprint: (BigInt(s + 1) * 0x9e3779b97f4a7c15n) % (1n << 64n),
    labels: `{app="app-${s % 10}", pod="pod-${s}"}`,
    bloom: { kind: "block", key: block, offset: 8 + s * 900, length: 900 },
    chunks: [0n, 1n].map((c) => ({
      from: base + c * MIN_NS,
      through: base + (c + 1n) * MIN_NS - 1n,
      checksum: (f * 7919 + s * 31 + Number(c)) >>> 0,
      bytes: 60_000,
      entries: 600,
      prefixed: true,
      lineBytes: 120_000,
    })),
  }));
  return encodeSegment({ tenant: TENANT, day: DAY, series });
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const THROUGH = DAY_NS + 86_399_999_999_999n;

/**
 * Median ms of a cold read of the day's index (list, get, decode, merge): `readIndex`
 * (segments read one after another) and as the querier's `readSeries` does it (every
 * segment's get at once, Promise.all).
 */
async function plan(
  store: ObjectStore,
): Promise<{ ms: number; parallelMs: number; segments: number; chunks: number }> {
  const times: number[] = [];
  const parallel: number[] = [];
  let chunks = 0;
  for (let r = 0; r < RUNS; r++) {
    let t0 = performance.now();
    const series = await readIndex(store, TENANT, DAY_NS, THROUGH);
    times.push(performance.now() - t0);
    chunks = series.reduce((n, s) => n + s.chunks.length, 0);
    t0 = performance.now();
    const keys = await listSegments(store, TENANT, DAY_NS, THROUGH);
    const segments = await Promise.all(keys.map(async (k) => decodeSegment(await store.get(k))));
    mergeSegments(TENANT, segments, DAY_NS, THROUGH);
    parallel.push(performance.now() - t0);
  }
  const segments = (await store.list(`${TENANT}/index/`)).length;
  return { ms: median(times), parallelMs: median(parallel), segments, chunks };
}

const { store, close } = await open();
try {
  await mapLimit(
    Array.from({ length: SEGMENTS }, (_, f) => f),
    16,
    (f) =>
      store.put(
        segmentKey(TENANT, DAY, newSegmentId("ingester-0", Date.now(), f)),
        flushSegment(f),
      ),
  );
  const before = await plan(store);
  const t0 = performance.now();
  const report = await runOnce({
    store,
    lock: { check: () => undefined },
    retention: new Retention(NO_RETENTION),
    logger: pino({ level: "silent" }),
    metrics: new CompactorMetrics(),
    writer: "compactor-bench",
    minSegmentsToCompact: 2,
    maxSegmentChunks: 200_000,
    garbageGracePeriodMs: 86_400_000,
    now: Date.now,
  });
  const compactMs = performance.now() - t0;
  const after = await plan(store);
  if (after.chunks !== before.chunks) throw new Error(`chunks ${before.chunks} → ${after.chunks}`);
  console.log(
    `\nstore ${values.store}: one day of ${SEGMENTS} segments × ${SERIES} series × 2 chunks`,
  );
  console.log(
    "| index | segments | chunk refs | index read, sequential gets (ms) | parallel gets, as the querier (ms) |",
  );
  console.log("|---|---:|---:|---:|---:|");
  for (const [name, r] of [
    ["before compaction", before],
    ["after compaction", after],
  ] as const) {
    console.log(
      `| ${name} | ${r.segments} | ${r.chunks} | ${r.ms.toFixed(1)} | ${r.parallelMs.toFixed(1)} |`,
    );
  }
  console.log(
    `\ncompaction run: ${compactMs.toFixed(0)} ms (${report.segmentsCompacted} segments merged)`,
  );
  const dir = new URL("../../../bench/results/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL(
    `compactor-planning-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
    dir,
  );
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
  writeFileSync(
    file,
    JSON.stringify(
      {
        benchmark: "compactor-planning",
        store: values.store,
        segments: SEGMENTS,
        series: SERIES,
        runs: RUNS,
        machine,
        before,
        after,
        compactMs,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${file.pathname}`);
} finally {
  await close();
}
