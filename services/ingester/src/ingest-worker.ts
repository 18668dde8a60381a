/**
 * The entry of an ingester worker thread (see workers.ts): one {@link Ingester} over the
 * partitions the main thread gives it, consuming through {@link PortConsumer}, the queue
 * contract over the worker's port, and answering the main thread's calls.
 */
import { parentPort, workerData } from "node:worker_threads";
import { PortPeer, fromPortError } from "@sieve/kit";
import type { ConsumedBatch, PartitionListener, QueueConsumer } from "@sieve/queue";
import { openStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
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

  stop(): Promise<void> {
    return this.main.call("consumerStop", null);
  }
}

const setup = workerData as IngestWorkerSetup;
const port = parentPort!;
const registry = new Registry();
const logger = pino({ level: setup.logLevel, base: { ingesterWorker: setup.index } });
// Queries in flight, by the main thread's call id, so that a `cancel` can end them.
const running = new Map<number, AbortController>();

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
  store: openStore(setup.store),
  logger,
  metrics: new IngesterMetrics(registry),
  worker: setup.index,
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
