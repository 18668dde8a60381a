/**
 * The entry of an ingester worker thread (see workers.ts): one {@link Ingester} over the
 * partitions the main thread gives it, consuming through {@link PortConsumer}, the queue
 * contract over the worker's port, and answering the main thread's calls.
 */
import { getHeapStatistics } from "node:v8";
import { parentPort, workerData } from "node:worker_threads";
import { PortPeer, fromPortError, toPortError } from "@sieve/kit";
import type { IngesterTail } from "@sieve/proto";
import type { ConsumedBatch, PartitionListener, QueueConsumer, QueuePosition } from "@sieve/queue";
import { countingWrites, openStore } from "@sieve/storage";
import { pino } from "pino";
import { Gauge, Registry } from "prom-client";
import { IngesterError } from "./errors.js";
import { Ingester } from "./ingester.js";
import { IngesterMetrics } from "./metrics.js";
import type { IngestWorkerSetup, MainMethods, WorkerMethods, WorkerStatus } from "./workers.js";

/**
 * The queue as this worker's ingester sees it: batches and partition changes arrive as
 * calls from the main thread, which holds the real consumer; commits and stop go back.
 */
class PortConsumer implements QueueConsumer {
  private handler: ((batch: ConsumedBatch) => Promise<void>) | undefined;
  listener: PartitionListener = {};

  constructor(private readonly main: PortPeer<MainMethods>) {}

  async start(
    handler: (batch: ConsumedBatch) => Promise<void>,
    listener?: PartitionListener,
  ): Promise<void> {
    this.handler = handler;
    this.listener = listener ?? {};
    await this.main.call("consumerStart", null);
  }

  deliver(batch: ConsumedBatch): Promise<void> {
    if (this.handler === undefined) {
      return Promise.reject(new IngesterError("not_ready", "batch before start"));
    }
    return this.handler(batch);
  }

  commit(partition: number, nextOffset: number): Promise<void> {
    return this.main.call("commit", { partition, nextOffset });
  }

  async positions(): Promise<ReadonlyMap<number, QueuePosition>> {
    return new Map(await this.main.call("positions", null));
  }

  stop(): Promise<void> {
    return this.main.call("consumerStop", null);
  }
}

const setup = workerData as IngestWorkerSetup;
const port = parentPort!;
const registry = new Registry();
// The worker's own isolate: its heap is not the process's `nodejs_heap_*` (the main thread's).
new Gauge({
  name: "sieve_ingester_worker_heap_bytes",
  help: "V8 heap of an ingest worker thread: used, total (reserved) and external (buffers)",
  labelNames: ["worker", "kind"],
  registers: [registry],
  collect() {
    const h = getHeapStatistics();
    const worker = String(setup.index);
    this.set({ worker, kind: "used" }, h.used_heap_size);
    this.set({ worker, kind: "total" }, h.total_heap_size);
    this.set({ worker, kind: "external" }, h.external_memory);
  },
});
const logger = pino({ level: setup.logLevel, base: { ingesterWorker: setup.index } });
// Queries in flight, by the main thread's call id, so that a `cancel` can end them.
const running = new Map<number, AbortController>();
// Tails held, by the main thread's id (tail.ts): their entries go back over the port.
const tails = new Map<number, IngesterTail>();

const methods: WorkerMethods = {
  // Each change of state is reported before the call is answered: messages keep their order.
  start: async () => {
    await ingester.start();
    report();
  },
  stop: async () => {
    await ingester.stop();
    report();
  },
  flushAll: (reason) => ingester.flushAll(reason),
  batch: (batch) => consumer.deliver(batch),
  assigned: async (ps) => consumer.listener.assigned?.(ps),
  revoked: async (ps) => consumer.listener.revoked?.(ps),
  failed: (f) => consumer.listener.failed?.({ ...f, error: fromPortError(f.error) }),
  recovered: (p) => consumer.listener.recovered?.(p),
  query: ({ id, req }) => withSignal(id, (signal) => ingester.query(req, { signal })),
  series: ({ id, req }) => withSignal(id, (signal) => ingester.series(req, { signal })),
  cancel: ({ id, reason }) => {
    running
      .get(id)
      ?.abort(
        reason === "timeout"
          ? new DOMException("the query timed out", "TimeoutError")
          : new Error("canceled"),
      );
  },
  metrics: () => registry.getMetricsAsJSON(),
  tail: async ({ id, req }) => {
    const held = ingester.tail(req, {
      entries: (stream) => {
        void main.call("tailEntries", { id, stream }).catch(() => undefined);
      },
      ended: (error) => {
        tails.delete(id);
        void main.call("tailEnded", { id, error: toPortError(error) }).catch(() => undefined);
      },
    });
    tails.set(id, held);
    try {
      await held.held;
    } catch (error) {
      tails.delete(id);
      throw error;
    }
  },
  untail: ({ id }) => {
    tails.get(id)?.close();
    tails.delete(id);
  },
  volume: ({ id, req }) => withSignal(id, (signal) => ingester.volume(req, { signal })),
  stats: ({ id, req }) => withSignal(id, (signal) => ingester.stats(req, { signal })),
  patterns: ({ id, req }) => withSignal(id, (signal) => ingester.patterns(req, { signal })),
  querySample: ({ id, req }) => withSignal(id, (signal) => ingester.querySample(req, { signal })),
};

async function withSignal<T>(id: number, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  running.set(id, abort);
  try {
    return await run(abort.signal);
  } finally {
    running.delete(id);
  }
}

const main = new PortPeer<MainMethods>(port, methods);
const consumer = new PortConsumer(main);
const ingester = new Ingester({
  config: setup.config,
  consumer,
  store:
    setup.storeWrites === undefined
      ? openStore(setup.store)
      : countingWrites(openStore(setup.store), setup.storeWrites),
  logger,
  metrics: new IngesterMetrics(registry),
  worker: setup.index,
  memory: { buffer: setup.memory, slot: setup.index },
});

// The main thread answers `/ready` without a call: it is told whenever this changes.
let reported: WorkerStatus | undefined;
const report = (): void => {
  const status: WorkerStatus = { serving: ingester.serving, reason: ingester.notReadyReason };
  if (reported?.serving === status.serving && reported.reason === status.reason) return;
  reported = status;
  void main.call("status", status).catch(() => undefined);
};
setInterval(report, 100).unref();
report();
