import { ChunkError } from "@sieve/chunk";
import type { Entry } from "@sieve/chunk";
import { SeriesBloomBuilder } from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import { decodeQueueRecord } from "@sieve/proto";
import type { QueueRecord } from "@sieve/proto";
import { isRetriable, retryRetriable, WalConsumer } from "@sieve/queue";
import type { ConsumedBatch, QueueConsumer } from "@sieve/queue";
import type { Logger } from "pino";
import { tenantBlooms } from "./config.js";
import type { IngesterConfig } from "./config.js";
import { IngesterError } from "./errors.js";
import { pool, recoverPartition, streamKey, writeFlush, flushId } from "./flush.js";
import type { FlushJob, FlushStore, FlushStream } from "./flush.js";
import { Head } from "./head.js";
import type { FlushReason } from "./head.js";
import { asRetryable, Health } from "./health.js";
import type { IngesterMetrics } from "./metrics.js";
import { flushAgain, recoveredPartition, safeOffset } from "./partitions.js";
import type { PartitionState, StreamState } from "./partitions.js";
import { querySeries, queryStreams } from "./query.js";
import type {
  IngesterCallOptions,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeriesRequest,
  IngesterStream,
} from "./query.js";

/** The ingester's dependencies, passed in. */
export interface IngesterDeps {
  readonly config: IngesterConfig;
  readonly consumer: QueueConsumer;
  readonly store: FlushStore;
  readonly logger: Logger;
  readonly metrics: IngesterMetrics;
  /** The clock, in milliseconds; injectable for tests. */
  readonly now?: () => number;
}

/**
 * The ingester: consumes the queue partitions it owns into per-stream head chunks and
 * blooms, flushes them (chunks, bloom blocks, manifest, index segments, then the commit),
 * recovers partitions at assignment so a replay stores nothing twice, and answers queries
 * over what is not flushed yet.
 */
export class Ingester implements IngesterQuerier {
  private readonly config: IngesterConfig;
  private readonly consumer: QueueConsumer;
  private readonly store: FlushStore;
  private readonly logger: Logger;
  private readonly metrics: IngesterMetrics;
  private readonly now: () => number;
  private readonly partitions = new Map<number, PartitionState>();
  private running = false;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  private flushSlots: number;
  private readonly slotWaiters: (() => void)[] = [];
  private idSequence = 0;
  /** When this ingester last gave each partition up. */
  private readonly revokedAt = new Map<number, number>();
  private readonly health: Health;
  /** Whether the consumer's start resolved (every partition recovered, delivery running). */
  private consuming = false;
  /** Resolves the pending `start()` early when partition recovery fails (the store is down). */
  private startWaiter: (() => void) | undefined;

  constructor(deps: IngesterDeps) {
    this.config = deps.config;
    this.consumer = deps.consumer;
    this.store = deps.store;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.now = deps.now ?? Date.now;
    this.flushSlots = deps.config.flushConcurrency;
    this.health = new Health(deps.logger, deps.metrics);
  }

  /**
   * Whether the ingester does its job (for `/ready`): started, every partition recovered,
   * and no delivery or flush failing. {@link notReadyReason} says why not.
   */
  get ready(): boolean {
    return this.running && !this.stopping && this.consuming && this.health.ok;
  }

  /** Whether queries can be answered: started, partitions recovered, not stopping. */
  get serving(): boolean {
    return this.running && !this.stopping && this.consuming;
  }

  /** Why {@link ready} is false (e.g. "object store unavailable: …"); undefined when ready. */
  get notReadyReason(): string | undefined {
    if (!this.running) return "not started";
    if (this.stopping) return "stopping";
    const faults = this.health.reason;
    if (faults !== undefined) return faults;
    return this.consuming ? undefined : "starting: recovering queue partitions";
  }

  /** Streams held in memory (heads, cut chunks, blooms) over every owned partition. */
  get streamsInMemory(): number {
    let n = 0;
    for (const p of this.partitions.values()) n += p.streams.size;
    return n;
  }

  /** Partitions owned now. */
  get ownedPartitions(): number[] {
    return [...this.partitions.keys()].sort((a, b) => a - b);
  }

  /**
   * Starts consuming; partitions are recovered as they are assigned. Resolves once
   * delivery runs, or as soon as recovery finds the object store unavailable: recovery
   * is then retried in the background with backoff (the consumer's), `ready` is false
   * with the reason, and the ingester recovers on its own when the store is back, so a
   * process starts (and its distributor accepts pushes into the queue) without its store.
   */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const storeDown = new Promise<void>((resolve) => (this.startWaiter = resolve));
    const started = this.consumer
      .start((batch) => this.handleBatch(batch), {
        assigned: (ps) => this.assign(ps),
        revoked: (ps) => this.revoke(ps),
        failed: (f) => {
          this.health.deliveryFailed(f);
          if (f.stage === "assigned") this.startWaiter?.();
        },
        recovered: (p) => {
          this.health.recovered(p, ["assigned", "read", "handler"]);
        },
      })
      .then(() => {
        this.consuming = true;
        this.startWaiter = undefined;
      });
    try {
      await Promise.race([started, storeDown]);
    } catch (error) {
      this.running = false;
      throw error;
    }
    started.catch((error: unknown) => {
      // Only after start() returned early: a later, non-retriable failure of recovery.
      this.logger.error({ err: error }, "queue consumer failed to start");
    });
    this.timer = setInterval(() => {
      void this.tick().catch((error: unknown) => {
        this.logger.error({ err: error }, "flush check failed");
      });
    }, this.config.flushCheckIntervalMs);
    this.timer.unref();
  }

  /**
   * Graceful shutdown: stops consuming; the consumer revokes every partition, which flushes
   * every head (reason `shutdown`) and commits.
   */
  async stop(): Promise<void> {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.consumer.stop();
    // A consumer that did not revoke (or partitions left behind): flush them now.
    if (this.partitions.size > 0) await this.revoke([...this.partitions.keys()]);
    this.running = false;
  }

  /** Flushes every head now (`POST /flush`); resolves when all is durable and committed. */
  async flushAll(reason: FlushReason = "forced"): Promise<void> {
    const all = [...this.partitions.values()];
    for (const p of all) for (const s of p.streams.values()) this.cutHead(p, s, reason);
    await Promise.all(all.map((p) => this.flushPartition(p)));
  }

  // ---- partition ownership ---------------------------------------------------------

  private async assign(partitions: readonly number[]): Promise<void> {
    // A partition another member just lost may still be being flushed by it (kafkajs rejoins
    // while the old owner's revocation runs): give that flush time to write its manifest
    // before reading the manifests. Partitions this ingester revoked itself are done (the
    // consumer calls revoked before assigned), and the local log has no other owner.
    const now = this.now();
    const foreign = partitions.filter((p) => {
      const at = this.revokedAt.get(p);
      return at === undefined || now - at > this.config.handoverDelayMs;
    });
    if (
      foreign.length > 0 &&
      this.config.handoverDelayMs > 0 &&
      !(this.consumer instanceof WalConsumer)
    ) {
      await new Promise((resolve) => setTimeout(resolve, this.config.handoverDelayMs));
    }
    for (const partition of partitions) {
      if (this.partitions.has(partition)) continue;
      let r;
      try {
        r = await recoverPartition(this.store, partition, this.logger, {
          writer: this.config.instanceId,
          graceMs: this.config.recoveryGraceMs,
          now: this.now,
        });
      } catch (error) {
        // The consumer retries while the store is unavailable; the batches wait.
        throw asRetryable(error);
      }
      this.metrics.manifestsRecovered.inc({ outcome: "complete" }, r.complete);
      this.metrics.manifestsRecovered.inc({ outcome: "rolled_back" }, r.rolledBack);
      this.partitions.set(partition, recoveredPartition(partition, r));
      if (r.complete + r.rolledBack > 0) {
        this.logger.info(
          {
            partition,
            complete: r.complete,
            rolledBack: r.rolledBack,
            streamsSkipped: r.skip.size,
          },
          "partition recovered from flush manifests",
        );
      }
    }
  }

  private async revoke(partitions: readonly number[]): Promise<void> {
    const reason: FlushReason = this.stopping ? "shutdown" : "revoked";
    const states = partitions
      .map((p) => this.partitions.get(p))
      .filter((p): p is PartitionState => p !== undefined);
    for (const p of states) {
      p.revoked = true;
      for (const s of p.streams.values()) this.cutHead(p, s, reason);
    }
    await Promise.all(
      states.map(async (p) => {
        try {
          await this.flushPartition(p);
        } catch (error) {
          // Flushed but not committed (the group moved on, or the consumer is gone): the
          // next owner replays from the last commit and skips what the manifests cover.
          this.logger.warn({ partition: p.partition, err: error }, "commit after revoke failed");
        }
      }),
    );
    for (const p of states) {
      this.revokedAt.set(p.partition, this.now());
      this.partitions.delete(p.partition);
      this.health.forget(p.partition);
      this.metrics.queueLag.remove({ partition: String(p.partition) });
    }
    this.updateGauges();
  }

  // ---- consumption -------------------------------------------------------------------

  /** Applies a batch: decodes each record and appends its entries to its stream's head. */
  async handleBatch(batch: ConsumedBatch): Promise<void> {
    const p = this.partitions.get(batch.partition);
    if (p === undefined) {
      // Never drop a batch silently: the consumer stops the partition and says so.
      throw new IngesterError("unknown_partition", `partition ${batch.partition}`);
    }
    if (p.revoked) return;
    const now = this.now();
    for (const rec of batch.records) {
      if (rec.offset < p.nextOffset) continue; // redelivered after a failed handler
      if (p.nextOffset < 0 && p.committed < 0) {
        // The first record after assignment is at the offset the queue really resumed from.
        p.committed = rec.offset;
        void this.deleteManifestsBelow(p, rec.offset);
      }
      p.nextOffset = rec.offset + 1;
      this.metrics.recordsConsumed.inc();
      let record: QueueRecord;
      try {
        record = decodeQueueRecord(rec.value);
      } catch (error) {
        this.metrics.recordsDropped.inc({ reason: "corrupt_record" });
        this.logger.warn(
          { partition: p.partition, offset: rec.offset, err: error },
          "undecodable queue record dropped",
        );
        continue;
      }
      const key = streamKey(record.tenant, record.fingerprint);
      if (p.skipMax >= rec.offset) {
        const skipTo = p.skip.get(key);
        if (skipTo !== undefined && rec.offset <= skipTo) {
          this.metrics.recordsDropped.inc({ reason: "replayed" });
          continue;
        }
      }
      this.appendRecord(p, key, record, rec.offset, now);
    }
    this.metrics.queueLag.set(
      { partition: String(p.partition) },
      p.nextOffset - Math.max(p.committed, 0),
    );
    if (p.pendingBytes > 0) {
      const flush = this.flushPartition(p);
      // Backpressure: stop consuming this partition while too much waits for its flush.
      if (p.pendingBytes > this.config.maxPendingFlushBytes) await flush;
      else void flush.catch(() => undefined);
    }
  }

  /** Drops a stream that holds nothing: its state is rebuilt by its next record. */
  private evictIfEmpty(p: PartitionState, s: StreamState): void {
    if (s.head !== undefined && s.head.entryCount === 0) s.head = undefined;
    if (s.head === undefined && s.pending.length === 0 && s.flushing.length === 0) {
      p.streams.delete(s.key);
    }
  }

  private stream(p: PartitionState, key: string, record: QueueRecord): StreamState {
    let s = p.streams.get(key);
    if (s !== undefined) return s;
    const blooms = tenantBlooms(this.config, record.tenant);
    const labelMap: Record<string, string> = {};
    try {
      for (const l of parseLabels(record.labels)) labelMap[l.name] = l.value;
    } catch {
      // The distributor wrote canonical labels; anything else simply matches no selector.
    }
    s = {
      key,
      tenant: record.tenant,
      labels: record.labels,
      fingerprint: record.fingerprint,
      labelMap,
      head: undefined,
      bloom: blooms.bloomsEnabled
        ? new SeriesBloomBuilder({
            maxBloomBytes: this.config.maxBloomBytes,
            ...(blooms.ngramLength > 0 && {
              ngrams: { length: blooms.ngramLength, skip: blooms.ngramSkip },
            }),
          })
        : undefined,
      tokensCounted: 0,
      pending: [],
      flushing: [],
    };
    p.streams.set(key, s);
    return s;
  }

  private appendRecord(
    p: PartitionState,
    key: string,
    record: QueueRecord,
    offset: number,
    now: number,
  ): void {
    const s = this.stream(p, key, record);
    let appended = 0;
    for (const e of record.entries) {
      const entry: Entry = {
        timestamp: e.timestampNs,
        line: e.line,
        structuredMetadata: e.structuredMetadata,
      };
      s.head ??= new Head(this.config.chunkBlockBytes, now);
      let ok: boolean;
      try {
        ok = s.head.append(entry, offset, now);
      } catch (error) {
        if (error instanceof ChunkError && error.code === "too_large" && s.head.entryCount > 0) {
          // The symbol table is full: cut here. The cut chunk claims only the records before
          // this one, so a replay re-reads this record whole (at-least-once for this rare case).
          this.cutHead(p, s, "full", offset - 1);
          s.head = new Head(this.config.chunkBlockBytes, now);
          try {
            ok = s.head.append(entry, offset, now);
          } catch {
            ok = false;
          }
          if (!ok) this.metrics.entriesDropped.inc({ reason: "invalid_entry" });
          if (ok) appended++;
          continue;
        }
        this.metrics.entriesDropped.inc({ reason: "invalid_entry" });
        continue;
      }
      if (!ok) {
        this.metrics.entriesDropped.inc({ reason: "duplicate" });
        continue;
      }
      appended++;
      s.bloom?.add(entry.structuredMetadata, entry.line);
    }
    this.metrics.entriesAppended.inc(appended);
    if (
      s.head !== undefined &&
      s.head.builder.compressedBytesEstimate >= this.config.chunkTargetBytes
    ) {
      this.cutHead(p, s, "full");
    }
    // A record whose entries were all refused leaves nothing to keep (an empty head
    // would never be cut, and would hold the stream forever).
    if (appended === 0) this.evictIfEmpty(p, s);
  }

  /**
   * Cuts a stream's head: encodes it, closes its bloom chunk, and queues it for the next
   * flush of the partition. `lastOffset` lowers the offset the chunk claims (see appendRecord).
   */
  private cutHead(
    p: PartitionState,
    s: StreamState,
    reason: FlushReason,
    lastOffset?: number,
  ): void {
    const head = s.head;
    if (head === undefined) return;
    s.head = undefined;
    if (head.entryCount === 0) return;
    const encoded = head.encode();
    s.bloom?.cut({ from: encoded.from, through: encoded.through, checksum: encoded.checksum });
    if (s.bloom !== undefined) {
      this.metrics.tokensAdded.inc(s.bloom.stats.tokens - s.tokensCounted);
      s.tokensCounted = s.bloom.stats.tokens;
    }
    s.pending.push({
      encoded,
      firstOffset: head.firstOffset,
      lastOffset: lastOffset ?? head.lastOffset,
      reason,
    });
    p.pendingBytes += encoded.bytes.length;
  }

  // ---- flushing ----------------------------------------------------------------------

  /** Flushes the partition's pending chunks, repeating while more arrive; one run at a time. */
  private flushPartition(p: PartitionState): Promise<void> {
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
    const createdMs = this.now();
    return {
      partition: p.partition,
      seq: p.nextSeq++,
      streams,
      id: flushId(this.config.instanceId, createdMs, this.idSequence++),
      createdMs,
    };
  }

  private async acquireSlot(): Promise<void> {
    if (this.flushSlots > 0) {
      this.flushSlots--;
      return;
    }
    await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
  }

  private releaseSlot(): void {
    const next = this.slotWaiters.shift();
    if (next !== undefined) next();
    else this.flushSlots++;
  }

  private async runJob(p: PartitionState, job: FlushJob): Promise<void> {
    await this.acquireSlot();
    const started = performance.now();
    try {
      // Retried with exponential backoff and jitter while the store may come back; a
      // programming error or a request the store refuses is final (see health.ts).
      const result = await retryRetriable(
        async () => {
          try {
            return await writeFlush(
              job,
              this.store,
              this.config.instanceId,
              this.config.flushWriteConcurrency,
              this.metrics,
            );
          } catch (error) {
            throw asRetryable(error);
          }
        },
        {
          minBackoffMs: 100,
          maxBackoffMs: this.config.flushRetryMaxBackoffMs,
          onFailure: (error, attempt, retrying) => {
            this.metrics.flushFailures.inc();
            this.health.failed("flush", p.partition, error, retrying, attempt);
          },
        },
      );
      this.health.recovered(p.partition, ["flush"]);
      p.kept.push({ key: result.manifestKey, maxOffset: result.maxOffset });
      this.metrics.flushDuration.observe({ outcome: "ok" }, (performance.now() - started) / 1000);
      const reasons: Partial<Record<FlushReason, number>> = {};
      for (const s of job.streams) {
        for (const c of s.chunks) {
          this.metrics.chunksFlushed.inc({ reason: c.reason });
          this.metrics.chunkBytes.inc({ reason: c.reason }, c.encoded.bytes.length);
          this.metrics.chunkRawBytes.inc(c.encoded.uncompressedBytes);
          this.metrics.chunkEntries.inc(c.encoded.entryCount);
          reasons[c.reason] = (reasons[c.reason] ?? 0) + 1;
        }
        if (s.bloom?.status === "missing")
          this.metrics.bloomsMissing.inc({ reason: s.bloom.reason });
        if (s.bloom === undefined) this.metrics.bloomsMissing.inc({ reason: "disabled" });
      }
      this.logger.debug({ partition: p.partition, seq: job.seq, ...result, reasons }, "flushed");
    } catch (error) {
      // Final: the job's chunks stay in memory (queries still read them) and nothing is
      // committed past them, so a restart replays their records; /ready says why.
      if (!isRetriable(error)) {
        p.flushHalted = error instanceof Error ? error : new Error(String(error));
      }
      this.metrics.flushDuration.observe(
        { outcome: "failed" },
        (performance.now() - started) / 1000,
      );
      throw error;
    } finally {
      this.releaseSlot();
    }
    for (const fs of job.streams) {
      const s = p.streams.get(streamKey(fs.tenant, fs.fingerprint));
      if (s === undefined) continue;
      for (const c of s.flushing) p.pendingBytes -= c.encoded.bytes.length;
      s.flushing = [];
    }
    this.updateGauges();
  }

  /** Commits the partition's safe offset if it moved, then deletes manifests below it. */
  private async commit(p: PartitionState): Promise<void> {
    if (p.nextOffset < 0) return;
    const offset = safeOffset(p);
    if (offset > p.committed) {
      await this.consumer.commit(p.partition, offset);
      p.committed = offset;
    }
    this.metrics.queueLag.set({ partition: String(p.partition) }, p.nextOffset - p.committed);
    // Streams with nothing in memory go (their bloom builder too): what a replay needs to
    // stay exactly-once is the partition's skip map and manifests, not the stream state.
    for (const s of [...p.streams.values()]) this.evictIfEmpty(p, s);
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
    if (!p.revoked || this.stopping) await this.deleteManifestsBelow(p, p.committed);
  }

  /** Deletes the partition's manifests wholly below `offset` (nothing at or below them is replayed). */
  private async deleteManifestsBelow(p: PartitionState, offset: number): Promise<void> {
    const done = p.kept.filter((m) => m.maxOffset < offset);
    if (done.length === 0) return;
    p.kept = p.kept.filter((m) => m.maxOffset >= offset);
    try {
      await pool(done, this.config.flushWriteConcurrency, (m) => this.store.delete(m.key));
    } catch (error) {
      this.logger.warn({ partition: p.partition, err: error }, "manifest deletion failed");
    }
  }

  /** The periodic check: idle and old heads are cut and flushed; idle partitions commit. */
  async tick(): Promise<void> {
    const now = this.now();
    const work: Promise<void>[] = [];
    for (const p of this.partitions.values()) {
      if (p.revoked || p.flushHalted !== undefined) continue;
      for (const s of p.streams.values()) {
        const h = s.head;
        if (h === undefined || h.entryCount === 0) continue;
        if (now - h.lastAppendMs >= this.config.chunkIdleMs) this.cutHead(p, s, "idle");
        else if (now - h.createdMs >= this.config.chunkMaxAgeMs) this.cutHead(p, s, "max_age");
      }
      // Flushing also commits, so commits of a partition never run concurrently.
      if (p.pendingBytes > 0 || p.nextOffset > p.committed) work.push(this.flushPartition(p));
    }
    this.updateGauges();
    await Promise.all(work);
  }

  private updateGauges(): void {
    let heads = 0;
    let flushing = 0;
    for (const p of this.partitions.values()) {
      for (const s of p.streams.values()) {
        if (s.head !== undefined && s.head.entryCount > 0) heads++;
        flushing += s.pending.length + s.flushing.length;
      }
    }
    this.metrics.headsInMemory.set(heads);
    this.metrics.chunksFlushing.set(flushing);
  }

  // ---- queries -----------------------------------------------------------------------

  private *tenantStreams(tenant: string): Generator<StreamState> {
    for (const p of this.partitions.values()) {
      for (const s of p.streams.values()) if (s.tenant === tenant) yield s;
    }
  }

  /**
   * Entries of the tenant's matching streams still in memory (heads and flushing chunks),
   * evaluated in slices that yield to the event loop (see query.ts), so pushes and health
   * checks go on meanwhile; stops with `timeout` or `canceled` when `options.signal` aborts.
   */
  async query(req: IngesterQueryRequest, options?: IngesterCallOptions): Promise<IngesterStream[]> {
    // Streams are listed first: partitions may be revoked while the query yields.
    const streams = [...this.tenantStreams(req.tenant)];
    try {
      const out = await queryStreams(streams, req, this.config.maxEntriesPerQuery, options);
      this.metrics.queries.inc({ outcome: "ok" });
      return out;
    } catch (error) {
      const code = error instanceof IngesterError ? error.code : undefined;
      this.metrics.queries.inc({
        outcome: code === "timeout" || code === "canceled" ? code : "error",
      });
      throw error;
    }
  }

  /** The tenant's streams in memory with entries in [start, end), optionally matching a selector. */
  series(
    req: IngesterSeriesRequest,
    options?: IngesterCallOptions,
  ): Promise<{ labels: string; fingerprint: bigint }[]> {
    return Promise.resolve().then(() =>
      querySeries(this.tenantStreams(req.tenant), req, this.config.maxSeriesPerQuery, options),
    );
  }
}
