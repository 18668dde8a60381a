/**
 * Flushing (Loki's `pkg/ingester/flush.go`): when a partition's cut chunks are written
 * ({@link Flusher}: the periodic sweep, the flush loop, retries, the commit) and what one
 * flush writes, in the order that keeps readers and replays right ({@link writeFlush}):
 *
 *   1. chunk objects            (content-addressed: writing one twice is harmless)
 *   2. bloom blocks             (one per tenant, many series each)
 *   3. the flush manifest       (_ingester/partitions/<p>/<epoch>-<seq>: segment keys and
 *                                bytes, per-stream offsets)
 *      (1, 2 and 3 are written concurrently: nothing reads any of them before 4)
 *   4. the decision             (one conditional write of _ingester/owners/<p>, ownership.ts:
 *                                refused if another ingester claimed the partition)
 *   5. index segments           (now the chunks are visible to queriers)
 *   6. commit the queue offset  (`Flusher.commit`)
 *
 * A reader never sees an index entry whose chunk or bloom is missing (1, 2 before 5). A
 * crash before 4 leaves only unreferenced objects and an undecided manifest; the records
 * are replayed. After 4 the flush is decided: whoever claims the partition next
 * (`recoverPartition`, recovery.ts) skips its streams' replayed records up to its offsets,
 * and writes its segments from the manifest if they are missing. A flush refused at 4
 * (fenced: this ingester was paused or slow past its revocation, and the partition moved)
 * makes nothing visible and commits nothing; the partition's state is dropped.
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
import { isRetriable, mapLimit, retryRetriable, type MemoryWatermark } from "@sieve/kit";
import type { ObjectStore } from "@sieve/storage";
import pLimit from "p-limit";
import type { Logger } from "pino";
import type { IngesterConfig } from "./config.js";
import type { FlushReason } from "./head.js";
import { asRetryable } from "./health.js";
import type { Health } from "./health.js";
import { IngesterError } from "./errors.js";
import { encodeManifest, manifestKey, manifestMaxOffset } from "./manifest.js";
import type { FlushManifest, ManifestStream } from "./manifest.js";
import type { FlushRef } from "./ownership.js";
import type { IngesterMetrics } from "./metrics.js";
import { cutHead, evictIfEmpty, flushAgain, safeOffset } from "./partitions.js";
import type { PartitionState } from "./partitions.js";
import { streamKey } from "./stream.js";

/** What the flush needs of an object store. */
export type FlushStore = Pick<
  ObjectStore,
  "put" | "get" | "head" | "list" | "delete" | "getTagged" | "putIf"
>;

/**
 * What a flush needs of its partition's ownership (ownership.ts `PartitionOwner`): the
 * epoch its manifest is written under, and the decision, which throws `fenced` when the
 * partition was claimed by another ingester and answers the flushes it stopped listing.
 */
export interface FlushFence {
  readonly epoch: number;
  decide(ref: FlushRef): Promise<readonly FlushRef[]>;
}

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
  /** Decided flushes the decision stopped listing (committed past): their manifests go. */
  readonly dropped: readonly FlushRef[];
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
  /** Told the oldest entry still in memory once flushes drop what they wrote. */
  readonly memory?: MemoryWatermark;
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
      if (p.revoked || p.fenced || p.flushHalted !== undefined) continue;
      for (const s of p.streams.values()) {
        const h = s.head;
        if (h === undefined || h.entryCount === 0) continue;
        if (now - h.lastAppendMs >= config.chunkIdleMs) cutHead(p, s, "idle");
        else if (now - h.createdMs >= config.chunkMaxAgeMs) cutHead(p, s, "max_age");
      }
      // Flushing also commits, so commits of a partition never run concurrently.
      if (p.pendingBytes > 0 || p.nextOffset > p.committed) work.push(this.flushPartition(p));
      else work.push(this.tidy(p));
    }
    this.updateGauges();
    await Promise.all(work);
  }

  /** Flushes the partition's pending chunks, repeating while more arrive; one run at a time. */
  flushPartition(p: PartitionState): Promise<void> {
    // Stopped on a non-retriable error: nothing is committed past it until a restart.
    if (p.flushHalted !== undefined) return Promise.reject(p.flushHalted);
    if (p.fenced) return Promise.resolve();
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
        } while (flushAgain(p) && !p.fenced);
      } catch (error) {
        // Not this ingester's partition any more: nothing of it is left to flush or commit.
        if (!isFenced(error)) throw error;
        this.fence(p, error, "decide");
      } finally {
        p.flushing = undefined;
      }
    };
    p.flushing = run();
    return p.flushing;
  }

  /**
   * A quiet partition's record drops the flushes its commit has passed, and their manifests
   * go (ownership.ts `tidy`): one conditional write once the partition goes quiet, none
   * while nothing is below the commit. Serialised with the partition's flushes; a store
   * failure waits for the next sweep.
   */
  tidy(p: PartitionState): Promise<void> {
    if (p.fenced || p.flushing !== undefined) return Promise.resolve();
    if (!p.owner.flushes.some((f) => f.maxOffset < p.committed)) return Promise.resolve();
    const run = async (): Promise<void> => {
      try {
        await this.deleteManifests(p, await p.owner.tidy(p.committed));
      } catch (error) {
        if (isFenced(error)) this.fence(p, error, "decide");
        else this.deps.logger.warn({ partition: p.partition, err: error }, "tidying failed");
      } finally {
        p.flushing = undefined;
      }
    };
    p.flushing = run();
    return p.flushing;
  }

  /** Deletes the manifests of flushes the ownership record no longer lists (best effort). */
  private async deleteManifests(p: PartitionState, refs: readonly FlushRef[]): Promise<void> {
    if (refs.length === 0) return;
    try {
      await mapLimit(refs, this.deps.config.flushWriteConcurrency, (r) =>
        this.deps.store.delete(manifestKey(p.partition, r.epoch, r.seq)),
      );
    } catch (error) {
      // Left behind: the next owner's recovery deletes them (they are not listed).
      this.deps.logger.warn({ partition: p.partition, err: error }, "manifest deletion failed");
    }
  }

  /**
   * Another ingester claimed the partition (its flush was refused): drops what this one
   * holds of it, uncommitted, so the new owner's replay is the only copy. The state stays
   * (fenced) until the consumer revokes or assigns the partition again, so batches still
   * delivered meanwhile are ignored.
   */
  private fence(p: PartitionState, error: unknown, at: "decide" | "commit"): void {
    if (p.fenced) return;
    p.fenced = true;
    let chunks = 0;
    for (const s of p.streams.values()) chunks += s.pending.length + s.flushing.length;
    p.streams.clear();
    p.instances.clear();
    p.patterns = undefined;
    p.pendingBytes = 0;
    this.deps.metrics.flushesFenced.inc({ at });
    // Failures of its earlier flushes (a slow store) no longer concern this ingester.
    this.deps.health.recovered(p.partition, ["flush"]);
    this.deps.logger.warn(
      { partition: p.partition, epoch: p.owner.epoch, chunksDropped: chunks, err: error },
      "flush fenced: another ingester owns the partition now; its state is dropped uncommitted",
    );
    this.updateGauges();
  }

  /**
   * Sets the gauges of what is in memory (open heads, chunks cut and flushing) and the
   * oldest entry it holds: called once a flush has made what it dropped readable.
   */
  updateGauges(): void {
    let heads = 0;
    let flushing = 0;
    let oldest: bigint | undefined;
    const see = (ts: bigint | undefined): void => {
      if (ts !== undefined && (oldest === undefined || ts < oldest)) oldest = ts;
    };
    for (const p of this.deps.partitions.values()) {
      for (const s of p.streams.values()) {
        if (s.head !== undefined && s.head.entryCount > 0) heads++;
        see(s.head?.builder.from);
        for (const c of s.pending) see(c.encoded.from);
        for (const c of s.flushing) see(c.encoded.from);
        flushing += s.pending.length + s.flushing.length;
      }
    }
    this.deps.metrics.headsInMemory.set(heads);
    this.deps.metrics.chunksFlushing.set(flushing);
    this.deps.memory?.set(oldest);
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
      seq: p.owner.takeSeq(),
      streams,
      id: flushId(this.deps.idWriter, createdMs, this.idSequence++),
      createdMs,
    };
  }

  private async runJob(p: PartitionState, job: FlushJob): Promise<void> {
    const dropped = await this.flushSlots(() => this.writeJob(p, job));
    await this.deleteManifests(p, dropped);
    for (const fs of job.streams) {
      const s = p.streams.get(streamKey(fs.tenant, fs.fingerprint));
      if (s === undefined) continue;
      for (const c of s.flushing) p.pendingBytes -= c.encoded.bytes.length;
      s.flushing = [];
    }
    this.updateGauges();
  }

  /** Writes a job (holding a flush slot), retrying while the store may come back. */
  private async writeJob(p: PartitionState, job: FlushJob): Promise<readonly FlushRef[]> {
    const { config, metrics, health, logger } = this.deps;
    const started = performance.now();
    // Read as the flush decides: its decision drops the flushes committed past by then.
    const fence: FlushFence = {
      epoch: p.owner.epoch,
      decide: (ref) => p.owner.decide(ref, p.committed),
    };
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
              fence,
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
            // Fenced is not a failure of this ingester: it is counted where it is handled.
            if (isFenced(error)) return;
            metrics.flushFailures.inc();
            health.failed("flush", p.partition, error, retrying, attempt);
          },
        },
      );
      health.recovered(p.partition, ["flush"]);
      metrics.flushDuration.observe({ outcome: "ok" }, (performance.now() - started) / 1000);
      const reasons = metrics.flushed(job.streams);
      logger.debug({ partition: p.partition, seq: job.seq, ...result, reasons }, "flushed");
      return result.dropped;
    } catch (error) {
      // Final: the job's chunks stay in memory (queries still read them) and nothing is
      // committed past them, so a restart replays their records; /ready says why.
      if (!isRetriable(error) && !isFenced(error)) {
        p.flushHalted = error instanceof Error ? error : new Error(String(error));
      }
      metrics.flushDuration.observe({ outcome: "failed" }, (performance.now() - started) / 1000);
      throw error;
    }
  }

  /**
   * Commits the partition's safe offset if it moved. While the partition is being revoked,
   * first asks the ownership record whether it is still this ingester's: kafkajs may have
   * rejoined the group already, so the broker would take a commit that lands after the new
   * owner's and move the offset back under it.
   */
  private async commit(p: PartitionState): Promise<void> {
    if (p.nextOffset < 0 || p.fenced) return;
    const offset = safeOffset(p);
    if (offset > p.committed) {
      if (p.revoked && !(await p.owner.stillOwner())) {
        const error = new IngesterError(
          "fenced",
          `partition ${p.partition} claimed while revoking`,
        );
        this.fence(p, error, "commit");
        return;
      }
      await this.deps.commit(p.partition, offset);
      p.committed = offset;
    }
    this.deps.metrics.queueLag.set({ partition: String(p.partition) }, p.nextOffset - p.committed);
    // Streams with nothing in memory go (their bloom builder too): what a replay needs to
    // stay exactly-once is the partition's skip map and decided flushes, not the stream state.
    for (const s of [...p.streams.values()]) evictIfEmpty(p, s);
    if (p.skipMax >= 0 && p.committed > p.skipMax) {
      p.skip = new Map();
      p.skipMax = -1;
    }
  }
}

/** Whether `error` is a refused decision (ownership.ts): another ingester owns the partition. */
function isFenced(error: unknown): boolean {
  return error instanceof IngesterError && error.code === "fenced";
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
 * Writes steps 1–5 of a job (see the top of this file). Idempotent: every key is fixed by
 * the job, so a retry after a failure rewrites the same objects (and a decision already
 * made is not made again). Throws `fenced` when the decision is refused.
 */
export async function writeFlush(
  job: FlushJob,
  store: FlushStore,
  writer: string,
  fence: FlushFence,
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
        const all = metadataTokens.keys && metadataTokens.values;
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

  const streams: ManifestStream[] = job.streams.map((s) => ({
    tenant: s.tenant,
    fingerprint: s.fingerprint,
    maxOffset: Math.max(...s.chunks.map((c) => c.lastOffset)),
  }));
  const manifest: FlushManifest = {
    partition: job.partition,
    epoch: fence.epoch,
    seq: job.seq,
    writer,
    createdMs: job.createdMs,
    segments: segments.map((s) => s.key),
    segmentBytes: segments.map((s) => s.bytes),
    blooms,
    streams,
  };
  const key = manifestKey(job.partition, fence.epoch, job.seq);
  const maxOffset = manifestMaxOffset(manifest);
  // Steps 1–3 at once: only the decision has to wait for all three (see the top).
  const writes = [{ key, bytes: encodeManifest(manifest) }, ...chunkWrites, ...bloomWrites];
  await mapLimit(writes, writeConcurrency, ({ key: k, bytes }) => store.put(k, bytes));
  const dropped = await fence.decide({ epoch: fence.epoch, seq: job.seq, maxOffset });
  await mapLimit(segments, writeConcurrency, ({ key: k, bytes }) => store.put(k, bytes));
  if (metrics !== undefined) {
    metrics.bloomBytes.inc(bloomBytes);
    metrics.segmentsWritten.inc(segments.length);
  }
  return {
    manifestKey: key,
    maxOffset,
    dropped,
    chunks: chunkWrites.length,
    chunkBytes,
    bloomBytes,
    segments: segments.length,
  };
}
