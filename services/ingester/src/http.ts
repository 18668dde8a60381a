import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { QueueConsumer } from "@sieve/queue";
import type { IngesterConfig } from "./config.js";
import { IngesterError } from "./errors.js";
import type { FlushStore } from "./flush.js";
import { Ingester } from "./ingester.js";
import { IngesterMetrics } from "./metrics.js";
import { parseQueryRequest, parseSeriesRequest, seriesJson, streamsJson } from "./wire.js";

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

/** Options of the ingester's fastify plugin. */
export interface IngesterPluginOptions {
  /** Whether the plugin serves `/ready` and `/metrics` (false when the host serves them). */
  readonly serveOps?: boolean;
}

/** An ingester and the routes that expose it. */
export interface IngesterService {
  readonly ingester: Ingester;
  readonly metrics: IngesterMetrics;
  /** The internal query API, `POST /flush`, and (unless `serveOps` is false) `/ready`, `/metrics`. */
  plugin(options?: IngesterPluginOptions): FastifyPluginCallback;
}

function tenantHeader(request: FastifyRequest): string | undefined {
  const header = request.headers["x-scope-orgid"];
  return Array.isArray(header) ? header[0] : header;
}

function sendError(reply: FastifyReply, error: unknown): FastifyReply {
  if (error instanceof IngesterError) {
    return reply
      .code(error.status)
      .type("application/json")
      .send(JSON.stringify({ code: error.code, message: error.message }));
  }
  throw error;
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
  const plugin =
    (options: IngesterPluginOptions = {}): FastifyPluginCallback =>
    (app, _opts, done) => {
      const checkTenant = (request: FastifyRequest, tenant: string): void => {
        const header = tenantHeader(request);
        if (header !== tenant) {
          throw new IngesterError(
            "tenant_mismatch",
            `header ${JSON.stringify(header ?? "")}, body ${JSON.stringify(tenant)}`,
          );
        }
      };
      app.post("/ingester/v1/query", { logLevel: "warn" }, async (request, reply) => {
        let body: string;
        try {
          const req = parseQueryRequest(request.body);
          checkTenant(request, req.tenant);
          if (!ingester.ready) throw new IngesterError("not_ready");
          body = streamsJson(await ingester.query(req));
        } catch (error) {
          return sendError(reply, error);
        }
        return reply.type("application/json").send(body);
      });
      app.post("/ingester/v1/series", { logLevel: "warn" }, async (request, reply) => {
        let body: string;
        try {
          const req = parseSeriesRequest(request.body);
          checkTenant(request, req.tenant);
          if (!ingester.ready) throw new IngesterError("not_ready");
          body = seriesJson(await ingester.series(req));
        } catch (error) {
          return sendError(reply, error);
        }
        return reply.type("application/json").send(body);
      });
      // Loki's flush endpoint: every head now; answered once durable and committed.
      app.post("/flush", async (_request, reply) => {
        await ingester.flushAll("forced");
        return reply.code(204).send();
      });
      if (options.serveOps !== false) {
        app.get("/ready", { logLevel: "warn" }, async (_request, reply) =>
          ingester.ready
            ? reply.type("text/plain").send("ready\n")
            : reply.code(503).type("text/plain").send("not ready\n"),
        );
        app.get("/metrics", { logLevel: "warn" }, async (_request, reply) =>
          reply.type(deps.registry.contentType).send(await deps.registry.metrics()),
        );
      }
      done();
    };
  return { ingester, metrics, plugin };
}

/** A fastify server holding only the ingester (the `ingester` role). */
export async function createIngesterServer(
  service: IngesterService,
  logger: Logger,
): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: logger });
  await app.register(service.plugin());
  return app as unknown as FastifyInstance;
}
