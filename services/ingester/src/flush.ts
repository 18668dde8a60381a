/**
 * One partition flush, in the order that keeps readers and replays right:
 *
 *   1. chunk objects            (content-addressed: writing one twice is harmless)
 *   2. bloom blocks             (one per tenant, many series each)
 *   3. the flush manifest       (_ingester/partitions/<p>/<seq>: segment keys + per-stream offsets)
 *   4. index segments           (now the chunks are visible to queriers)
 *   5. commit the queue offset  (done by the caller, ingester.ts)
 *
 * A reader never sees an index entry whose chunk or bloom is missing (1, 2 before 4). A
 * crash before 3 leaves only unreferenced objects; the records are replayed. A crash
 * between 3 and 5 leaves a manifest that {@link recoverPartition} reads when the partition
 * is assigned again: if every segment it lists exists, the flush happened and replayed
 * records of its streams up to its offsets are skipped; if not, the segments that exist are
 * deleted (the records are still in the queue, uncommitted) and everything is replayed.
 */
import type { EncodedChunk } from "@sieve/chunk";
import { chunkKey } from "@sieve/chunk";
import {
  dayOf,
  dayString,
  encodeBloomBlock,
  encodeSegment,
  newSegmentId,
  segmentKey,
  segmentsForFlush,
} from "@sieve/index";
import type {
  BloomBlockInput,
  BloomLocation,
  SegmentChunk,
  SegmentSeries,
  SeriesBloom,
} from "@sieve/index";
import { isNotFound } from "@sieve/storage";
import type { ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import type { FlushReason } from "./head.js";
import {
  decodeManifest,
  encodeManifest,
  manifestKey,
  manifestMaxOffset,
  manifestPrefix,
  manifestSeq,
} from "./manifest.js";
import type { FlushManifest, ManifestStream } from "./manifest.js";
import type { IngesterMetrics } from "./metrics.js";

/** What the flush needs of an object store. */
export type FlushStore = Pick<ObjectStore, "put" | "get" | "head" | "list" | "delete">;

/** A head chunk after its cut: encoded, with the queue offsets its entries came from. */
export interface CutChunk {
  readonly encoded: EncodedChunk;
  /** Lowest and highest offsets of the records whose entries it holds. */
  readonly firstOffset: number;
  readonly lastOffset: number;
  readonly reason: FlushReason;
}

/** One stream's share of a flush: its cut chunks and the bloom covering them. */
export interface FlushStream {
  readonly tenant: string;
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly chunks: readonly CutChunk[];
  /** The series' bloom of these chunks; undefined when blooms are off for the tenant. */
  readonly bloom: SeriesBloom | undefined;
}

/** Everything one partition flush writes; immutable, so a failed attempt is retried as is. */
export interface FlushJob {
  readonly partition: number;
  readonly seq: number;
  readonly streams: readonly FlushStream[];
  /** Segment and bloom-block id, fixed when the job is made so retries overwrite. */
  readonly id: string;
  readonly createdMs: number;
}

/** What a finished flush wrote, for metrics, logs and manifest deletion. */
export interface FlushResult {
  readonly manifestKey: string;
  readonly maxOffset: number;
  readonly chunks: number;
  readonly chunkBytes: number;
  readonly bloomBytes: number;
  readonly segments: number;
}

/** Runs `tasks` with at most `limit` in flight; rejects with the first failure. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Makes the segment/bloom id of a job: time-sorted, unique per writer. */
export function flushId(writer: string, nowMs: number, sequence: number): string {
  return newSegmentId(writer, nowMs, sequence >>> 0);
}

/** The key of a bloom block: `<tenant>/blooms/<YYYY-MM-DD>/<id>` (day of the flush). */
export function bloomBlockKey(tenant: string, nowMs: number, id: string): string {
  return `${tenant}/blooms/${dayString(dayOf(BigInt(nowMs) * 1_000_000n))}/${id}`;
}

/**
 * Writes steps 1–4 of a job (see the top of this file). Idempotent: every key is fixed by
 * the job, so a retry after a failure rewrites the same objects.
 */
export async function writeFlush(
  job: FlushJob,
  store: FlushStore,
  writer: string,
  writeConcurrency: number,
  metrics?: IngesterMetrics,
): Promise<FlushResult> {
  let chunkBytes = 0;
  const chunkWrites: { key: string; bytes: Uint8Array }[] = [];
  for (const s of job.streams) {
    for (const c of s.chunks) {
      const { from, through, checksum } = c.encoded;
      const key = chunkKey({
        tenant: s.tenant,
        fingerprint: s.fingerprint,
        from,
        through,
        checksum,
      });
      chunkWrites.push({ key, bytes: c.encoded.bytes });
      chunkBytes += c.encoded.bytes.length;
    }
  }
  await pool(chunkWrites, writeConcurrency, ({ key, bytes }) => store.put(key, bytes));

  const byTenant = new Map<string, FlushStream[]>();
  for (const s of job.streams) {
    let list = byTenant.get(s.tenant);
    if (list === undefined) byTenant.set(s.tenant, (list = []));
    list.push(s);
  }
  let bloomBytes = 0;
  const blooms: string[] = [];
  const segments: { key: string; bytes: Uint8Array }[] = [];
  const bloomWrites: { key: string; bytes: Uint8Array }[] = [];
  for (const [tenant, streams] of byTenant) {
    const inputs: BloomBlockInput[] = [];
    for (const s of streams) {
      if (s.bloom?.status === "ok") {
        inputs.push({ fingerprint: s.fingerprint, filter: s.bloom.filter, chunks: s.bloom.chunks });
      }
    }
    const locations = new Map<bigint, BloomLocation>();
    if (inputs.length > 0) {
      const key = bloomBlockKey(tenant, job.createdMs, job.id);
      const block = encodeBloomBlock(inputs);
      for (const e of block.entries) {
        locations.set(e.fingerprint, { kind: "block", key, offset: e.offset, length: e.length });
      }
      bloomWrites.push({ key, bytes: block.bytes });
      blooms.push(key);
      bloomBytes += block.bytes.length;
    }
    const series: SegmentSeries[] = streams.map((s) => {
      const prefixed = new Set<string>();
      if (s.bloom?.status === "ok") {
        for (const c of s.bloom.chunks)
          if (c.prefixed) prefixed.add(`${c.from}-${c.through}-${c.checksum}`);
      }
      const chunks: SegmentChunk[] = s.chunks.map((c) => ({
        from: c.encoded.from,
        through: c.encoded.through,
        checksum: c.encoded.checksum,
        bytes: c.encoded.bytes.length,
        entries: c.encoded.entryCount,
        prefixed: prefixed.has(`${c.encoded.from}-${c.encoded.through}-${c.encoded.checksum}`),
      }));
      const bloom: BloomLocation =
        locations.get(s.fingerprint) ??
        (s.bloom === undefined
          ? { kind: "missing", reason: "disabled" }
          : s.bloom.status === "missing"
            ? { kind: "missing", reason: s.bloom.reason }
            : { kind: "missing", reason: "too_large" });
      return { fingerprint: s.fingerprint, labels: s.labels, bloom, chunks };
    });
    for (const segment of segmentsForFlush(tenant, series)) {
      segments.push({
        key: segmentKey(tenant, segment.day, job.id),
        bytes: encodeSegment(segment),
      });
    }
  }
  await pool(bloomWrites, writeConcurrency, ({ key, bytes }) => store.put(key, bytes));

  const streams: ManifestStream[] = job.streams.map((s) => ({
    tenant: s.tenant,
    fingerprint: s.fingerprint,
    maxOffset: Math.max(...s.chunks.map((c) => c.lastOffset)),
  }));
  const manifest: FlushManifest = {
    partition: job.partition,
    seq: job.seq,
    writer,
    createdMs: job.createdMs,
    segments: segments.map((s) => s.key),
    blooms,
    streams,
  };
  const key = manifestKey(job.partition, job.seq);
  await store.put(key, encodeManifest(manifest));
  await pool(segments, writeConcurrency, ({ key: k, bytes }) => store.put(k, bytes));
  if (metrics !== undefined) {
    metrics.bloomBytes.inc(bloomBytes);
    metrics.segmentsWritten.inc(segments.length);
  }
  return {
    manifestKey: key,
    maxOffset: manifestMaxOffset(manifest),
    chunks: chunkWrites.length,
    chunkBytes,
    bloomBytes,
    segments: segments.length,
  };
}

/** A manifest kept after recovery, until the committed offset passes it. */
export interface KeptManifest {
  readonly key: string;
  readonly maxOffset: number;
}

/** Options of {@link recoverPartition}. */
export interface RecoveryOptions {
  /** This ingester's instanceId: its own incomplete manifests are from a crash, never waited for. */
  readonly writer?: string;
  /** How long another writer's incomplete manifest may take to complete, from its creation. */
  readonly graceMs?: number;
  readonly now?: () => number;
}

async function presentSegments(store: FlushStore, m: FlushManifest): Promise<string[]> {
  const present: string[] = [];
  for (const s of m.segments) if (await exists(store, s)) present.push(s);
  return present;
}

/** What {@link recoverPartition} found. */
export interface Recovery {
  /** Per stream (`streamKey`), the highest offset already in visible chunks: skip up to it. */
  readonly skip: Map<string, number>;
  /** Complete manifests, to delete once the commit passes them. */
  readonly kept: KeptManifest[];
  /** The seq the partition's next manifest takes. */
  readonly nextSeq: number;
  readonly complete: number;
  readonly rolledBack: number;
}

/** The key of a stream in the ingester's maps: tenant and fingerprint. */
export function streamKey(tenant: string, fingerprint: bigint): string {
  return `${tenant}\u0000${fingerprint.toString(16)}`;
}

async function exists(store: FlushStore, key: string): Promise<boolean> {
  try {
    await store.head(key);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

/**
 * Reads partition `partition`'s manifests (oldest first). A complete one (every segment
 * present) adds its streams' offsets to the skip map; an incomplete one has its present
 * segments and then itself deleted, so the chunks it meant to publish stay invisible and
 * the records, never committed, are replayed into new chunks. A damaged manifest is
 * treated as incomplete with no segments known: its segments (if any) were never written,
 * because segments are written only after the manifest's put succeeded.
 */
export async function recoverPartition(
  store: FlushStore,
  partition: number,
  logger: Logger,
  options: RecoveryOptions = {},
): Promise<Recovery> {
  const graceMs = options.graceMs ?? 0;
  const now = options.now ?? Date.now;
  const keys = (await store.list(manifestPrefix(partition)))
    .map((key) => ({ key, seq: manifestSeq(partition, key) }))
    .filter((k): k is { key: string; seq: number } => k.seq !== undefined)
    .sort((a, b) => a.seq - b.seq);
  const skip = new Map<string, number>();
  const kept: KeptManifest[] = [];
  let nextSeq = 0;
  let complete = 0;
  let rolledBack = 0;
  for (const { key, seq } of keys) {
    nextSeq = Math.max(nextSeq, seq + 1);
    let manifest: FlushManifest | undefined;
    try {
      manifest = decodeManifest(await store.get(key));
    } catch (error) {
      if (isNotFound(error)) continue;
      logger.warn({ key, err: error }, "damaged flush manifest: rolled back");
    }
    let present: string[] = [];
    if (manifest !== undefined) {
      present = await presentSegments(store, manifest);
      // Another ingester's flush in progress (a Kafka rebalance: the old owner flushes the
      // partition it lost): give it a moment to finish before calling it incomplete.
      const m = manifest;
      while (
        present.length < m.segments.length &&
        m.writer !== options.writer &&
        now() - m.createdMs < graceMs
      ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        present = await presentSegments(store, m);
      }
    }
    if (manifest !== undefined && present.length === manifest.segments.length) {
      complete++;
      for (const s of manifest.streams) {
        const k = streamKey(s.tenant, s.fingerprint);
        skip.set(k, Math.max(skip.get(k) ?? -1, s.maxOffset));
      }
      kept.push({ key, maxOffset: manifestMaxOffset(manifest) });
    } else {
      rolledBack++;
      for (const s of present) await store.delete(s);
      await store.delete(key);
      logger.info(
        { key, partition, segmentsDeleted: present.length },
        "incomplete flush rolled back; its records are replayed",
      );
    }
  }
  return { skip, kept, nextSeq, complete, rolledBack };
}
