/**
 * `pnpm --filter @sieve/ingester bench:flush`: the cost of one partition flush's writes
 * (chunks, bloom block, manifest, ownership fence, index segments), measured alone: K small
 * flushes of one partition in a row (16 streams of one 4 KB chunk each, as idle heads are
 * cut), on the file-system store and, when S3_ENDPOINT is set, on S3 (MinIO). What the
 * ownership fence adds to a flush is one small conditional write; this shows it against
 * everything else a flush writes.
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
import type { FlushJob, FlushStream } from "../src/flush.js";
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

/** Counts the store's requests by kind while it passes them on. */
function counting(inner: ObjectStore): { store: ObjectStore; counts: Map<string, number> } {
  const counts = new Map<string, number>();
  const count = (kind: string): void => void counts.set(kind, (counts.get(kind) ?? 0) + 1);
  const store: ObjectStore = {
    get: (k, o) => (count("get"), inner.get(k, o)),
    getRange: (k, a, b, o) => (count("getRange"), inner.getRange(k, a, b, o)),
    head: (k, o) => (count("head"), inner.head(k, o)),
    put: (k, d, o) => (count("put"), inner.put(k, d, o)),
    getTagged: (k, o) => (count("getTagged"), inner.getTagged(k, o)),
    putIf: (k, d, c, o) => (count("putIf"), inner.putIf(k, d, c, o)),
    list: (p, o) => (count("list"), inner.list(p, o)),
    delete: (k, o) => (count("delete"), inner.delete(k, o)),
  };
  return { store, counts };
}

async function measure(name: string, inner: ObjectStore): Promise<void> {
  const jobs = Array.from({ length: FLUSHES }, (_, k) => job(k));
  const { store, counts } = counting(inner);
  const owner = await claimPartition(store, 0, "bench", logger);
  // Every earlier flush committed, as when the queue keeps up: the record lists one flush.
  const fence = { epoch: owner.epoch, decide: (ref: FlushRef) => owner.decide(ref, ref.maxOffset) };
  counts.clear();
  const times: number[] = [];
  for (const j of jobs) {
    const started = performance.now();
    await writeFlush(j, store, "bench", fence, 8);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  const per = [...counts].map(([k, n]) => `${k} ${(n / FLUSHES).toFixed(2)}`).join(", ");
  console.log(
    `| ${name} | ${FLUSHES} | ${mean.toFixed(2)} | ${times[times.length >> 1]!.toFixed(2)} | ${times[Math.floor(times.length * 0.95)]!.toFixed(2)} | ${per} |`,
  );
}

console.log(`${STREAMS} streams a flush, one 40-line chunk each\n`);
console.log("| store | flushes | mean ms | median ms | p95 ms | requests per flush |");
console.log("| --- | --- | --- | --- | --- | --- |");
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
