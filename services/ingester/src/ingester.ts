/**
 * The ingester (Loki's `pkg/ingester/ingester.go`): the composition of the parts below,
 * and the two things that are the ingester's own, which partitions it owns and what it
 * consumes. A partition's state is partitions.ts (its streams by tenant in instance.ts,
 * each stream in stream.ts with its head in head.ts); its start is recovery.ts; when its
 * heads are cut and flushed and its offsets committed is flush.ts; readiness is health.ts;
 * answering queries from what is in memory is query.ts.
 */
import { readQueueRecord } from "@sieve/proto";
import type { IngesterPatternsRequest, PatternSeries, QueueRecord } from "@sieve/proto";
import type { ConsumedBatch, QueueConsumer, QueuePosition } from "@sieve/queue";
import { MemoryWatermark } from "@sieve/kit";
import type { Logger } from "pino";
import type { IngesterConfig } from "./config.js";
import { IngesterError } from "./errors.js";
import { Flusher } from "./flush.js";
import type { FlushStore } from "./flush.js";
import type { FlushReason } from "./head.js";
import { Health } from "./health.js";
import type { InstanceContext } from "./instance.js";
import type { IngesterMetrics } from "./metrics.js";
import { cutHead, evictIfEmpty, streamFor } from "./partitions.js";
import { queryPatterns, sweepPatterns } from "./patterns.js";
import type { PatternStore, StreamPatterns } from "./patterns.js";
import type { PartitionState } from "./partitions.js";
import { querySeries, queryStreams, sampleStreams } from "./query.js";
import type { Entry } from "@sieve/chunk";
import type {
  IngesterTail,
  IngesterTailer,
  IngesterTailRequest,
  IngesterTailSink,
} from "@sieve/proto";
import type {
  IngesterCallOptions,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeriesRequest,
  IngesterStream,
} from "./query.js";
import { abortError, parseSelector } from "./query.js";
import type { IngesterSamplePart, IngesterSampleRequest } from "@sieve/proto";
import { recoverAssigned } from "./recovery.js";
import type { RecoveryDeps } from "./recovery.js";
import type { Stream } from "./stream.js";
import { streamKey } from "./stream.js";
import { Tails } from "./tail.js";
import { queryStats, queryVolume } from "./volume.js";
import type {
  IngesterStats,
  IngesterStatsRequest,
  IngesterVolume,
  IngesterVolumeRequest,
} from "@sieve/proto";

/** The ingester's dependencies, passed in. */
export interface IngesterDeps {
  readonly config: IngesterConfig;
  readonly consumer: QueueConsumer;
  readonly store: FlushStore;
  readonly logger: Logger;
  readonly metrics: IngesterMetrics;
  /** The clock, in milliseconds; injectable for tests. */
  readonly now?: () => number;
  /**
   * Which of the process's ingester workers this is, when there are several: their segment
   * and bloom-block ids must differ, as the ids of two ingesters do.
   */
  readonly worker?: number;
  /**
   * Where this ingester says how old the oldest entry it holds is (kit's `MemoryWatermark`):
   * its slot of a buffer the process's query workers read. Default: a buffer of its own.
   */
  readonly memory?: { readonly buffer: SharedArrayBuffer; readonly slot: number };
}

/**
 * The ingester: consumes the queue partitions it owns into per-stream head chunks and
 * blooms, flushes them (chunks, bloom blocks, manifest, index segments, then the commit),
 * recovers partitions at assignment so a replay stores nothing twice, and answers queries
 * over what is not flushed yet.
 */
export class Ingester implements IngesterQuerier, IngesterTailer {
  private readonly config: IngesterConfig;
  private readonly consumer: QueueConsumer;
  private readonly logger: Logger;
  private readonly metrics: IngesterMetrics;
  private readonly now: () => number;
  private readonly partitions = new Map<number, PartitionState>();
  private readonly health: Health;
  private readonly flusher: Flusher;
  private readonly recovery: RecoveryDeps;
  /** What each stream is made with. */
  private readonly streamContext: InstanceContext;
  private running = false;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the consumer's start resolved (every partition recovered, delivery running). */
  private consuming = false;
  /** Resolves the pending `start()` early when partition recovery fails (the store is down). */
  private startWaiter: (() => void) | undefined;
  /** Entry bytes appended since the heads were last measured against the memory budget. */
  private appendedSinceCheck = 0;
  /** The tails held: what is appended to a matching stream is pushed to them (tail.ts). */
  private readonly tails = new Tails();
  /** The buffer holding this ingester's watermark (query workers read it: see kit). */
  readonly memory: SharedArrayBuffer;
  private readonly watermark: MemoryWatermark;

  constructor(deps: IngesterDeps) {
    this.memory = deps.memory?.buffer ?? MemoryWatermark.buffer(1);
    this.watermark = new MemoryWatermark(this.memory, deps.memory?.slot ?? 0);
    this.config = deps.config;
    this.consumer = deps.consumer;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.now = deps.now ?? Date.now;
    this.health = new Health(deps.logger, deps.metrics);
    this.streamContext = { config: deps.config, metrics: deps.metrics };
    const idWriter =
      deps.worker === undefined
        ? deps.config.instanceId
        : `${deps.config.instanceId.slice(0, 56)}.w${deps.worker}`;
    this.recovery = {
      store: deps.store,
      logger: deps.logger,
      metrics: deps.metrics,
      owner: idWriter,
      now: this.now,
    };
    this.flusher = new Flusher({
      config: deps.config,
      store: deps.store,
      partitions: this.partitions,
      commit: (partition, offset) => this.consumer.commit(partition, offset),
      health: this.health,
      logger: deps.logger,
      metrics: deps.metrics,
      now: this.now,
      stopping: () => this.stopping,
      idWriter,
      memory: this.watermark,
    });
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
        // Recovered: the watermark reads what is held now (until then it reads "anything").
        this.flusher.updateGauges();
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
    this.tails.endAll(new IngesterError("not_ready", "the ingester is stopping"));
    await this.consumer.stop();
    // A consumer that did not revoke (or partitions left behind): flush them now.
    if (this.partitions.size > 0) await this.revoke([...this.partitions.keys()]);
    this.running = false;
  }

  /**
   * Flushes every head now (`POST /flush`); resolves when all is durable and committed.
   * First waits (up to `flushAllWaitMs`) until this ingester has consumed every record its
   * partitions held when asked: a push acknowledged before the flush is in it.
   */
  async flushAll(reason: FlushReason = "forced"): Promise<void> {
    await this.consumedThrough(await this.consumer.positions());
    const all = [...this.partitions.values()];
    for (const p of all) for (const s of p.streams.values()) cutHead(p, s, reason);
    await Promise.all(all.map((p) => this.flusher.flushPartition(p)));
    // All is committed: the records need not keep these flushes (nor the compactor wait).
    await Promise.all(all.map((p) => this.flusher.tidy(p)));
  }

  /** Resolves once each owned partition is consumed up to its `end` in `positions`. */
  private async consumedThrough(positions: ReadonlyMap<number, QueuePosition>): Promise<void> {
    const behind = (): string[] => {
      const out: string[] = [];
      for (const [partition, { end, committed }] of positions) {
        const p = this.partitions.get(partition);
        // Another worker's partition, or handed over since: not this ingester's to wait for.
        if (p === undefined || p.revoked || p.fenced) continue;
        const at = Math.max(p.nextOffset, p.committed, committed);
        if (at < end) out.push(`partition ${partition} at offset ${at} of ${end}`);
      }
      return out;
    };
    // Real time, not `now` (tests pin that clock).
    const deadline = performance.now() + this.config.flushAllWaitMs;
    for (let late = behind(); late.length > 0; late = behind()) {
      if (performance.now() >= deadline) {
        throw new IngesterError(
          "flush_behind",
          `${late.join(", ")} after ${this.config.flushAllWaitMs} ms`,
        );
      }
      // Batches are applied between these checks (a batch's records are appended at once).
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  // ---- partition ownership ---------------------------------------------------------

  /**
   * Claims and recovers newly assigned partitions (recovery.ts). No wait for the previous
   * owner: its flushes are either decided before the claim (and read here) or refused after
   * it. A partition held fenced (see flush.ts) is claimed again: it is this ingester's anew.
   */
  private async assign(partitions: readonly number[]): Promise<void> {
    for (const partition of partitions) {
      const held = this.partitions.get(partition);
      if (held !== undefined && !held.fenced) continue;
      this.partitions.set(partition, await recoverAssigned(partition, this.recovery));
    }
  }

  private async revoke(partitions: readonly number[]): Promise<void> {
    const reason: FlushReason = this.stopping ? "shutdown" : "revoked";
    const states = partitions
      .map((p) => this.partitions.get(p))
      .filter((p): p is PartitionState => p !== undefined);
    for (const p of states) {
      p.revoked = true;
      for (const s of p.streams.values()) cutHead(p, s, reason);
    }
    await Promise.all(
      states.map(async (p) => {
        try {
          await this.flusher.flushPartition(p);
        } catch (error) {
          // Flushed but not committed (the group moved on, or the consumer is gone): the
          // next owner replays from the last commit and skips what the manifests cover.
          this.logger.warn({ partition: p.partition, err: error }, "commit after revoke failed");
        }
      }),
    );
    for (const p of states) {
      this.partitions.delete(p.partition);
      this.health.forget(p.partition);
      this.metrics.queueLag.remove({ partition: String(p.partition) });
    }
    this.flusher.updateGauges();
  }

  // ---- consumption -------------------------------------------------------------------

  /** Applies a batch: decodes each record and appends its entries to its stream's head. */
  async handleBatch(batch: ConsumedBatch): Promise<void> {
    const p = this.partitions.get(batch.partition);
    if (p === undefined) {
      // Never drop a batch silently: the consumer stops the partition and says so.
      throw new IngesterError("unknown_partition", `partition ${batch.partition}`);
    }
    // Revoked, or fenced: another ingester replays these records.
    if (p.revoked || p.fenced) return;
    const now = this.now();
    const touched = new Set<PartitionState>([p]);
    for (const rec of batch.records) {
      if (rec.offset < p.nextOffset) continue; // redelivered after a failed handler
      if (p.nextOffset < 0 && p.committed < 0) {
        // The first record after assignment is at the offset the queue really resumed from:
        // the next decision drops the flushes wholly below it from the ownership record.
        p.committed = rec.offset;
      }
      p.nextOffset = rec.offset + 1;
      this.metrics.recordsConsumed.inc();
      let record: QueueRecord;
      try {
        record = readQueueRecord(rec.value);
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
      const s = streamFor(p, key, record, this.streamContext);
      const tailed: Entry[] | undefined = this.tails.has(record.tenant) ? [] : undefined;
      // The record's oldest entry, not the head's: a record that fills the head is cut
      // within `append`, and its entries wait in memory for their flush all the same.
      let oldest: bigint | undefined;
      for (const e of record.entries) {
        if (oldest === undefined || e.timestampNs < oldest) oldest = e.timestampNs;
      }
      if (oldest !== undefined) this.watermark.lower(oldest);
      const { appended, cutBytes } = s.append(record.entries, rec.offset, now, tailed);
      if (tailed !== undefined) this.tails.notify(record.tenant, s, tailed);
      p.pendingBytes += cutBytes;
      // Measuring every head costs a pass over the streams: done once a sixteenth of the
      // budget has arrived since the last time, so heads pass it by that much at most.
      this.appendedSinceCheck += rec.value.byteLength;
      if (this.appendedSinceCheck >= this.config.memoryBudgetBytes / 16) {
        this.appendedSinceCheck = 0;
        for (const cut of this.enforceBudget()) touched.add(cut);
      }
      // A record whose entries were all refused leaves nothing to keep (an empty head
      // would never be cut, and would hold the stream forever).
      if (appended === 0) evictIfEmpty(p, s);
    }
    this.metrics.queueLag.set(
      { partition: String(p.partition) },
      p.nextOffset - Math.max(p.committed, 0),
    );
    const waits: Promise<void>[] = [];
    for (const q of touched) {
      if (q.pendingBytes === 0 || q.revoked || q.fenced) continue;
      const flush = this.flusher.flushPartition(q);
      // Backpressure: stop consuming this partition while too much waits for its flush.
      if (q.pendingBytes > this.config.maxPendingFlushBytes) waits.push(flush);
      else void flush.catch(() => undefined);
    }
    await Promise.all(waits);
  }

  /**
   * Keeps the heads within `memoryBudgetBytes`: past it, cuts the largest heads (reason
   * `memory`) until they hold three quarters of it, so that memory does not grow with the
   * data pushed and the cut is not repeated on the next check. Answers the partitions
   * whose heads were cut (they need a flush).
   */
  private enforceBudget(): PartitionState[] {
    const budget = this.config.memoryBudgetBytes;
    const held: { p: PartitionState; s: Stream; bytes: number }[] = [];
    let total = 0;
    for (const p of this.partitions.values()) {
      for (const s of p.streams.values()) {
        const bytes = s.heldBytes;
        if (bytes === 0) continue;
        held.push({ p, s, bytes });
        total += bytes;
      }
    }
    this.metrics.headBytes.set(total);
    if (total <= budget) return [];
    held.sort((a, b) => b.bytes - a.bytes);
    const cut = new Set<PartitionState>();
    for (const { p, s, bytes } of held) {
      if (total <= budget * 0.75) break;
      cutHead(p, s, "memory");
      total -= bytes;
      cut.add(p);
    }
    this.metrics.headBytes.set(total);
    return [...cut];
  }

  /** The periodic check (flush.ts): idle and old heads are cut and flushed; idle partitions commit. */
  tick(): Promise<void> {
    this.sweepPatterns();
    return this.flusher.sweep();
  }

  /** Keeps the patterns within their retention and memory (patterns.ts), and counts them. */
  sweepPatterns(): void {
    const stores: PatternStore[] = [];
    for (const p of this.partitions.values()) if (p.patterns !== undefined) stores.push(p.patterns);
    const swept = sweepPatterns(
      stores,
      this.now() - this.config.patternRetentionMs,
      this.config.patternMemoryBytes,
    );
    const m = this.metrics;
    m.patternBytes.set(swept.bytes);
    m.patternStreams.set(swept.streams);
    if (swept.evictedStreams > 0) m.patternStreamsEvicted.inc(swept.evictedStreams);
    for (const store of stores) {
      for (const [reason, n] of Object.entries(store.skipped)) {
        if (n === 0) continue;
        m.patternLinesSkipped.inc({ reason }, n);
        store.skipped[reason as keyof typeof store.skipped] = 0;
      }
    }
  }

  // ---- queries -----------------------------------------------------------------------

  /** The tenant's streams, partition by partition (see instance.ts). */
  private *tenantStreams(tenant: string): Generator<Stream> {
    for (const p of this.partitions.values()) {
      const instance = p.instances.get(tenant);
      if (instance !== undefined) yield* instance.all();
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

  /**
   * The patterns learned from the tenant's streams matching the selector (patterns.ts), in
   * [start, end) by steps; empty when the tenant has patterns off.
   */
  patterns(req: IngesterPatternsRequest, options?: IngesterCallOptions): Promise<PatternSeries[]> {
    return Promise.resolve().then(() => {
      if (options?.signal?.aborted === true) throw abortError(options.signal);
      const { matchers } = parseSelector(req.selector);
      const streams: StreamPatterns[] = [];
      for (const p of this.partitions.values()) {
        if (p.patterns !== undefined) streams.push(...p.patterns.tenantStreams(req.tenant));
      }
      return queryPatterns(streams, matchers, req, this.config.maxSeriesPerQuery);
    });
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

  // ---- tails -------------------------------------------------------------------------

  /**
   * Holds a tail (tail.ts): every entry appended from now on to a matching stream of the
   * tenant is pushed to `sink`, after the query's pipeline. Held at once (`held` resolves),
   * since appends run on this thread.
   */
  tail(req: IngesterTailRequest, sink: IngesterTailSink): IngesterTail {
    return this.tails.add(req, sink);
  }

  /** Tails held now. */
  get tailCount(): number {
    return this.tails.size;
  }

  /** Bytes of the tenant's unflushed chunks by name and bucket (see volume.ts). */
  volume(req: IngesterVolumeRequest, options?: IngesterCallOptions): Promise<IngesterVolume[]> {
    return Promise.resolve().then(() =>
      queryVolume(this.tenantStreams(req.tenant), req, this.config.maxEntriesPerQuery, options),
    );
  }

  /** What the tenant's unflushed chunks hold (see volume.ts). */
  stats(req: IngesterStatsRequest, options?: IngesterCallOptions): Promise<IngesterStats> {
    return Promise.resolve().then(() => queryStats(this.tenantStreams(req.tenant), req, options));
  }

  /**
   * A metric query pushed down: partial aggregates of the tenant's unflushed data (see
   * query.ts `sampleStreams`), sliced and abortable as {@link Ingester.query}.
   */
  async querySample(
    req: IngesterSampleRequest,
    options?: IngesterCallOptions,
  ): Promise<IngesterSamplePart[]> {
    const streams = [...this.tenantStreams(req.tenant)];
    try {
      const out = await sampleStreams(streams, req, options);
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
}
