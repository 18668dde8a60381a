/**
 * The ingester on every core: worker threads, each running an {@link Ingester} over the
 * queue partitions it is given, behind the same face as one ingester. The queue consumer
 * stays on the main thread (one Kafka group member, one write-ahead log) and its contract
 * crosses the thread: each worker's ingester consumes through a `QueueConsumer` whose
 * batches, partition changes and commits are calls over the worker's port (see
 * ingest-worker.ts). Queries and series go to every worker and their answers are
 * concatenated: each stream lives in one partition, so in one worker.
 *
 * A partition goes to the worker that owns the fewest when it is assigned, and stays there
 * until revoked. A worker that dies takes unflushed heads with it: nothing acknowledged is
 * lost (the queue still holds it, uncommitted), but its partitions stop, so `onFatal` is
 * told and the process should exit and be restarted, as after a crash.
 */
import { Worker } from "node:worker_threads";
import { MemoryWatermark, PortPeer, fromPortError, toPortError } from "@sieve/kit";
import type { PortError } from "@sieve/kit";
import type {
  IngesterCallOptions,
  IngesterPatternsRequest,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSamplePart,
  IngesterSampleRequest,
  IngesterSeries,
  IngesterSeriesRequest,
  IngesterStats,
  IngesterStatsRequest,
  IngesterVolume,
  IngesterVolumeRequest,
  IngesterStream,
  IngesterTail,
  IngesterTailer,
  IngesterTailRequest,
  IngesterTailSink,
  PatternSeries,
} from "@sieve/proto";
import type { ConsumedBatch, DeliveryFailure, QueueConsumer, QueuePosition } from "@sieve/queue";
import type { StoreConfig } from "@sieve/storage";
import type { Logger } from "pino";
import { AggregatorRegistry } from "prom-client";
import type { IngesterConfig } from "./config.js";
import { INGESTER_ERRORS, IngesterError } from "./errors.js";
import type { IngesterErrorCode } from "./errors.js";
import type { FlushReason } from "./head.js";
import { mergePatterns } from "./patterns.js";
import { sumStats } from "./volume.js";
import { abortError } from "./query.js";

/** What the HTTP routes and the `sieve` command need of an ingester, in process or on workers. */
export interface IngesterHandle extends IngesterQuerier, IngesterTailer {
  /** Whether queries can be answered now. */
  readonly serving: boolean;
  /** Why the ingester is not ready (for `/ready`); undefined when ready. */
  readonly notReadyReason: string | undefined;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Cuts and flushes every head; resolves once durable and committed. */
  flushAll(reason?: FlushReason): Promise<void>;
  /**
   * The watermarks of its ingesters (kit's `MemoryWatermark`): a query worker given it
   * skips them when they cannot hold a line of its range (kit's `memoryMayHold`).
   */
  readonly memory: SharedArrayBuffer;
}

/** What a worker is built from (its `workerData`): plain data. */
export interface IngestWorkerSetup {
  readonly index: number;
  readonly config: IngesterConfig;
  readonly store: StoreConfig;
  readonly logLevel: string;
  /** The process's watermark buffer: the worker writes slot `index`. */
  readonly memory: SharedArrayBuffer;
  /** Where the worker counts its store writes (`@sieve/storage`'s `countingWrites`), if anywhere. */
  readonly storeWrites?: SharedArrayBuffer;
}

/** A worker's status, as it reports it when it changes. */
export interface WorkerStatus {
  readonly serving: boolean;
  readonly reason: string | undefined;
}

/** What the main thread answers a worker (see ingest-worker.ts for the other way). */
export interface MainMethods {
  [method: string]: (arg: never) => unknown;
  /** The worker's ingester started its consumer: resolves once delivery runs. */
  consumerStart(arg: null): Promise<void>;
  commit(arg: { partition: number; nextOffset: number }): Promise<void>;
  /** The worker's ingester stops: resolves once the shared consumer stopped. */
  consumerStop(arg: null): Promise<void>;
  /** The consumer's positions, by partition. */
  positions(arg: null): Promise<[number, QueuePosition][]>;
  status(arg: WorkerStatus): void;
  /** Entries appended to a stream a tail matches (tail.ts), after its pipeline. */
  tailEntries(arg: { id: number; stream: IngesterStream }): void;
  /** A tail ended on the worker's side (its pipeline failed, or the ingester stops). */
  tailEnded(arg: { id: number; error: PortError }): void;
}

/** What a worker answers (ingest-worker.ts). */
export interface WorkerMethods {
  [method: string]: (arg: never) => unknown;
  start(arg: null): Promise<void>;
  stop(arg: null): Promise<void>;
  flushAll(arg: FlushReason): Promise<void>;
  batch(arg: ConsumedBatch): Promise<void>;
  assigned(arg: readonly number[]): Promise<void>;
  revoked(arg: readonly number[]): Promise<void>;
  failed(arg: Omit<DeliveryFailure, "error"> & { error: PortError }): void;
  recovered(arg: number): void;
  query(arg: { id: number; req: IngesterQueryRequest }): Promise<IngesterStream[]>;
  series(arg: { id: number; req: IngesterSeriesRequest }): Promise<IngesterSeries[]>;
  cancel(arg: { id: number; reason: "timeout" | "canceled" }): void;
  metrics(arg: null): Promise<Parameters<typeof AggregatorRegistry.aggregate>[0][number]>;
  /** Holds a tail; resolves once held. */
  tail(arg: { id: number; req: IngesterTailRequest }): Promise<void>;
  untail(arg: { id: number }): void;
  volume(arg: { id: number; req: IngesterVolumeRequest }): Promise<IngesterVolume[]>;
  stats(arg: { id: number; req: IngesterStatsRequest }): Promise<IngesterStats>;
  patterns(arg: { id: number; req: IngesterPatternsRequest }): Promise<PatternSeries[]>;
  querySample(arg: { id: number; req: IngesterSampleRequest }): Promise<IngesterSamplePart[]>;
}

/** Options of {@link IngesterWorkers}. */
export interface IngesterWorkersOptions {
  /** Worker threads, at least 1. */
  readonly threads: number;
  /** Each worker's ingester configuration; the memory budget is shared out between them. */
  readonly config: IngesterConfig;
  /** The object store, as data: each worker opens its own. */
  readonly store: StoreConfig;
  /** Where every worker counts its store writes, when the process counts them. */
  readonly storeWrites?: SharedArrayBuffer;
  /** The queue, consumed here and delivered to the workers. */
  readonly consumer: QueueConsumer;
  readonly logger: Logger;
  /** A worker died: its partitions are stopped. The process should exit (and be restarted). */
  readonly onFatal: (error: Error) => void;
}

/**
 * The worker's entry, as JavaScript: `new URL` relative to this module through `dist/`, so
 * it resolves from `dist/workers.js` and from `src/workers.ts` (tests load sources; the
 * integration project builds first).
 */
const WORKER_URL = new URL("../dist/ingest-worker.js", import.meta.url);

interface WorkerSlot {
  readonly worker: Worker;
  readonly peer: PortPeer<WorkerMethods>;
  status: WorkerStatus;
  /** Partitions it owns. */
  readonly owned: Set<number>;
}

/** The ingester on worker threads, behind one face ({@link IngesterHandle}). */
export class IngesterWorkers implements IngesterHandle {
  private readonly slots: WorkerSlot[] = [];
  /** Which worker owns each partition delivered now. */
  private readonly owner = new Map<number, WorkerSlot>();
  private running = false;
  private stopping = false;
  private consuming: Promise<void> | undefined;
  private registered = 0;
  private allRegistered!: () => void;
  private readonly registration = new Promise<void>((resolve) => (this.allRegistered = resolve));
  private stopped: Promise<void> | undefined;
  private nextCall = 0;
  private dead: Error | undefined;
  /** Set once the workers are told to end: their exits are expected. */
  private ended = false;
  /** Tails held on the workers, by call id: where their entries go. */
  private readonly tails = new Map<number, IngesterTailSink>();
  readonly memory: SharedArrayBuffer;

  constructor(private readonly options: IngesterWorkersOptions) {
    if (!Number.isInteger(options.threads) || options.threads < 1) {
      throw new RangeError(`threads must be a positive integer, got ${options.threads}`);
    }
    this.memory = MemoryWatermark.buffer(options.threads);
  }

  get serving(): boolean {
    return (
      this.running &&
      !this.stopping &&
      this.dead === undefined &&
      this.slots.every((s) => s.status.serving)
    );
  }

  get notReadyReason(): string | undefined {
    if (!this.running) return "not started";
    if (this.stopping) return "stopping";
    if (this.dead !== undefined) return `ingester worker died: ${this.dead.message}`;
    const reasons = [...new Set(this.slots.map((s) => s.status.reason).filter((r) => r))];
    return reasons.length === 0 ? undefined : reasons.join("; ");
  }

  /** Starts the workers, then their ingesters (which start the consumer once all have). */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const { threads, config, store, logger } = this.options;
    const share: IngesterConfig = {
      ...config,
      memoryBudgetBytes: Math.max(1, Math.floor(config.memoryBudgetBytes / threads)),
      patternMemoryBytes: Math.max(1, Math.floor(config.patternMemoryBytes / threads)),
    };
    for (let index = 0; index < threads; index++) {
      const setup: IngestWorkerSetup = {
        index,
        config: share,
        store,
        logLevel: logger.level,
        memory: this.memory,
        ...(this.options.storeWrites !== undefined && { storeWrites: this.options.storeWrites }),
      };
      const worker = new Worker(WORKER_URL, { workerData: setup });
      const slot: WorkerSlot = {
        worker,
        peer: new PortPeer<WorkerMethods>(worker, this.mainMethods(index)),
        status: { serving: false, reason: "starting" },
        owned: new Set(),
      };
      worker.on("error", (error) => {
        this.died(index, error);
      });
      worker.on("exit", (code) => {
        if (!this.ended) this.died(index, new Error(`exited with code ${code}`));
      });
      this.slots.push(slot);
    }
    await Promise.all(this.slots.map((s) => s.peer.call("start", null)));
  }

  /** Flushes and commits every head (reason `shutdown`), stops the consumer, ends the workers. */
  async stop(): Promise<void> {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    try {
      await Promise.all(this.slots.map((s) => s.peer.call("stop", null)));
    } finally {
      for (const s of this.slots) s.peer.close("ingester stopped");
      this.ended = true;
      await Promise.all(this.slots.map((s) => s.worker.terminate()));
      this.running = false;
    }
  }

  async flushAll(reason: FlushReason = "forced"): Promise<void> {
    await Promise.all(this.slots.map((s) => s.peer.call("flushAll", reason)));
  }

  query(req: IngesterQueryRequest, options?: IngesterCallOptions): Promise<IngesterStream[]> {
    return this.everyWorker(options, (s, id) => s.peer.call("query", { id, req }));
  }

  series(req: IngesterSeriesRequest, options?: IngesterCallOptions): Promise<IngesterSeries[]> {
    return this.everyWorker(options, (s, id) => s.peer.call("series", { id, req }));
  }

  querySample(
    req: IngesterSampleRequest,
    options?: IngesterCallOptions,
  ): Promise<IngesterSamplePart[]> {
    return this.everyWorker(options, (s, id) => s.peer.call("querySample", { id, req }));
  }

  /**
   * Every worker's volumes: a worker owns whole partitions, so a stream is in one worker
   * and the querier sums the entries as it sums the index's.
   */
  volume(req: IngesterVolumeRequest, options?: IngesterCallOptions): Promise<IngesterVolume[]> {
    return this.everyWorker(options, (s, id) => s.peer.call("volume", { id, req }));
  }

  /** Every worker's stats, summed. */
  async stats(req: IngesterStatsRequest, options?: IngesterCallOptions): Promise<IngesterStats> {
    const each = await this.everyWorker(options, (s, id) =>
      s.peer.call("stats", { id, req }).then((one) => [one]),
    );
    return sumStats(each);
  }

  /**
   * Every worker's patterns, merged by pattern and level (a stream's patterns live in one
   * worker, but one pattern may come from streams of several).
   */
  async patterns(
    req: IngesterPatternsRequest,
    options?: IngesterCallOptions,
  ): Promise<PatternSeries[]> {
    const all = await this.everyWorker(options, (s, id) => s.peer.call("patterns", { id, req }));
    return mergePatterns([all]);
  }

  /**
   * Every worker's metrics, summed as prom-client sums a cluster's (counters and
   * histograms added, gauges added: each worker's gauges count its own partitions), in the
   * text format.
   */
  async metrics(): Promise<string> {
    const each = await Promise.all(this.slots.map((s) => s.peer.call("metrics", null)));
    return AggregatorRegistry.aggregate(each).metrics();
  }

  // ---- the shared consumer -------------------------------------------------------------

  private mainMethods(index: number): MainMethods {
    return {
      consumerStart: async () => {
        if (++this.registered === this.options.threads) this.allRegistered();
        await this.registration;
        this.consuming ??= this.options.consumer.start((batch) => this.deliver(batch), {
          assigned: (ps) => this.assigned(ps),
          revoked: (ps) => this.revoked(ps),
          failed: (f) => {
            this.failed(f);
          },
          recovered: (p) => {
            for (const s of this.slots) void s.peer.call("recovered", p).catch(() => undefined);
          },
        });
        await this.consuming;
      },
      commit: ({ partition, nextOffset }) => this.options.consumer.commit(partition, nextOffset),
      consumerStop: () => (this.stopped ??= this.options.consumer.stop()),
      positions: async () => [...(await this.options.consumer.positions())],
      status: (status) => {
        this.slots[index]!.status = status;
      },
      tailEntries: ({ id, stream }) => {
        this.tails.get(id)?.entries(stream);
      },
      tailEnded: ({ id, error }) => {
        this.endTail(id, fromPortError(error));
      },
    };
  }

  private deliver(batch: ConsumedBatch): Promise<void> {
    const slot = this.owner.get(batch.partition);
    if (slot === undefined) {
      return Promise.reject(new IngesterError("unknown_partition", `partition ${batch.partition}`));
    }
    return slot.peer.call("batch", batch).catch((error: unknown) => {
      throw ingesterError(error);
    });
  }

  private async assigned(partitions: readonly number[]): Promise<void> {
    const byWorker = new Map<WorkerSlot, number[]>();
    for (const p of partitions) {
      let slot = this.owner.get(p);
      if (slot === undefined) {
        slot = this.slots.reduce((a, b) => (b.owned.size < a.owned.size ? b : a));
        slot.owned.add(p);
        this.owner.set(p, slot);
      }
      byWorker.set(slot, [...(byWorker.get(slot) ?? []), p]);
    }
    await Promise.all(
      [...byWorker].map(([slot, ps]) =>
        slot.peer.call("assigned", ps).catch((error: unknown) => {
          throw ingesterError(error);
        }),
      ),
    );
  }

  private async revoked(partitions: readonly number[]): Promise<void> {
    const byWorker = new Map<WorkerSlot, number[]>();
    for (const p of partitions) {
      const slot = this.owner.get(p);
      if (slot !== undefined) byWorker.set(slot, [...(byWorker.get(slot) ?? []), p]);
    }
    await Promise.all([...byWorker].map(([slot, ps]) => slot.peer.call("revoked", ps)));
    for (const [slot, ps] of byWorker) {
      for (const p of ps) {
        slot.owned.delete(p);
        this.owner.delete(p);
      }
    }
  }

  /**
   * Every worker hears of every failed delivery (and of its recovery): a failed `assigned`
   * holds up the start of all of them (each ingester's start then returns early, store
   * down, as one ingester's does), and each reports the fault until it clears.
   */
  private failed(failure: DeliveryFailure): void {
    const crossing = { ...failure, error: toPortError(failure.error) };
    for (const s of this.slots) void s.peer.call("failed", crossing).catch(() => undefined);
  }

  // ---- calls to every worker -----------------------------------------------------------

  private async everyWorker<T>(
    options: IngesterCallOptions | undefined,
    call: (slot: WorkerSlot, id: number) => Promise<T[]>,
  ): Promise<T[]> {
    const id = this.nextCall++;
    const signal = options?.signal;
    if (signal?.aborted === true) throw abortError(signal);
    const onAbort = (): void => {
      const reason =
        (signal?.reason as { name?: string } | undefined)?.name === "TimeoutError"
          ? "timeout"
          : "canceled";
      for (const s of this.slots) void s.peer.call("cancel", { id, reason }).catch(() => 0);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const answers = await Promise.all(this.slots.map((s) => call(s, id)));
      return answers.flat();
    } catch (error) {
      throw ingesterError(error);
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Holds a tail on every worker (each appends its own partitions' entries); `held`
   * resolves once all hold it. Entries come back over the ports (`tailEntries`).
   */
  tail(req: IngesterTailRequest, sink: IngesterTailSink): IngesterTail {
    const id = this.nextCall++;
    this.tails.set(id, sink);
    const untail = (): void => {
      if (!this.tails.delete(id)) return;
      for (const s of this.slots) void s.peer.call("untail", { id }).catch(() => undefined);
    };
    const held = Promise.all(this.slots.map((s) => s.peer.call("tail", { id, req }))).then(
      () => undefined,
      (error: unknown) => {
        untail();
        throw ingesterError(error);
      },
    );
    held.catch(() => undefined); // the caller awaits it; never an unhandled rejection
    return { held, close: untail };
  }

  /** A worker ended tail `id`: the others let it go, and its sink hears why (once). */
  private endTail(id: number, error: Error): void {
    const sink = this.tails.get(id);
    if (sink === undefined) return;
    this.tails.delete(id);
    for (const s of this.slots) void s.peer.call("untail", { id }).catch(() => undefined);
    sink.ended(error);
  }

  private died(index: number, error: Error): void {
    if (this.dead !== undefined) return;
    this.dead = new Error(`ingester worker ${index} ${error.message}`, { cause: error });
    for (const id of [...this.tails.keys()]) this.endTail(id, this.dead);
    this.options.logger.error({ err: error, worker: index }, "ingester worker died");
    for (const s of this.slots) s.peer.close(this.dead.message);
    this.options.onFatal(this.dead);
  }
}

/** An error from a worker as the ingester's own, when its code is one (the querier reads codes). */
function ingesterError(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== "string" || !(code in INGESTER_ERRORS) || error instanceof IngesterError) {
    return error;
  }
  const rebuilt = new IngesterError(code as IngesterErrorCode);
  rebuilt.message = (error as Error).message;
  return rebuilt;
}
