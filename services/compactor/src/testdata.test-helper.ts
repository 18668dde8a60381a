/**
 * Test data written the way an ingester flush writes it, with the real libraries and the
 * real key layout: chunk objects, one bloom block `<tenant>/blooms/<day>/<id>`, then one
 * index segment per day. A reader of the store's lines and a consistency check.
 */
import { randomBytes } from "node:crypto";
import { mapLimit } from "@sieve/kit";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { ChunkReader, chunkKey, encodeChunk, type Entry } from "@sieve/chunk";
import {
  SeriesBloomBuilder,
  dayOf,
  dayString,
  encodeBloomBlock,
  encodeSegment,
  newSegmentId,
  readIndex,
  segmentKey,
  segmentsForFlush,
  type BloomBlockInput,
  type SegmentSeries,
} from "@sieve/index";
import { fingerprint, labelsFromObject, labelsString } from "@sieve/labels";
import { FsObjectStore, S3ObjectStore, type ObjectStore } from "@sieve/storage";
import pino from "pino";

export const NS_PER_MS = 1_000_000n;
export const DAY_MS = 86_400_000;
export const HOUR_NS = 3_600_000_000_000n;

/**
 * The start of `widthNs` of data that ends by `endNs` on one UTC day: on the end's day if
 * it fits there, else ending just before that day's midnight. The index is written a
 * segment per day, so data across midnight would double a test's segment counts when the
 * suite runs in the hours after midnight.
 */
export function oneDayWindow(endNs: bigint, widthNs: bigint): bigint {
  const midnight = BigInt(dayOf(endNs)) * BigInt(DAY_MS) * NS_PER_MS;
  return endNs - widthNs >= midnight ? endNs - widthNs : midnight - widthNs - 1n;
}

/** A logger that says nothing (set SIEVE_TEST_LOG=debug to see the compactor's logs). */
export const quiet = pino({ level: process.env.SIEVE_TEST_LOG ?? "silent" });

/** A stream to write: its labels and entries (any order). */
export interface TestStream {
  readonly labels: Record<string, string>;
  readonly entries: readonly Entry[];
}

/** What one flush wrote. */
export interface Flushed {
  readonly chunks: string[];
  readonly bloom: string;
  readonly segments: string[];
}

/** Options of {@link writeFlush}. */
export interface FlushOptions {
  readonly entriesPerChunk?: number;
  /** The flush's writer name and sequence (ids must differ between flushes). */
  readonly writer?: string;
  readonly sequence?: number;
  /** The time of the flush, Unix ms (names the bloom block's day and the ids). */
  readonly nowMs?: number;
  /** Leave out the index segments (a flush that crashed before them). */
  readonly noSegments?: boolean;
  /** The chunks' block target, bytes (1024). */
  readonly blockTargetBytes?: number;
  /** The flush's id and bloom block key, instead of ones made from the writer and time. */
  readonly id?: string;
  readonly bloomKey?: string;
  /** Called with the segments before they are written (a flush manifest goes first). */
  readonly beforeSegments?: (
    segments: readonly { key: string; bytes: Uint8Array }[],
    bloomKey: string,
  ) => Promise<void>;
}

let flushes = 0;

/** Writes `streams` as one flush: chunk objects, a bloom block, then the day segments. */
export async function writeFlush(
  store: ObjectStore,
  tenant: string,
  streams: readonly TestStream[],
  options: FlushOptions = {},
): Promise<Flushed> {
  const per = options.entriesPerChunk ?? 50;
  const nowMs = options.nowMs ?? Date.now();
  const id =
    options.id ?? newSegmentId(options.writer ?? "test", nowMs, options.sequence ?? flushes++);
  const blooms: BloomBlockInput[] = [];
  const series: Omit<SegmentSeries, "bloom">[] = [];
  const chunks: string[] = [];
  for (const s of streams) {
    const canonical = labelsString(labelsFromObject(s.labels));
    const fp = fingerprint(canonical);
    const sorted = [...s.entries].sort((a, b) =>
      a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0,
    );
    const bloom = new SeriesBloomBuilder();
    const listed = [];
    for (let i = 0; i < sorted.length; i += per) {
      const part = sorted.slice(i, i + per);
      for (const e of part) bloom.add(e.structuredMetadata, e.line);
      const encoded = encodeChunk(part, { blockTargetBytes: options.blockTargetBytes ?? 1024 });
      const ident = { from: encoded.from, through: encoded.through, checksum: encoded.checksum };
      const key = chunkKey({ tenant, fingerprint: fp, ...ident });
      await store.put(key, encoded.bytes);
      chunks.push(key);
      bloom.cut(ident);
      listed.push({
        ...ident,
        bytes: encoded.bytes.byteLength,
        entries: encoded.entryCount,
        lineBytes: encoded.lineBytes,
      });
    }
    const finished = bloom.finish();
    if (finished?.status !== "ok") throw new Error("no bloom");
    const { filter, chunks: covered, metadataTokens } = finished;
    blooms.push({ fingerprint: fp, filter, chunks: covered, metadataTokens });
    series.push({
      fingerprint: fp,
      labels: canonical,
      chunks: listed.map((c, i) => ({ ...c, prefixed: finished.chunks[i]!.prefixed })),
    });
  }
  const block = encodeBloomBlock(blooms);
  const bloomKey =
    options.bloomKey ?? `${tenant}/blooms/${dayString(dayOf(BigInt(nowMs) * NS_PER_MS))}/${id}`;
  await store.put(bloomKey, block.bytes);
  const withBlooms: SegmentSeries[] = series.map((s) => {
    const entry = block.entries.find((e) => e.fingerprint === s.fingerprint)!;
    return {
      ...s,
      bloom: { kind: "block", key: bloomKey, offset: entry.offset, length: entry.length },
    };
  });
  if (options.noSegments === true) return { chunks, bloom: bloomKey, segments: [] };
  const written = segmentsForFlush(tenant, withBlooms).map((segment) => ({
    key: segmentKey(tenant, segment.day, id),
    bytes: encodeSegment(segment),
  }));
  await options.beforeSegments?.(written, bloomKey);
  for (const { key, bytes } of written) await store.put(key, bytes);
  return { chunks, bloom: bloomKey, segments: written.map((w) => w.key) };
}

/** `count` entries of a stream from `fromNs`, `stepNs` apart, lines naming the stream. */
export function entries(name: string, fromNs: bigint, stepNs: bigint, count: number): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    timestamp: fromNs + BigInt(i) * stepNs,
    line: `${name} line ${i} trace=${(i % 7).toString(16)}`,
    structuredMetadata: [{ name: "trace_id", value: `t${i % 13}` }],
  }));
}

/**
 * Every line the tenant's index makes visible over [from, through], as sorted
 * `labels ts line` strings, each once (the reader's merge drops doubled refs).
 */
export async function visibleLines(
  store: ObjectStore,
  tenant: string,
  from: bigint,
  through: bigint,
): Promise<string[]> {
  const out: string[] = [];
  for (const s of await readIndex(store, tenant, from, through)) {
    for (const c of s.chunks) {
      const reader = new ChunkReader(await store.get(c.key));
      for (let b = 0; b < reader.blocks.length; b++) {
        for (const e of reader.block(b)) {
          if (e.timestamp >= from && e.timestamp <= through) {
            out.push(`${s.labels} ${e.timestamp} ${e.line}`);
          }
        }
      }
    }
  }
  return out.sort();
}

/**
 * Problems of the store's index: an index entry whose chunk object or bloom block is
 * missing. Empty when consistent.
 */
export async function danglingRefs(store: ObjectStore, tenant: string): Promise<string[]> {
  const keys = new Set(await store.list(`${tenant}/`));
  const problems: string[] = [];
  const now = BigInt(Date.now()) * NS_PER_MS;
  for (const s of await readIndex(
    store,
    tenant,
    now - 300n * 86_400n * 1_000_000_000n,
    now + 86_400n * 1_000_000_000n,
  )) {
    for (const c of s.chunks) {
      if (!keys.has(c.key)) problems.push(`chunk ${c.key}`);
      if (c.bloom.kind === "block" && !keys.has(c.bloom.key)) problems.push(`bloom ${c.bloom.key}`);
    }
  }
  return problems;
}

/** A store over a new temporary directory or a new bucket of the test MinIO. */
export async function openTestStore(
  kind: "fs" | "s3",
): Promise<{ store: ObjectStore; close: () => Promise<void>; env: Record<string, string> }> {
  if (kind === "fs") {
    const dir = await mkdtemp(join(tmpdir(), "sieve-compactor-"));
    return {
      store: new FsObjectStore(dir),
      close: () => rm(dir, { recursive: true, force: true }),
      env: { TEST_STORE: "fs", TEST_STORE_DIR: dir },
    };
  }
  const endpoint = process.env.S3_ENDPOINT;
  if (endpoint === undefined || endpoint === "") {
    throw new Error("S3_ENDPOINT is not set: run with the test MinIO (see the preamble)");
  }
  const bucket = `sieve-compactor-${randomBytes(6).toString("hex")}`;
  const store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
  await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
  return {
    store,
    close: async () => {
      await mapLimit(await store.list(""), 16, (k) => store.delete(k));
      store.close();
    },
    env: { TEST_STORE: "s3", TEST_BUCKET: bucket },
  };
}

/** Opens the store a child process was told of by {@link openTestStore}'s `env`. */
export function storeFromEnv(env: NodeJS.ProcessEnv): ObjectStore {
  if (env.TEST_STORE === "s3") {
    return new S3ObjectStore({
      bucket: env.TEST_BUCKET!,
      endpoint: env.S3_ENDPOINT!,
      forcePathStyle: true,
    });
  }
  return new FsObjectStore(env.TEST_STORE_DIR!);
}
