import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import { closeUnusedConnections, deadlineSignal, errorHandler, notFoundHandler } from "@sieve/kit";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import {
  ProtoError,
  decodeQueryRequest,
  decodeSampleRequest,
  decodeSeriesRequest,
  decodeTailRequest,
  encodeQueryResponse,
  encodeSampleResponse,
  encodeSeriesResponse,
  decodeVolumeRequest,
  encodeVolumeResponse,
  decodeStatsRequest,
  encodeStatsResponse,
  decodePatternsRequest,
  encodePatternsResponse,
} from "@sieve/proto";
import type { QueueConsumer } from "@sieve/queue";
import type { IngesterConfig } from "./config.js";
import { IngesterError } from "./errors.js";
import type { FlushStore } from "./flush.js";
import { Ingester } from "./ingester.js";
import { IngesterMetrics } from "./metrics.js";
import { IngesterWorkers } from "./workers.js";
import type { IngesterHandle, IngesterWorkersOptions } from "./workers.js";

/** What {@link createIngester} needs: Loki's `New(cfg, store, logger, registry)` plus the queue. */
export interface IngesterServiceDeps {
  readonly config: IngesterConfig;
  readonly consumer: QueueConsumer;
  readonly store: FlushStore;
  readonly logger: Logger;
  /** Where the ingester's metrics are registered; `/metrics` serves it. */
  readonly registry: Registry;
  /** The clock, in milliseconds; injectable for tests. */
  readonly now?: () => number;
}

/**
 * Which routes a plugin registers: `internal` is what only other Sieve components call
 * (`/ingester/v1/*`, `/flush`), for a listener clients cannot reach, as Loki keeps them on
 * its internal gRPC port; `public` is the rest (`/ready`, `/metrics`); `all` is both.
 */
export type IngesterRoutes = "all" | "public" | "internal";

/** Options of the ingester's fastify plugin. */
export interface IngesterPluginOptions {
  /** Whether the plugin serves `/ready` and `/metrics` (false when the host serves them). */
  readonly serveOps?: boolean;
  /** Which routes to register. Default `all`. */
  readonly routes?: IngesterRoutes;
}

/**
 * The header carrying what is left of the querier's deadline, in ms: the ingester aborts
 * the query at that time (504 `timeout`).
 */
export const TIMEOUT_HEADER = "x-sieve-timeout-ms";

/** The media type of the internal query API's requests and answers (ingester.proto). */
export const PROTOBUF_TYPE = "application/x-protobuf";

/** Prometheus' text format, as prom-client's registries answer it. */
const PROMETHEUS_TEXT = Registry.PROMETHEUS_CONTENT_TYPE;

/** The longest deadline a caller may ask for; also the default. */
const MAX_QUERY_TIMEOUT_MS = 300_000;

/** An ingester and the routes that expose it. */
export interface IngesterService {
  readonly ingester: Ingester;
  readonly metrics: IngesterMetrics;
  /**
   * The internal query API and `POST /flush` (routes `internal`), and unless `serveOps` is
   * false `/ready` and `/metrics` (routes `public`); both by default.
   */
  plugin(options?: IngesterPluginOptions): FastifyPluginCallback;
}

function tenantHeader(request: FastifyRequest): string | undefined {
  const header = request.headers["x-scope-orgid"];
  return Array.isArray(header) ? header[0] : header;
}

/**
 * A signal for one query: aborted at the deadline the caller sent (a TimeoutError, 504)
 * or when the caller goes away before the answer (499).
 */
function querySignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const header = request.headers[TIMEOUT_HEADER];
  const asked = Number(Array.isArray(header) ? header[0] : header);
  const timeoutMs =
    Number.isFinite(asked) && asked > 0
      ? Math.min(asked, MAX_QUERY_TIMEOUT_MS)
      : MAX_QUERY_TIMEOUT_MS;
  const gone = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) gone.abort(new Error("client closed the request"));
  });
  return deadlineSignal(timeoutMs, gone.signal);
}

/** Decodes a request body with `decode`: bytes that are not the message are a 400. */
function decodeBody<T>(body: unknown, decode: (bytes: Uint8Array) => T): T {
  if (!Buffer.isBuffer(body)) {
    throw new IngesterError("invalid_request", `the body must be ${PROTOBUF_TYPE}`);
  }
  try {
    return decode(body);
  } catch (error) {
    if (error instanceof ProtoError) {
      throw new IngesterError("invalid_request", error.message, { cause: error });
    }
    throw error;
  }
}

/**
 * Builds an ingester from its dependencies, with a fastify plugin for its routes, so `sieve
 * all` mounts it in its one server and `sieve ingester` in its own ({@link createIngesterServer}).
 * Call `ingester.start()` to begin consuming.
 */
export function createIngester(deps: IngesterServiceDeps): IngesterService {
  const metrics = new IngesterMetrics(deps.registry);
  const ingester = new Ingester({
    config: deps.config,
    consumer: deps.consumer,
    store: deps.store,
    logger: deps.logger,
    metrics,
    ...(deps.now !== undefined && { now: deps.now }),
  });
  const metricsText = (): Promise<string> => deps.registry.metrics();
  return { ingester, metrics, plugin: pluginFor(ingester, metricsText) };
}

/** What {@link createIngesterWorkers} needs: the store as data, which each worker opens. */
export interface IngesterWorkersDeps extends Omit<IngesterWorkersOptions, "threads"> {
  /** Where the main thread's own metrics are; the workers' are added to them on `/metrics`. */
  readonly registry: Registry;
}

/** The ingester on `config.workers` worker threads (workers.ts), with the same routes. */
export interface IngesterWorkersService {
  readonly ingester: IngesterWorkers;
  /** The workers' metrics, summed, in the text format (for a host serving `/metrics`). */
  metricsText(): Promise<string>;
  plugin(options?: IngesterPluginOptions): FastifyPluginCallback;
}

/**
 * Builds the ingester on worker threads ({@link IngesterWorkers}) and its routes. Call
 * `ingester.start()` to begin consuming.
 */
export function createIngesterWorkers(deps: IngesterWorkersDeps): IngesterWorkersService {
  const ingester = new IngesterWorkers({ ...deps, threads: deps.config.workers });
  const metricsText = (): Promise<string> => ingester.metrics();
  const all = async (): Promise<string> =>
    `${await deps.registry.metrics()}\n${await metricsText()}`;
  return { ingester, metricsText, plugin: pluginFor(ingester, all) };
}

/** The routes of an ingester, in process or on workers. */
function pluginFor(
  ingester: IngesterHandle,
  metricsText: () => Promise<string>,
): (options?: IngesterPluginOptions) => FastifyPluginCallback {
  return (options: IngesterPluginOptions = {}): FastifyPluginCallback =>
    (app, _opts, done) => {
      // The ingester's own errors answer `{code, message}` JSON (the client reads the code);
      // any other error goes to the enclosing handler, as the routes rethrew them before.
      app.setErrorHandler(
        errorHandler({ body: "json", foreign: "default", logMessage: "ingester request failed" }),
      );
      const checkTenant = (request: FastifyRequest, tenant: string): void => {
        const header = tenantHeader(request);
        if (header !== tenant) {
          throw new IngesterError(
            "tenant_mismatch",
            `header ${JSON.stringify(header ?? "")}, body ${JSON.stringify(tenant)}`,
          );
        }
      };
      const routes = options.routes ?? "all";
      if (routes !== "public") internalRoutes(app, ingester, checkTenant);
      if (routes !== "internal" && options.serveOps !== false) {
        app.get("/ready", { logLevel: "warn" }, async (_request, reply) => {
          const reason = ingester.notReadyReason;
          return reason === undefined
            ? reply.type("text/plain").send("ready\n")
            : reply.code(503).type("text/plain").send(`not ready: ${reason}\n`);
        });
        app.get("/metrics", { logLevel: "warn" }, async (_request, reply) =>
          reply.type(PROMETHEUS_TEXT).send(await metricsText()),
        );
      }
      done();
    };
}

/** `/ingester/v1/*` and `/flush`: for queriers and operators, never for clients. */
function internalRoutes(
  app: FastifyInstance,
  ingester: IngesterHandle,
  checkTenant: (request: FastifyRequest, tenant: string) => void,
): void {
  // The query API speaks protobuf (ingester.proto); the body arrives as bytes.
  app.addContentTypeParser(PROTOBUF_TYPE, { parseAs: "buffer" }, (_request, body, parsed) => {
    parsed(null, body);
  });
  app.post("/ingester/v1/query", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeQueryRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodeQueryResponse(
      await ingester.query(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  app.post("/ingester/v1/series", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeSeriesRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodeSeriesResponse(
      await ingester.series(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  app.post("/ingester/v1/volume", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeVolumeRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodeVolumeResponse(
      await ingester.volume(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  app.post("/ingester/v1/stats", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeStatsRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodeStatsResponse(
      await ingester.stats(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  app.post("/ingester/v1/patterns", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodePatternsRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodePatternsResponse(
      await ingester.patterns(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  app.post("/ingester/v1/sample", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeSampleRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    const body = encodeSampleResponse(
      await ingester.querySample(req, { signal: querySignal(request, reply) }),
    );
    return reply.type(PROTOBUF_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.length));
  });
  // Loki's flush endpoint: every head now; answered once durable and committed.
  app.post("/flush", async (_request, reply) => {
    await ingester.flushAll("forced");
    return reply.code(204).send();
  });
  // The tails being answered: ended before the server closes, which waits for every
  // answer to end (a tail's never does by itself).
  const tails = new Set<() => void>();
  app.addHook("preClose", (done) => {
    for (const end of [...tails]) end();
    done();
  });
  app.post("/ingester/v1/tail", { logLevel: "warn" }, async (request, reply) => {
    const req = decodeBody(request.body, decodeTailRequest);
    checkTenant(request, req.tenant);
    if (!ingester.serving) throw new IngesterError("not_ready");
    await serveTail(ingester, req, reply, tails);
  });
}

/**
 * Most bytes a tail's answer may hold unsent toward its querier. The querier reads its
 * tails as they come (its own bound is per client, services/querier's tail.ts), so this is
 * reached only by a querier that stopped reading: the tail is then ended, never buffered
 * without bound (Loki's ingester ends a tail blocked for 15 s).
 */
export const TAIL_MAX_UNSENT_BYTES = 16 * 1024 * 1024;

/** How often an idle tail sends an empty frame, so a querier gone is noticed. */
const TAIL_KEEPALIVE_MS = 5000;

/** A tail frame: 4 bytes of length (big-endian), then that many bytes of a QueryResponse. */
export function tailFrame(body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  frame.set(body, 4);
  return frame;
}

/**
 * `POST /ingester/v1/tail`: holds the tail, answers 200 and an empty frame once held,
 * then one frame (a QueryResponse of one stream) per batch of entries appended, until the
 * querier goes away, the ingester stops, or the querier stops reading
 * ({@link TAIL_MAX_UNSENT_BYTES}).
 */
async function serveTail(
  ingester: IngesterHandle,
  req: { tenant: string; selector: string },
  reply: FastifyReply,
  open: Set<() => void>,
): Promise<void> {
  const raw = reply.raw;
  /** Frames that came before every worker held the tail: sent after the headers. */
  let early: Buffer[] | undefined = [];
  let earlyBytes = 0;
  let done = false;
  const end = (): void => {
    if (done) return;
    done = true;
    open.delete(end);
    clearInterval(keepalive);
    tail.close();
    if (early === undefined) raw.end();
  };
  const write = (body: Uint8Array): void => {
    if (done) return;
    const frame = tailFrame(body);
    if (early !== undefined) {
      early.push(frame);
      earlyBytes += frame.length;
      if (earlyBytes > TAIL_MAX_UNSENT_BYTES) end();
      return;
    }
    if (raw.writableLength > TAIL_MAX_UNSENT_BYTES) {
      end();
      raw.destroy(new Error("the querier does not read its tail"));
      return;
    }
    raw.write(frame);
  };
  const tail = ingester.tail(req, {
    entries: (stream) => {
      write(encodeQueryResponse([stream]));
    },
    ended: end,
  });
  open.add(end);
  const keepalive = setInterval(() => {
    write(new Uint8Array(0));
  }, TAIL_KEEPALIVE_MS);
  keepalive.unref();
  try {
    await tail.held;
  } catch (error) {
    end();
    throw error;
  }
  // Set by the sink while the tail was being held.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
  if (done) throw new IngesterError("not_ready", "the tail ended before it was held");
  reply.hijack();
  raw.on("close", end);
  // A tail's connection is not reused: closed with its answer, so that a server closing
  // (which ends the tails first) does not wait for it as an idle keep-alive connection.
  raw.writeHead(200, { "content-type": PROTOBUF_TYPE, connection: "close" });
  const first = early;
  early = undefined;
  raw.write(tailFrame(new Uint8Array(0)));
  for (const frame of first) raw.write(frame);
}

/**
 * A fastify server holding only the ingester (the `ingester` role): every route, or only
 * `routes` (an internal listener takes `internal`, the public one `public`).
 */
export async function createIngesterServer(
  service: Pick<IngesterService, "plugin">,
  logger: Logger,
  routes: IngesterRoutes = "all",
): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: logger });
  closeUnusedConnections(app);
  app.setNotFoundHandler(notFoundHandler);
  await app.register(service.plugin({ routes }));
  return app as unknown as FastifyInstance;
}
