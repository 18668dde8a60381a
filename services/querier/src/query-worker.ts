/**
 * The entry of a query worker thread (see pool.ts): builds one Querier from the pool's
 * {@link WorkerSetup} on first use and runs each task through {@link handleQuery}, the
 * same function the in-process server calls.
 */
import { MessageChannel, parentPort, type MessagePort } from "node:worker_threads";
import { openStore, type ObjectStore } from "@sieve/storage";
import { workerData } from "piscina";
import type {
  ChunkFilter,
  FilterRequest,
  FilterResponse,
  IngesterQuerier,
  IngesterSamplePart,
  IngesterStream,
  IngesterVolume,
  IngesterStats,
  PatternSeries,
} from "@sieve/proto";
import { skipIdleIngesters } from "./deps.js";
import { QueryError } from "./errors.js";
import { handleQuery, type QueryAnswer } from "./handler.js";
import type { PortCall, PortOffer, PortReply, WorkerSetup, WorkerTask } from "./pool.js";
import { ReadReport } from "./labels.js";
import { readyQuerier } from "./ready.js";
import { Querier } from "./querier.js";

/**
 * Calls to the main thread over this worker's port: one channel for the worker's life,
 * offered to the pool once as the module loads (piscina passes a worker's own messages on
 * as its pool's `message` event), so a task costs no channel of its own. Each call names
 * the task it serves: the main thread ends a task's calls when its task ends. A worker
 * runs one task at a time (the pool's `concurrentTasksPerWorker: 1`).
 */
class PortCaller {
  private readonly port: MessagePort;
  private task = -1;
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();

  constructor() {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    parentPort!.postMessage({ queryPort: port2 } satisfies PortOffer, [port2]);
    port1.on("message", (reply: PortReply) => {
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if ("error" in reply) {
        const { message, name, status } = reply.error;
        // The main thread's part refused the request (e.g. too many entries): the
        // query's fault, a 400 with its words; anything else is Sieve's, a 500.
        if (status !== undefined && status >= 400 && status < 500) {
          p.reject(new QueryError("bad_request", message));
        } else {
          const e = new Error(message);
          e.name = name;
          p.reject(e);
        }
      } else p.resolve(reply.value);
    });
    // Between tasks the port must not keep the worker's event loop alive on its own.
    port1.unref();
  }

  /** Serves task `task` from now on; the previous task's calls are failed. */
  begin(task: number): void {
    this.end();
    this.task = task;
  }

  /** Ends the current task's calls. */
  end(): void {
    this.task = -1;
    for (const p of this.pending.values()) p.reject(new Error("the query task ended"));
    this.pending.clear();
  }

  call<T>(call: PortCall["call"], req: unknown): Promise<T> {
    if (this.task < 0) return Promise.reject(new Error("no query task to call for"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.port.postMessage({ id, task: this.task, call, req } satisfies PortCall);
    });
  }
}

/**
 * The worker's querier. The gateway and ingester clients are imported only when the setup
 * names them: a worker that does not need them starts ~250 ms sooner (measured: importing
 * `@sieve/bloom-gateway` alone takes 0.9 s, the querier and storage 0.65 s).
 */
async function build(setup: WorkerSetup, store: ObjectStore, caller: PortCaller): Promise<Querier> {
  let chunkFilter: ChunkFilter | undefined;
  if (setup.chunkFilter === "port") {
    chunkFilter = {
      filterChunkRefs: (req: FilterRequest) => caller.call<FilterResponse>("filter", req),
    };
  } else if (setup.chunkFilter === "none") chunkFilter = undefined;
  else if ("local" in setup.chunkFilter) {
    const [{ BloomGateway }, { pino }, { Registry }] = await Promise.all([
      import("@sieve/bloom-gateway"),
      import("pino"),
      import("prom-client"),
    ]);
    const logger = pino({ level: setup.logLevel ?? "warn" });
    // Its metrics stay in the worker: a registry nobody scrapes.
    chunkFilter = new BloomGateway(setup.chunkFilter.local, store, logger, new Registry());
  } else {
    const { BloomGatewayClient } = await import("@sieve/bloom-gateway");
    chunkFilter = new BloomGatewayClient(setup.chunkFilter);
  }
  let ingesters: IngesterQuerier | undefined;
  if (setup.ingesters === "port") {
    const port: IngesterQuerier = {
      query: (req) => caller.call<IngesterStream[]>("query", req),
      series: (req) => caller.call<{ labels: string; fingerprint: bigint }[]>("series", req),
      volume: (req) => caller.call<IngesterVolume[]>("volume", req),
      stats: (req) => caller.call<IngesterStats>("stats", req),
      patterns: (req) => caller.call<PatternSeries[]>("patterns", req),
      querySample: (req) => caller.call<IngesterSamplePart[]>("sample", req),
    };
    // Skipped when they hold nothing of the range: no hop to the main thread either.
    ingesters = setup.memory === undefined ? port : skipIdleIngesters(port, setup.memory);
  } else if (setup.ingesters !== "none") {
    const { IngesterHttpClient } = await import("@sieve/ingester");
    ingesters = new IngesterHttpClient(setup.ingesters);
  }
  // No metrics here: the counts travel back with each answer to the main thread's
  // registry. The report logs here (once per series, per worker) and its counts travel too.
  const { pino } = await import("pino");
  return new Querier({
    config: setup.config,
    store,
    report: new ReadReport({ logger: pino({ level: setup.logLevel ?? "warn" }) }),
    ...(setup.retention !== undefined && { retention: setup.retention }),
    ...(setup.storeWrites !== undefined && { storeWrites: setup.storeWrites }),
    ...(chunkFilter !== undefined && { chunkFilter }),
    ...(ingesters !== undefined && { ingesters }),
  });
}

const setup = workerData as WorkerSetup;
const caller = new PortCaller();
// A worker runs one query at a time: a file store's reads block it rather than take a
// thread-pool round trip per step (FsObjectStoreOptions.blockingReads).
const store = openStore(setup.store, { blockingReads: true });
// Built and warmed while piscina loads this module: a worker takes no task before.
const querier = await build(setup, store, caller);
{
  const { pino } = await import("pino");
  const local = typeof setup.chunkFilter === "object" && "local" in setup.chunkFilter;
  await readyQuerier(querier, store, {
    bloomBytes: local ? Math.floor(setup.chunkFilter.local.cacheMaxBytes / 2) : 0,
    logger: pino({ level: setup.logLevel ?? "warn" }),
    what: "query worker",
  });
}

/** Runs one task (piscina calls the default export). */
export default async function run(work: WorkerTask): Promise<QueryAnswer> {
  if ("ping" in work) {
    await new Promise((resolve) => setTimeout(resolve, work.ping));
    return { status: 200, contentType: "text/plain", body: "" };
  }
  const { task, id } = work;
  caller.begin(id);
  const before = querier.report.counts();
  try {
    const answer = await handleQuery(querier, task);
    const readReport = querier.report.since(before);
    const counted =
      readReport.unreadableSeries + readReport.unreadableSegments > 0 ||
      Object.keys(readReport.failedOpenChunks).length > 0;
    return counted ? { ...answer, readReport } : answer;
  } finally {
    caller.end();
  }
}
