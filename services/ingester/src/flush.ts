/**
 * Flushing (Loki's `pkg/ingester/flush.go`): when a partition's cut chunks are written
 * ({@link Flusher}: the periodic sweep, the flush loop, retries, the commit) and what one
 * flush writes, in the order that keeps readers and replays right ({@link writeFlush}):
 *
 *   1. chunk objects            (content-addressed: writing one twice is harmless)
 *   2. bloom blocks             (one per tenant, many series each)
 *   3. the flush manifest       (_ingester/partitions/<p>/<seq>: segment keys + per-stream offsets)
 *   4. index segments           (now the chunks are visible to queriers)
 *   5. commit the queue offset  (`Flusher.commit`)
 *
 * A reader never sees an index entry whose chunk or bloom is missing (1, 2 before 4). A
 * crash before 3 leaves only unreferenced objects; the records are replayed. A crash
 * between 3 and 5 leaves a manifest that `recoverPartition` (recovery.ts) reads when the
 * partition is assigned again: if every segment it lists exists, the flush happened and
 * replayed records of its streams up to its offsets are skipped; if not, the segments that
 * exist are deleted (the records are still in the queue, uncommitted) and everything is
 * replayed.
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
import { isRetriable, mapLimit, retryRetriable } from "@sieve/kit";
import type { ObjectStore } from "@sieve/storage";
import pLimit from "p-limit";
import type { Logger } from "pino";
import type { IngesterConfig } from "./config.js";
import type { FlushReason } from "./head.js";
import { asRetryable } from "./health.js";
import type { Health } from "./health.js";
import { encodeManifest, manifestKey, manifestMaxOffset } from "./manifest.js";
import type { FlushManifest, ManifestStream } from "./manifest.js";
import type { IngesterMetrics } from "./metrics.js";
import { cutHead, evictIfEmpty, flushAgain, safeOffset } from "./partitions.js";
import type { PartitionState } from "./partitions.js";
import { streamKey } from "./stream.js";

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

/** What flush scheduling needs of the ingester, passed in. */
export interface FlusherDeps {
  readonly config: Pick<
    IngesterConfig,
    | "instanceId"
    | "chunkIdleMs"
    | "chunkMaxAgeMs"
    | "flushConcurrency"
    | "flushWriteConcurrency"
    | "flushRetryMaxBackoffMs"
  >;
  readonly store: FlushStore;
  /** The partitions owned now (the ingester's map, read as it changes). */
  readonly partitions: ReadonlyMap<number, PartitionState>;
  /** Commits a partition's offset to the queue (the consumer's `commit`). */
  readonly commit: (partition: number, offset: number) => Promise<void>;
  readonly health: Pick<Health, "failed" | "recovered">;
  readonly logger: Logger;
  readonly metrics: IngesterMetrics;
  readonly now: () => number;
  /** Whether the ingester is stopping (a graceful stop still deletes manifests, see commit). */
  readonly stopping: () => boolean;
  /**
   * The writer part of segment and bloom-block ids: `instanceId`, unless several ingesters
   * of one process (worker threads) share it, each with its own ids.
   */
  readonly idWriter: string;
}

/**
 * When flushes run. The periodic {@link Flusher.sweep} cuts idle and old heads (a full head
 * is cut as it fills, in stream.ts; forced, shutdown and revoked ones by the ingester).
 * Each partition flushes its cut chunks one job at a time ({@link Flusher.flushPartition}),
 * `flushConcurrency` partitions at once; a job failing on the object store is retried with
 * backoff and jitter, a non-retriable failure halts the partition's flushes until a
 * restart (which replays it); each flush ends with the commit of the partition's safe
 * offset.
 */
export class Flusher {
  /**
   * At most `flushConcurrency` jobs write at once, first come first served: p-limit (the
   * library under kit's `mapLimit`) as a semaphore, since jobs arrive one by one.
   */
  private readonly flushSlots: ReturnType<typeof pLimit>;
  private idSequence = 0;

  constructor(private readonly deps: FlusherDeps) {
    this.flushSlots = pLimit(deps.config.flushConcurrency);
  }

  /** The periodic check: idle and old heads are cut and flushed; idle partitions commit. */
  async sweep(): Promise<void> {
    const { config, partitions } = this.deps;
    const now = this.deps.now();
    const work: Promise<void>[] = [];
    for (const p of partitions.values()) {
      if (p.revoked || p.flushHalted !== undefined) continue;
      for (const s of p.streams.values()) {
        const h = s.head;
        if (h === undefined || h.entryCount === 0) continue;
        if (now - h.lastAppendMs >= config.chunkIdleMs) cutHead(p, s, "idle");
        else if (now - h.createdMs >= config.chunkMaxAgeMs) cutHead(p, s, "max_age");
      }
      // Flushing also commits, so commits of a partition never run concurrently.
      if (p.pendingBytes > 0 || p.nextOffset > p.committed) work.push(this.flushPartition(p));
    }
    this.updateGauges();
    await Promise.all(work);
  }

  /** Flushes the partition's pending chunks, repeating while more arrive; one run at a time. */
  flushPartition(p: PartitionState): Promise<void> {
    // Stopped on a non-retriable error: nothing is committed past it until a restart.
    if (p.flushHalted !== undefined) return Promise.reject(p.flushHalted);
    if (p.flushing !== undefined) {
      p.again = true;
      return p.flushing;
    }
    const run = async (): Promise<void> => {
      try {
        do {
          p.again = false;
          const job = this.makeJob(p);
          if (job !== undefined) await this.runJob(p, job);
          await this.commit(p);
        } while (flushAgain(p));
      } finally {
        p.flushing = undefined;
      }
    };
    p.flushing = run();
    return p.flushing;
  }

  /** Deletes the partition's manifests wholly below `offset` (nothing at or below them is replayed). */
  async deleteManifestsBelow(p: PartitionState, offset: number): Promise<void> {
    const done = p.kept.filter((m) => m.maxOffset < offset);
    if (done.length === 0) return;
    p.kept = p.kept.filter((m) => m.maxOffset >= offset);
    try {
      await mapLimit(done, this.deps.config.flushWriteConcurrency, (m) =>
        this.deps.store.delete(m.key),
      );
    } catch (error) {
      this.deps.logger.warn({ partition: p.partition, err: error }, "manifest deletion failed");
    }
  }

  /** Sets the gauges of what is in memory: open heads, chunks cut and flushing. */
  updateGauges(): void {
    let heads = 0;
    let flushing = 0;
    for (const p of this.deps.partitions.values()) {
      for (const s of p.streams.values()) {
        if (s.head !== undefined && s.head.entryCount > 0) heads++;
        flushing += s.pending.length + s.flushing.length;
      }
    }
    this.deps.metrics.headsInMemory.set(heads);
    this.deps.metrics.chunksFlushing.set(flushing);
  }

  private makeJob(p: PartitionState): FlushJob | undefined {
    const streams: FlushStream[] = [];
    for (const s of p.streams.values()) {
      if (s.pending.length === 0) continue;
      s.flushing = s.pending;
      s.pending = [];
      streams.push({
        tenant: s.tenant,
        labels: s.labels,
        fingerprint: s.fingerprint,
        chunks: s.flushing,
        bloom: s.bloom?.finish(),
      });
    }
    if (streams.length === 0) return undefined;
    const createdMs = this.deps.now();
    return {
      partition: p.partition,
      seq: p.nextSeq++,
      streams,
      id: flushId(this.deps.idWriter, createdMs, this.idSequence++),
      createdMs,
    };
  }

  private async runJob(p: PartitionState, job: FlushJob): Promise<void> {
    await this.flushSlots(() => this.writeJob(p, job));
    for (const fs of job.streams) {
      const s = p.streams.get(streamKey(fs.tenant, fs.fingerprint));
      if (s === undefined) continue;
      for (const c of s.flushing) p.pendingBytes -= c.encoded.bytes.length;
      s.flushing = [];
    }
    this.updateGauges();
  }

  /** Writes a job (holding a flush slot), retrying while the store may come back. */
  private async writeJob(p: PartitionState, job: FlushJob): Promise<void> {
    const { config, metrics, health, logger } = this.deps;
    const started = performance.now();
    try {
      // Retried with exponential backoff and jitter while the store may come back; a
      // programming error or a request the store refuses is final (see health.ts).
      const result = await retryRetriable(
        async () => {
          try {
            return await writeFlush(
              job,
              this.deps.store,
              config.instanceId,
              config.flushWriteConcurrency,
              metrics,
            );
          } catch (error) {
            throw asRetryable(error);
          }
        },
        {
          minBackoffMs: 100,
          maxBackoffMs: config.flushRetryMaxBackoffMs,
          onFailure: (error, attempt, retrying) => {
            metrics.flushFailures.inc();
            health.failed("flush", p.partition, error, retrying, attempt);
          },
        },
      );
      health.recovered(p.partition, ["flush"]);
      p.kept.push({ key: result.manifestKey, maxOffset: result.maxOffset });
      metrics.flushDuration.observe({ outcome: "ok" }, (performance.now() - started) / 1000);
      const reasons = metrics.flushed(job.streams);
      logger.debug({ partition: p.partition, seq: job.seq, ...result, reasons }, "flushed");
    } catch (error) {
      // Final: the job's chunks stay in memory (queries still read them) and nothing is
      // committed past them, so a restart replays their records; /ready says why.
      if (!isRetriable(error)) {
        p.flushHalted = error instanceof Error ? error : new Error(String(error));
      }
      metrics.flushDuration.observe({ outcome: "failed" }, (performance.now() - started) / 1000);
      throw error;
    }
  }

  /** Commits the partition's safe offset if it moved, then deletes manifests below it. */
  private async commit(p: PartitionState): Promise<void> {
    if (p.nextOffset < 0) return;
    const offset = safeOffset(p);
    if (offset > p.committed) {
      await this.deps.commit(p.partition, offset);
      p.committed = offset;
    }
    this.deps.metrics.queueLag.set({ partition: String(p.partition) }, p.nextOffset - p.committed);
    // Streams with nothing in memory go (their bloom builder too): what a replay needs to
    // stay exactly-once is the partition's skip map and manifests, not the stream state.
    for (const s of [...p.streams.values()]) evictIfEmpty(p, s);
    if (p.skipMax >= 0 && p.committed > p.skipMax) {
      p.skip = new Map();
      p.skipMax = -1;
    }
    // Not after a revocation: Kafka may hand the partition out again (even back to us) from
    // the commit before this one, as the new assignment's start offsets can be fetched while
    // this commit is in flight; its replay then needs the manifests. The next owner deletes
    // them once it sees where it resumed (deleteManifestsBelow).
    // A graceful stop commits while still a member (the consumer revokes before leaving), so
    // its commit is where the next owner resumes.
    if (!p.revoked || this.deps.stopping()) await this.deleteManifestsBelow(p, p.committed);
  }
}

/** Makes the segment/bloom id of a job: time-sorted, unique per writer. */
function flushId(writer: string, nowMs: number, sequence: number): string {
  return newSegmentId(writer, nowMs, sequence >>> 0);
}

/** The key of a bloom block: `<tenant>/blooms/<YYYY-MM-DD>/<id>` (day of the flush). */
function bloomBlockKey(tenant: string, nowMs: number, id: string): string {
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
  await mapLimit(chunkWrites, writeConcurrency, ({ key, bytes }) => store.put(key, bytes));

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
        const { filter, chunks, ngrams, metadataTokens } = s.bloom;
        inputs.push({ fingerprint: s.fingerprint, filter, chunks, ngrams, metadataTokens });
      }
    }
    const locations = new Map<bigint, BloomLocation>();
    if (inputs.length > 0) {
      const key = bloomBlockKey(tenant, job.createdMs, job.id);
      const block = encodeBloomBlock(inputs);
      const inputOf = new Map(inputs.map((i) => [i.fingerprint, i]));
      for (const e of block.entries) {
        // The segment repeats what a querier plans with: the record's n-grams and tokens.
        const { ngrams, metadataTokens } = inputOf.get(e.fingerprint)!;
        const all = metadataTokens === undefined || (metadataTokens.keys && metadataTokens.values);
        locations.set(e.fingerprint, {
          kind: "block",
          key,
          offset: e.offset,
          length: e.length,
          ...(ngrams !== undefined && { ngrams }),
          ...(!all && { metadataTokens }),
        });
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
        lineBytes: c.encoded.lineBytes,
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
  await mapLimit(bloomWrites, writeConcurrency, ({ key, bytes }) => store.put(key, bytes));

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
  await mapLimit(segments, writeConcurrency, ({ key: k, bytes }) => store.put(k, bytes));
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
