/**
 * Queries on worker threads (piscina), one query per worker at a time, each worker with a
 * V8 heap cap: a query that burns CPU or memory costs one worker, never the main thread
 * (which keeps accepting pushes and answering `/ready`) nor the process. At the tenant's
 * `queryTimeoutMs` (time queued included) the task is aborted: piscina terminates the
 * worker, synchronous evaluation included, and starts a fresh one.
 *
 * The main thread keeps what only it has, the in-process ingester (and optionally the
 * bloom gateway), and answers a worker's calls to them over a MessagePort each worker
 * offers once ("port" in {@link WorkerSetup}; {@link PortOffer}).
 */
import { availableParallelism } from "node:os";
import type { MessagePort } from "node:worker_threads";
import type { BloomGatewayConfig } from "@sieve/bloom-gateway";
import type { RetentionConfig } from "@sieve/logql";
import type { StoreConfig } from "@sieve/storage";
import type { Logger } from "pino";
import { Piscina } from "piscina";
import type { Registry } from "prom-client";
import { limitsFor, type QuerierConfig } from "./config.js";
import type { ChunkFilter, IngesterQuerier } from "@sieve/proto";
import { ERR_DEADLINE_EXCEEDED, workerHeap } from "./errors.js";
import { errorAnswer, type QueryAnswer, type QueryTask } from "./handler.js";
import { ReadReport } from "./labels.js";
import { QuerierMetrics } from "./metrics.js";

/** Base URLs of remote services and the client's timeout. */
export interface RemoteSetup {
  readonly urls: readonly string[];
  readonly timeoutMs?: number;
}

/**
 * What a worker builds its querier from, as plain data (it crosses to the worker as
 * `workerData`).
 */
export interface WorkerSetup {
  readonly config: QuerierConfig;
  /** The object store the worker opens (each worker has its own client and caches). */
  readonly store: StoreConfig;
  /**
   * The bloom gateway: remote gateways; a gateway in the worker over its store (`local`,
   * as a lone querier prunes); the main thread's (`port`); or no pruning (`none`).
   */
  readonly chunkFilter: "none" | "port" | RemoteSetup | { readonly local: BloomGatewayConfig };
  /** The ingesters: remote; the main thread's in-process ingester (`port`); or none. */
  readonly ingesters: "none" | "port" | RemoteSetup;
  /**
   * With `ingesters: "port"`: the in-process ingesters' watermarks (kit's
   * `MemoryWatermark`): a call whose range they cannot hold is answered here, empty,
   * without the hop to the main thread and every ingest worker.
   */
  readonly memory?: SharedArrayBuffer;
  /** The process's count of store writes, when it is the store's only writer (see Querier). */
  readonly storeWrites?: SharedArrayBuffer;
  /** pino level of the worker's own logs (the local gateway's); default `warn`. */
  readonly logLevel?: string;
  /** The compactor's retention, which queries apply (none when absent). */
  readonly retention?: RetentionConfig;
}

/** Options of a {@link QueryPool}. */
export interface QueryPoolOptions {
  /** Worker threads; default `os.availableParallelism()`. */
  readonly workers?: number;
  /**
   * Threads the cache budgets are shared among: default `workers`; one more when the main
   * thread runs needle queries too (inline.ts), over the share {@link QueryPool.shared} names.
   */
  readonly shares?: number;
  /** V8 old-generation heap cap of each worker, MiB; default 1024. */
  readonly heapMb?: number;
  readonly setup: WorkerSetup;
  /** The main thread's ingester, for `setup.ingesters: "port"`. */
  readonly ingesters?: IngesterQuerier;
  /** The main thread's bloom gateway, for `setup.chunkFilter: "port"`. */
  readonly chunkFilter?: ChunkFilter;
  /** Where the querier's metrics are registered (the counts each answer carries). */
  readonly registry?: Registry;
  readonly logger?: Logger;
}

/**
 * The worker's task: the request and its id (which the worker's calls to the main thread
 * name); or a `ping` (see {@link QueryPool.ready}).
 */
export type WorkerTask =
  { readonly task: QueryTask; readonly id: number } | { readonly ping: number };

/**
 * What a worker posts once as it loads (piscina passes it on as the pool's `message`
 * event): its end of the channel its calls to the main thread's parts travel on.
 */
export interface PortOffer {
  readonly queryPort: MessagePort;
}

/** A call from a worker to the main thread's parts, for task `task`. */
export interface PortCall {
  readonly id: number;
  readonly task: number;
  readonly call: "query" | "series" | "filter" | "volume" | "stats" | "patterns" | "sample";
  readonly req: unknown;
}

/** The main thread's reply to a {@link PortCall}. */
export type PortReply =
  | { readonly id: number; readonly value: unknown }
  | {
      readonly id: number;
      readonly error: { readonly message: string; readonly name: string; readonly status?: number };
    };

/** What ends a task's calls to the main thread's parts: made at its first call. */
interface TaskCalls {
  controller: AbortController | undefined;
}

/** How long a ping holds its worker, so that the pings of {@link QueryPool.ready} spread. */
const PING_HOLD_MS = 20;

/**
 * The setup each worker runs with: the cache budgets are the process's, so each of
 * `shares` threads holds an equal share of them.
 */
function shareCaches(setup: WorkerSetup, shares: number): WorkerSetup {
  const share = (bytes: number): number => Math.max(1, Math.floor(bytes / shares));
  const { config, chunkFilter } = setup;
  return {
    ...setup,
    config: {
      ...config,
      chunkCacheBytes: share(config.chunkCacheBytes),
      segmentCacheBytes: share(config.segmentCacheBytes),
    },
    chunkFilter:
      typeof chunkFilter === "object" && "local" in chunkFilter
        ? { local: { ...chunkFilter.local, cacheMaxBytes: share(chunkFilter.local.cacheMaxBytes) } }
        : chunkFilter,
  };
}

/** The default heap cap of a worker, MiB. */
const DEFAULT_WORKER_HEAP_MB = 1024;

/**
 * The worker's script. piscina loads a JavaScript file: `dist/query-worker-entry.cjs`
 * (which imports `query-worker.js`; it says why), built by `tsc -b` before tests run,
 * reached from `src/` (vitest) and `dist/` alike because both sit one level under the
 * package.
 */
const WORKER_URL = new URL("../dist/query-worker-entry.cjs", import.meta.url);

/**
 * A pool of query workers; see the file comment. `run` never rejects: a timeout is a 504,
 * a worker out of heap a 400 naming `heapMb`, any other crash a 500 whose `internal`
 * the HTTP layer logs with the request id.
 */
export class QueryPool {
  /** The querier's metrics on the main thread (absent without a registry). */
  readonly metrics: QuerierMetrics | undefined;
  /** Counts what the workers' read reports counted (their answers carry it). */
  readonly report: ReadReport;
  /** The querier configuration the workers run with (limits are read here too). */
  readonly config: QuerierConfig;
  /** What each worker runs with: the setup, its cache budgets a share of the process's. */
  readonly shared: WorkerSetup;
  readonly heapMb: number;
  private readonly piscina: Piscina<WorkerTask, QueryAnswer>;
  private readonly usesPort: boolean;
  private nextTask = 0;
  /** Tasks running now, by id: their calls' signal (see `serve`). */
  private readonly tasks = new Map<number, TaskCalls>();

  constructor(private readonly options: QueryPoolOptions) {
    const { setup } = options;
    this.config = setup.config;
    this.heapMb = options.heapMb ?? DEFAULT_WORKER_HEAP_MB;
    const workers = options.workers ?? availableParallelism();
    if (setup.ingesters === "port" && options.ingesters === undefined) {
      throw new TypeError('setup.ingesters is "port": pass the main thread\'s ingesters');
    }
    if (setup.chunkFilter === "port" && options.chunkFilter === undefined) {
      throw new TypeError('setup.chunkFilter is "port": pass the main thread\'s chunkFilter');
    }
    this.usesPort = setup.ingesters === "port" || setup.chunkFilter === "port";
    this.metrics =
      options.registry !== undefined ? new QuerierMetrics(options.registry) : undefined;
    this.report = new ReadReport({
      ...(options.registry !== undefined && { registry: options.registry }),
      ...(options.logger !== undefined && { logger: options.logger }),
    });
    this.shared = shareCaches(setup, options.shares ?? workers);
    this.piscina = new Piscina<WorkerTask, QueryAnswer>({
      filename: WORKER_URL.href,
      workerData: this.shared,
      minThreads: workers,
      maxThreads: workers,
      // One query per worker: terminating a worker at a deadline ends only that query.
      concurrentTasksPerWorker: 1,
      // Workers stay warm (their caches are the querier's caches).
      idleTimeout: Number.POSITIVE_INFINITY,
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb },
      // No Atomics.wait between tasks: a worker's event loop keeps running (sockets,
      // cache timers) while it waits for the next query.
      atomics: "disabled",
    });
    // Each worker offers its port to this thread's parts once, as it loads.
    this.piscina.on("message", (message: unknown) => {
      const port = (message as Partial<PortOffer> | null)?.queryPort;
      if (port === undefined) return;
      if (this.usesPort) this.serve(port);
      else port.close();
    });
    // Without a listener, an 'error' of an idle worker would be thrown on the main thread.
    this.piscina.on("error", (error: unknown) => {
      options.logger?.error({ err: error }, "query worker failed while idle");
    });
  }

  /**
   * Resolves once every worker has loaded (a fresh worker takes ~0.7 s to import the
   * querier and the store client): one short ping per worker, all at once, so each
   * worker takes one. Call it before listening, so the first queries find warm workers.
   */
  async ready(): Promise<void> {
    const n = this.piscina.options.maxThreads;
    await Promise.all(Array.from({ length: n }, () => this.piscina.run({ ping: PING_HOLD_MS })));
  }

  /** Worker threads now running. */
  get threads(): number {
    return this.piscina.threads.length;
  }

  /**
   * Runs `task` on a worker. `startedMs` is when the request arrived (`performance.now()`):
   * the tenant's `queryTimeoutMs` counts from then, time queued included.
   */
  async run(task: QueryTask, startedMs = performance.now()): Promise<QueryAnswer> {
    const timeoutMs = limitsFor(this.config, task.tenant).queryTimeoutMs;
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    if (timeoutMs > 0) {
      const left = Math.max(0, startedMs + timeoutMs - performance.now());
      timer = setTimeout(() => {
        abort.abort();
      }, left);
    }
    const id = this.nextTask++;
    // The task's calls to this thread's parts end with it (see `serve`).
    const calls: TaskCalls = { controller: undefined };
    if (this.usesPort) this.tasks.set(id, calls);
    try {
      return await this.piscina.run({ task, id }, { signal: abort.signal });
    } catch (error) {
      if (abort.signal.aborted) return errorAnswer(504, ERR_DEADLINE_EXCEEDED);
      if ((error as { code?: string }).code === "ERR_WORKER_OUT_OF_MEMORY") {
        const refused = workerHeap(this.heapMb);
        return errorAnswer(refused.status, refused.message);
      }
      const e = error instanceof Error ? error : new Error(String(error));
      return {
        ...errorAnswer(500, `query worker failed: ${e.message}`),
        internal: { message: e.message, ...(e.stack !== undefined && { stack: e.stack }) },
      };
    } finally {
      clearTimeout(timer);
      this.tasks.delete(id);
      calls.controller?.abort();
    }
  }

  /**
   * Answers the calls a worker makes on `port` (its {@link PortOffer}), for as long as the
   * worker lives. A call is served while its task runs, with the task's signal, so the
   * ingester stops working for a task that is over (answered, timed out, or its worker
   * terminated); a call or answer for a task that is over goes to nobody.
   */
  private serve(port: MessagePort): void {
    const { ingesters, chunkFilter } = this.options;
    port.on("message", (msg: PortCall) => {
      const task = this.tasks.get(msg.task);
      if (task === undefined) return;
      // Made for the task's first call only: most tasks call nothing, and an abort costs.
      const ended = (task.controller ??= new AbortController()).signal;
      const options = { signal: ended };
      const call = (): Promise<unknown> => {
        switch (msg.call) {
          case "query":
            return ingesters!.query(msg.req as Parameters<IngesterQuerier["query"]>[0], options);
          case "series":
            return ingesters!.series(msg.req as Parameters<IngesterQuerier["series"]>[0], options);
          case "filter":
            return chunkFilter!.filterChunkRefs(
              msg.req as Parameters<ChunkFilter["filterChunkRefs"]>[0],
            );
          case "volume":
            return ingesters!.volume(msg.req as Parameters<IngesterQuerier["volume"]>[0], options);
          case "stats":
            return ingesters!.stats(msg.req as Parameters<IngesterQuerier["stats"]>[0], options);
          case "patterns":
            return ingesters!.patterns(
              msg.req as Parameters<IngesterQuerier["patterns"]>[0],
              options,
            );
          case "sample":
            return ingesters!.querySample(
              msg.req as Parameters<IngesterQuerier["querySample"]>[0],
              options,
            );
        }
      };
      const live = (): boolean => !ended.aborted;
      Promise.resolve()
        .then(call)
        .then(
          (value) => {
            if (live()) port.postMessage({ id: msg.id, value } satisfies PortReply);
          },
          (error: unknown) => {
            if (!live()) return;
            const e = error as { message?: string; name?: string; status?: number };
            port.postMessage({
              id: msg.id,
              error: {
                message: String(e.message ?? error),
                name: e.name ?? "Error",
                ...(typeof e.status === "number" && { status: e.status }),
              },
            } satisfies PortReply);
          },
        );
    });
    // A terminated worker's port closes; it must not keep this thread alive meanwhile.
    port.unref();
  }

  /** Stops the workers (queries in flight are aborted). */
  async close(): Promise<void> {
    await this.piscina.destroy();
  }
}
