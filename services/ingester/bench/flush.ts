/**
 * `pnpm --filter @sieve/ingester bench:flush`: the cost of one partition flush's writes
 * (chunks, bloom block, manifest, ownership decision, index segments), measured alone: K
 * small flushes of one partition in a row (16 streams of one small chunk each, as idle heads
 * are cut), on the file-system store and, when S3_ENDPOINT is set, on S3 (MinIO), half of
 * them with the decision and half without. What the fence adds to a flush is one small
 * conditional write; this shows it against everything else a flush writes.
 *
 *   BENCH_FLUSHES (default 200), BENCH_STREAMS (default 16)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { ChunkBuilder } from "@sieve/chunk";
import { SeriesBloomBuilder } from "@sieve/index";
import { fingerprint } from "@sieve/labels";
import { FsObjectStore, S3ObjectStore } from "@sieve/storage";
import type { ObjectStore } from "@sieve/storage";
import pino from "pino";
import { writeFlush } from "../src/flush.js";
import type { FlushFence, FlushJob, FlushStream } from "../src/flush.js";
import { claimPartition } from "../src/ownership.js";
import type { FlushRef } from "../src/ownership.js";

const FLUSHES = Number(process.env.BENCH_FLUSHES ?? 200);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 16);
const T0 = BigInt(Date.now()) * 1_000_000n;
const logger = pino({ level: "silent" });

/** Flush `k` of the partition: every stream with one chunk of 40 lines. */
function job(k: number): FlushJob {
  const streams: FlushStream[] = [];
  for (let s = 0; s < STREAMS; s++) {
    const labels = `{app="bench", stream="${s}"}`;
    const bloom = new SeriesBloomBuilder();
    const builder = new ChunkBuilder();
    for (let i = 0; i < 40; i++) {
      const md = [{ name: "trace_id", value: `${k}-${s}-${i % 8}` }];
      builder.append({
        timestamp: T0 + BigInt(k * 1000 + i),
        line: `GET /api/v1/users/${k * 40 + i} 200 ${i} ms stream=${s} ${"x".repeat(60)}`,
        structuredMetadata: md,
      });
      bloom.add(md);
    }
    const encoded = builder.encode();
    bloom.cut(encoded);
    const offset = k * STREAMS + s;
    streams.push({
      tenant: "bench",
      labels,
      fingerprint: fingerprint(labels),
      chunks: [{ encoded, firstOffset: offset, lastOffset: offset, reason: "idle" }],
      bloom: bloom.finish(),
    });
  }
  return {
    partition: 0,
    seq: k,
    streams,
    id: `${String(1_700_000_000_000 + k).padStart(15, "0")}-bench-${String(k).padStart(8, "0")}`,
    createdMs: Date.now(),
  };
}

/** Counts the store's requests by kind, and the time spent in them, while it passes them on. */
function counting(inner: ObjectStore): {
  store: ObjectStore;
  counts: Map<string, number>;
  ms: Map<string, number>;
} {
  const counts = new Map<string, number>();
  const ms = new Map<string, number>();
  const timed = async <T>(kind: string, call: () => Promise<T>): Promise<T> => {
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
    const started = performance.now();
    try {
      return await call();
    } finally {
      ms.set(kind, (ms.get(kind) ?? 0) + performance.now() - started);
    }
  };
  const store: ObjectStore = {
    get: (k, o) => timed("get", () => inner.get(k, o)),
    getRange: (k, a, b, o) => timed("getRange", () => inner.getRange(k, a, b, o)),
    getTail: (k, n, o) => timed("getTail", () => inner.getTail(k, n, o)),
    head: (k, o) => timed("head", () => inner.head(k, o)),
    put: (k, d, o) => timed("put", () => inner.put(k, d, o)),
    getTagged: (k, o) => timed("getTagged", () => inner.getTagged(k, o)),
    putIf: (k, d, c, o) => timed("putIf", () => inner.putIf(k, d, c, o)),
    list: (p, o) => timed("list", () => inner.list(p, o)),
    listInfo: (p, o) => timed("listInfo", () => inner.listInfo(p, o)),
    listPrefixes: (p, o) => timed("listPrefixes", () => inner.listPrefixes(p, o)),
    delete: (k, o) => timed("delete", () => inner.delete(k, o)),
  };
  return { store, counts, ms };
}

/** Mean, median and 95th percentile of `xs`, in ms. */
function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const p = (q: number): string => s[Math.min(s.length - 1, Math.floor(s.length * q))]!.toFixed(2);
  return `${mean.toFixed(2)} | ${p(0.5)} | ${p(0.95)}`;
}

/**
 * Flushes with the decision and without it (a fence that decides nothing: the flush path
 * before ownership records), alternating in blocks of ten so that the load of a shared
 * machine falls on both alike.
 */
async function measure(name: string, inner: ObjectStore): Promise<void> {
  const jobs = Array.from({ length: FLUSHES }, (_, k) => job(k));
  const { store, counts, ms } = counting(inner);
  const owner = await claimPartition(store, 0, "bench", logger);
  // Every earlier flush committed, as when the queue keeps up: the record lists one flush.
  const fenced: FlushFence = {
    epoch: owner.epoch,
    decide: (ref: FlushRef) => owner.decide(ref, ref.maxOffset),
  };
  const unfenced: FlushFence = { epoch: owner.epoch, decide: () => Promise.resolve([]) };
  counts.clear();
  ms.clear();
  const times = { fenced: [] as number[], unfenced: [] as number[] };
  for (let k = 0; k < jobs.length; k++) {
    const variant = Math.floor(k / 10) % 2 === 0 ? "fenced" : "unfenced";
    const started = performance.now();
    await writeFlush(jobs[k]!, store, "bench", variant === "fenced" ? fenced : unfenced, 8);
    times[variant].push(performance.now() - started);
  }
  const decisions = counts.get("putIf") ?? 0;
  // The decision is the flush's only conditional write, and nothing runs beside it.
  const decision = (ms.get("putIf") ?? 0) / decisions;
  const puts = (counts.get("put") ?? 0) / jobs.length;
  for (const variant of ["unfenced", "fenced"] as const) {
    console.log(
      `| ${name} | ${variant === "fenced" ? "with" : "without"} | ${times[variant].length} | ${summary(times[variant])} | ${variant === "fenced" ? decision.toFixed(2) : "-"} | put ${puts}${variant === "fenced" ? ", putIf 1" : ""} |`,
    );
  }
}

console.log(`${STREAMS} streams a flush, one 40-line chunk each\n`);
console.log(
  "| store | decision | flushes | mean ms | median ms | p95 ms | decision ms (mean) | requests per flush |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
const dir = await mkdtemp(join(tmpdir(), "sieve-bench-flush-"));
try {
  await measure("file system", new FsObjectStore(dir));
} finally {
  await rm(dir, { recursive: true, force: true });
}
const endpoint = process.env.S3_ENDPOINT;
if (endpoint !== undefined && endpoint !== "") {
  const bucket = `sieve-bench-flush-${Date.now()}`;
  const s3 = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
  await s3.client.send(new CreateBucketCommand({ Bucket: bucket }));
  try {
    await measure("S3 (MinIO)", s3);
  } finally {
    s3.close();
  }
}
