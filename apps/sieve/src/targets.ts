import { hostname } from "node:os";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { Registry, collectDefaultMetrics } from "prom-client";
import { BloomGateway, BloomGatewayClient, bloomGatewayPlugin } from "@sieve/bloom-gateway";
import {
  Compactor,
  DeleteRequestsStore,
  DeletionProcessor,
  deleteApiPlugin,
  deletionMetrics,
  retentionConfig,
} from "@sieve/compactor";
import { distributorPlugin } from "@sieve/distributor";
import {
  DEFAULT_CONFIG as DEFAULT_INGESTER_CONFIG,
  IngesterHttpClient,
  createIngester,
  createIngesterWorkers,
  type IngesterConfig,
  type IngesterHandle,
} from "@sieve/ingester";
import {
  QueryPool,
  createInlineQueries,
  createQuerier,
  querierPlugin,
  skipIdleIngesters,
  type InlineQueries,
  type QueryTask,
  type WorkerSetup,
} from "@sieve/querier";
import type { IngesterQuerier } from "@sieve/proto";
import {
  KafkaQueueConsumer,
  KafkaQueueWriter,
  openWal,
  type LocalWal,
  type QueueConsumer,
  type QueueWriter,
} from "@sieve/queue";
import {
  countingWrites,
  openStore as openStorage,
  writeCounter,
  type ObjectStore,
  type StoreConfig,
} from "@sieve/storage";
import { closeUnusedConnections, notFoundHandler } from "@sieve/kit";
import { registerBuildInfo } from "./buildinfo.js";
import { checkTarget, type SieveConfig } from "./config.js";
import { REHEARSAL_ADDRESS, ROUTE_REHEARSALS, rehearseRoutes } from "./rehearse.js";

/** What `sieve <target>` can run. */
export const TARGETS = [
  "all",
  "distributor",
  "ingester",
  "bloom-gateway",
  "querier",
  "compactor",
] as const;
/** One of {@link TARGETS}. */
export type Target = (typeof TARGETS)[number];

/** A started process: its HTTP server and the way to stop it gracefully. */
export interface Running {
  readonly app: FastifyInstance;
  /** The address it listens on, e.g. `http://127.0.0.1:3100`. */
  readonly url: string;
  /** The internal listener's address when `server.internalPort` is set, else {@link url}. */
  readonly internalUrl: string;
  /** Stops accepting, flushes every head chunk, commits the queue, closes files. */
  close(): Promise<void>;
}

/** What a target starts from: the whole tree, read once (`loadSieveConfig`), and a logger. */
export interface StartOptions {
  readonly config: SieveConfig;
  readonly logger: Logger;
  /**
   * An ingester worker died (its partitions stopped): the process should end, to be
   * restarted and recover from the queue as after a crash. Default: log and exit(1).
   */
  readonly onFatal?: (error: Error) => void;
}

/**
 * A lone ingester names itself after its host, as Loki's do, unless configured: two
 * ingesters sharing a bucket must not share the name their flush manifests carry.
 */
function ingesterConfig(target: Target, config: IngesterConfig): IngesterConfig {
  if (target === "all" || config.instanceId !== DEFAULT_INGESTER_CONFIG.instanceId) return config;
  const host = hostname()
    .replace(/[^A-Za-z0-9_.-]/g, "-")
    .slice(0, 64);
  return { ...config, instanceId: host === "" ? config.instanceId : host };
}

/** The configured object store, as data (a query worker opens its own from it). */
export function storeConfig(config: SieveConfig): StoreConfig {
  if (config.storage.backend === "filesystem") {
    return { backend: "filesystem", dir: config.storage.dir };
  }
  const { bucket, region, endpoint, forcePathStyle } = config.storage.s3;
  return {
    backend: "s3",
    bucket,
    forcePathStyle,
    ...(region !== "" && { region }),
    ...(endpoint !== "" && { endpoint }),
  };
}

/** Opens the configured object store. */
export function openStore(config: SieveConfig): ObjectStore {
  return openStorage(storeConfig(config));
}

/**
 * The store the main thread's needle queries read through: a file store's reads block, as
 * a query worker's do (query-worker.ts), rather than take a thread-pool round trip per
 * step (open, stat, read). A needle reads a chunk's tail and a block or two, in the page
 * cache after a flush. Through the pool, 1-4 of the first 80 needles after a restart
 * passed the lane's budget and ran again on a worker; with blocking reads, 0-1. A read
 * holds the thread at most one step past the budget (inline.ts), as a synchronous step of
 * the query does.
 */
function inlineStore(config: SieveConfig, store: ObjectStore): ObjectStore {
  const s = storeConfig(config);
  return s.backend === "filesystem" ? openStorage(s, { blockingReads: true }) : store;
}

/** The bloom gateway a querier without one in process uses: remote, or its own. */
function chunkFilterOf(
  config: SieveConfig,
  store: ObjectStore,
  logger: Logger,
  registry: Registry,
): BloomGateway | BloomGatewayClient {
  const urls = config.cluster.bloomGatewayUrls;
  // Without gateway addresses a lone querier prunes in process over the same store.
  return urls.length > 0
    ? new BloomGatewayClient({ urls, logger })
    : new BloomGateway(config.bloomGateway, store, logger, registry);
}

/**
 * What each query worker builds its querier from: the store; the gateways' addresses, or
 * a gateway of its own over the store; the ingesters' addresses, or this process's
 * ingester (over a port).
 */
function querierSetup(
  config: SieveConfig,
  localIngester: IngesterHandle | undefined,
  logger: Logger,
): WorkerSetup {
  const { ingesterUrls, bloomGatewayUrls } = config.cluster;
  return {
    config: config.querier,
    store: storeConfig(config),
    chunkFilter:
      bloomGatewayUrls.length > 0 ? { urls: bloomGatewayUrls } : { local: config.bloomGateway },
    ingesters: localIngester ? "port" : ingesterUrls.length > 0 ? { urls: ingesterUrls } : "none",
    ...(localIngester !== undefined && { memory: localIngester.memory }),
    logLevel: logger.level,
    retention: retentionConfig(config.compactor),
  };
}

/**
 * The ingesters a querier on the main thread reads: this process's (skipped while they
 * hold nothing of a query's range), or the cluster's over HTTP, or none.
 */
function inProcessIngesters(
  config: SieveConfig,
  ingester: IngesterHandle | undefined,
): { ingesters?: IngesterQuerier } {
  if (ingester !== undefined) return { ingesters: skipIdleIngesters(ingester, ingester.memory) };
  const urls = config.cluster.ingesterUrls;
  return urls.length > 0 ? { ingesters: new IngesterHttpClient({ urls }) } : {};
}

function kafkaOptions(config: SieveConfig) {
  const { brokers, topic } = config.queue.kafka;
  return { brokers, topic, partitions: config.queue.partitions };
}

/**
 * Starts `target` in this process on the configured port. `all` runs every component
 * around one write-ahead log (or Kafka) and one object store, with the querier calling
 * the ingester and the bloom gateway in process; the others run one role each and reach
 * the rest over HTTP and the queue.
 */
export async function start(target: Target, options: StartOptions): Promise<Running> {
  const { config, logger } = options;
  checkTarget(config, target);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // A pino Logger as fastify's logger narrows the instance type; the plugins take the default one.
  const app = Fastify({
    loggerInstance: logger,
    // The process's own rehearsal requests (rehearse.ts) are not the request log's business.
    logController: new LogController({
      disableRequestLogging: (request) => request.socket.remoteAddress === REHEARSAL_ADDRESS,
    }),
  }) as unknown as FastifyInstance;
  // The internal APIs get a listener of their own when configured, as Loki keeps its
  // ingester and gateway calls on the internal gRPC port: the push port then serves
  // only what a client may call.
  const separate = config.server.internalPort !== undefined;
  const internal = separate
    ? (Fastify({ loggerInstance: logger }) as unknown as FastifyInstance)
    : app;
  // A connection no request is on must not hold the close (a querier's ended tail leaves
  // one on the ingester's listener: see closeUnusedConnections).
  for (const server of separate ? [app, internal] : [app]) closeUnusedConnections(server);
  const closers: (() => Promise<void>)[] = [];
  /** Why the process is not ready, one check per component (undefined: ready). */
  const readiness: (() => string | undefined)[] = [];
  const wants = (role: Exclude<Target, "all">): boolean => target === "all" || target === role;
  /** The queries the main thread's querier rehearsed as it warmed (none without one). */
  let rehearsal: readonly QueryTask[] = [];

  try {
    const needsQueue = wants("distributor") || wants("ingester");
    let wal: LocalWal | undefined;
    if (needsQueue && config.queue.backend === "wal") {
      wal = await openWal({ dir: config.queue.walDir, partitions: config.queue.partitions });
      const opened = wal;
      closers.push(() => opened.close());
    }
    // `sieve all` over a file-system store is the store's only writer: every thread counts
    // its writes in one shared counter, and query workers keep index listings while it is
    // unchanged (the querier's listings.ts). A store others may write (S3) is listed anew.
    const storeWrites =
      target === "all" && config.storage.backend === "filesystem" ? writeCounter() : undefined;
    const opened =
      wants("ingester") || wants("querier") || wants("bloom-gateway") || wants("compactor")
        ? openStore(config)
        : undefined;
    const store =
      opened !== undefined && storeWrites !== undefined
        ? countingWrites(opened, storeWrites)
        : opened;

    if (wants("distributor")) {
      let writer: QueueWriter;
      if (wal !== undefined) writer = wal.writer;
      else {
        const kafka = await KafkaQueueWriter.connect(kafkaOptions(config));
        closers.push(() => kafka.close());
        writer = kafka;
      }
      await app.register(
        distributorPlugin({
          config: config.distributor,
          queue: writer,
          logger,
          registry,
          serveOps: false,
        }),
      );
    }

    let ingester: IngesterHandle | undefined;
    /** The ingester workers' metrics, added to this registry's on `/metrics`. */
    let workerMetrics: (() => Promise<string>) | undefined;
    if (wants("ingester")) {
      let consumer: QueueConsumer;
      if (wal !== undefined) consumer = wal.consumer;
      else {
        const { groupId, sessionTimeoutMs, heartbeatIntervalMs } = config.queue.kafka;
        consumer = new KafkaQueueConsumer({
          ...kafkaOptions(config),
          groupId,
          sessionTimeoutMs,
          heartbeatIntervalMs,
        });
      }
      const ingesterCfg = ingesterConfig(target, config.ingester);
      let service: {
        ingester: IngesterHandle;
        plugin: ReturnType<typeof createIngester>["plugin"];
      };
      if (ingesterCfg.workers > 0) {
        // Partitions spread over worker threads: heads, blooms and flushes on every core.
        const workers = createIngesterWorkers({
          config: ingesterCfg,
          consumer,
          store: storeConfig(config),
          ...(storeWrites !== undefined && { storeWrites }),
          logger,
          registry,
          onFatal: options.onFatal ?? exitOnFatal(logger),
        });
        workerMetrics = () => workers.metricsText();
        service = workers;
      } else {
        service = createIngester({
          config: ingesterCfg,
          consumer,
          store: store!,
          logger,
          registry,
        });
      }
      await internal.register(service.plugin({ serveOps: false }));
      const running = service.ingester;
      ingester = running;
      readiness.push(() => running.notReadyReason);
      // Runs before the queue closes (closers run in reverse): flush, commit, then close.
      closers.push(() => running.stop());
    }

    let gateway: BloomGateway | undefined;
    if (wants("bloom-gateway")) {
      gateway = new BloomGateway(config.bloomGateway, store!, logger, registry);
      await internal.register(
        bloomGatewayPlugin({
          config: config.bloomGateway,
          store: store!,
          logger,
          registry,
          gateway,
          serveOps: false,
        }),
      );
    }

    /** Whether this process's compactor is in a run (on this thread): set below. */
    let compacting = (): boolean => false;
    /** Starts this process's compactor: set below, called once the queries are rehearsed. */
    let startCompactor = (): void => undefined;
    if (wants("querier")) {
      const querierConfig = config.querier;
      // Tails are held on the main thread: by this process's ingester, or the cluster's.
      const tailer =
        ingester ??
        (config.cluster.ingesterUrls.length > 0
          ? new IngesterHttpClient({ urls: config.cluster.ingesterUrls })
          : undefined);
      const common = {
        authEnabled: querierConfig.authEnabled,
        multiTenantQueries: querierConfig.multiTenantQueriesEnabled,
        registry,
        logger,
        serveOps: false,
        ...(tailer !== undefined && { tailer }),
      } as const;
      if (querierConfig.workers > 0) {
        // Queries run on worker threads (issue 10): each worker opens the store and, with
        // no gateway addresses, prunes over it itself; an in-process ingester is reached
        // over a port to this thread.
        // Needle queries begin on this thread (inline.ts), over a share of the caches, but
        // not while a compaction run (set up below) works on it.
        const inlined = querierConfig.inlineBudgetMs > 0;
        const pool = new QueryPool({
          workers: querierConfig.workers,
          shares: querierConfig.workers + (inlined ? 1 : 0),
          heapMb: querierConfig.workerHeapMb,
          setup: {
            ...querierSetup(config, ingester, logger),
            ...(storeWrites !== undefined && { storeWrites }),
          },
          ...(ingester !== undefined && { ingesters: ingester }),
          registry,
          logger,
        });
        closers.push(() => pool.close());
        let inline: InlineQueries | undefined;
        if (inlined) {
          const chunkFilter = gateway ?? chunkFilterOf(config, store!, logger, registry);
          inline = createInlineQueries(
            pool,
            {
              store: inlineStore(config, store!),
              chunkFilter,
              retention: retentionConfig(config.compactor),
              ...(storeWrites !== undefined && { storeWrites }),
              ...inProcessIngesters(config, ingester),
            },
            querierConfig.inlineBudgetMs,
            () => compacting(),
          );
          const local = chunkFilter instanceof BloomGateway;
          const bloomBytes = local ? Math.floor(config.bloomGateway.cacheMaxBytes / 2) : 0;
          [, rehearsal] = await Promise.all([
            pool.ready(),
            inline.ready(store!, bloomBytes, logger),
          ]);
        } else await pool.ready();
        await app.register(
          querierPlugin({ pool, ...(inline !== undefined && { inline }), ...common }),
        );
      } else {
        const querier = createQuerier({
          config: querierConfig,
          ...(storeWrites !== undefined && { storeWrites }),
          retention: retentionConfig(config.compactor),
          store: store!,
          chunkFilter: gateway ?? chunkFilterOf(config, store!, logger, registry),
          registry,
          logger,
          ...inProcessIngesters(config, ingester),
        });
        await app.register(querierPlugin({ querier, ...common }));
      }
    }

    if (wants("compactor")) {
      // One per store: a second compactor (another `sieve all` or `sieve compactor` on the
      // same bucket) waits for the lock. It serves the delete API, as Loki's compactor does
      // (the requests live in the object store, where queriers read them for filtering),
      // and processes the requests as a job of each run.
      const { querier, ingester } = config;
      const deletionMode = (tenant: string): string =>
        (Object.hasOwn(querier.overrides, tenant)
          ? querier.overrides[tenant]?.deletionMode
          : undefined) ?? querier.limits.deletionMode;
      await app.register(
        deleteApiPlugin({
          requests: new DeleteRequestsStore(store!),
          authEnabled: querier.authEnabled,
          deletionMode,
          cancelPeriodMs: config.compactor.deleteRequestCancelPeriodMs,
          metrics: deletionMetrics(registry),
          logger,
        }),
      );
      const deletion = new DeletionProcessor({
        deletionMode,
        cancelPeriodMs: config.compactor.deleteRequestCancelPeriodMs,
        deleteDelayMs: config.compactor.retentionDeleteDelayMs,
        // The tenants' default bloom shape; n-grams and token kinds come from each old
        // index entry (a tenant's own falsePositiveRate override is not applied).
        bloom: {
          filter: { fp: ingester.blooms.falsePositiveRate },
          layout: ingester.blooms.filterLayout,
          maxBloomBytes: ingester.maxBloomBytes,
        },
      });
      const compactor = new Compactor({
        config: config.compactor,
        store: store!,
        logger: logger.child({ component: "compactor" }),
        registry,
        jobs: [
          {
            name: "deletes",
            run: async (ctx) => {
              await deletion.run({
                store: ctx.store,
                logger: ctx.logger,
                registry,
                isLeaseHeld: () => ctx.lock.held,
              });
            },
          },
        ],
      });
      compacting = () => compactor.busy;
      startCompactor = () => {
        compactor.start();
      };
      closers.push(() => compactor.stop());
    }

    registerBuildInfo(app);
    for (const server of separate ? [app, internal] : [app]) {
      // Loki's (Go's) 404 for a path no component serves, not fastify's JSON.
      server.setNotFoundHandler(notFoundHandler);
      server.get("/ready", async (_request, reply) => {
        const why = readiness.map((check) => check()).filter((r) => r !== undefined);
        return reply
          .code(why.length === 0 ? 200 : 503)
          .type("text/plain")
          .send(why.length === 0 ? "ready\n" : `not ready: ${why.join("; ")}\n`);
      });
      server.get("/metrics", async (_request, reply) => {
        const own = await registry.metrics();
        const text = workerMetrics === undefined ? own : `${own}\n${await workerMetrics()}`;
        return reply.type(registry.contentType).send(text);
      });
    }

    // The main thread's rehearsal again through the routes, before the ingesters start, and
    // before the compactor does: while it runs, needles leave this thread (inline.ts), and
    // its first run at a start took all but 10 of the rehearsal's 60 needles to the workers.
    if (rehearsal.length > 0) await rehearseRoutes(app, rehearsal, ROUTE_REHEARSALS, logger);
    startCompactor();
    if (ingester !== undefined) await ingester.start();
    const internalUrl = separate
      ? await internal.listen({ host: config.server.host, port: config.server.internalPort })
      : undefined;
    const address = await app.listen({ host: config.server.host, port: config.server.port });
    let closing: Promise<void> | undefined;
    return {
      app,
      url: address,
      internalUrl: internalUrl ?? address,
      close: () => (closing ??= shutdown([app, internal], closers, logger)),
    };
  } catch (error) {
    await shutdown([app, internal], closers, logger);
    throw error;
  }
}

/** The default of {@link StartOptions.onFatal}: the process ends, for its supervisor to restart it. */
function exitOnFatal(logger: Logger): (error: Error) => void {
  return (error) => {
    logger.fatal({ err: error }, "ingester worker died: exiting, to recover from the queue");
    process.exit(1);
  };
}

/** Stops accepting requests, then runs the closers newest first (ingester before its queue). */
async function shutdown(
  servers: readonly FastifyInstance[],
  closers: readonly (() => Promise<void>)[],
  logger: Logger,
): Promise<void> {
  await Promise.all([...new Set(servers)].map((server) => server.close()));
  for (const close of [...closers].reverse()) {
    try {
      await close();
    } catch (error) {
      logger.error({ err: error }, "error while shutting down");
    }
  }
}
