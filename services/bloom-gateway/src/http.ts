import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback } from "fastify";
import { MISSING_REASONS } from "@sieve/index";
import { closeUnusedConnections, errorHandler, notFoundHandler } from "@sieve/kit";
import type { BloomBlockStore, BloomLocation, MissingReason } from "@sieve/index";
import { ProtoError, decodeFilterRequest, encodeFilterResponse } from "@sieve/proto";
import type { DecodedFilterRequest, FilterRequest } from "@sieve/proto";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { BloomGatewayConfig } from "./config.js";
import { GatewayError } from "./errors.js";
import { BloomGateway } from "./gateway.js";

/** The filter route. */
export const FILTER_PATH = "/bloomgateway/v1/filter";
/** The media type of filter requests and responses. */
export const PROTOBUF_TYPE = "application/x-protobuf";

/** What the gateway's HTTP side needs. */
export interface BloomGatewayHttpDeps {
  readonly config: BloomGatewayConfig;
  /** Where bloom blocks are read from (an `ObjectStore` fits). */
  readonly store: BloomBlockStore;
  readonly logger: Logger;
  /** Where the gateway's metrics are registered; `/metrics` serves it. */
  readonly registry: Registry;
  /** An existing gateway to serve (`sieve all` shares one with its in-process querier). */
  readonly gateway?: BloomGateway;
  /** Whether the plugin serves `/metrics` and `/ready` (false when the host serves them). */
  readonly serveOps?: boolean;
}

function isMissingReason(reason: string): reason is MissingReason {
  return Object.hasOwn(MISSING_REASONS, reason);
}

function location(l: DecodedFilterRequest["series"][number]["bloom"], i: number): BloomLocation {
  if (l.kind === "block") return l;
  if (!isMissingReason(l.reason)) {
    throw new GatewayError(
      "invalid_request",
      `series ${i}: unknown missing reason ${JSON.stringify(l.reason)}`,
    );
  }
  return { kind: "missing", reason: l.reason };
}

/** Decodes a request body into a {@link FilterRequest}; bad bytes are a 400 GatewayError. */
export function parseFilterRequest(body: Uint8Array): FilterRequest {
  let wire;
  try {
    wire = decodeFilterRequest(body);
  } catch (error) {
    if (error instanceof ProtoError) throw new GatewayError("invalid_request", error.message);
    throw error;
  }
  if (wire.tenant === "") throw new GatewayError("invalid_request", "no tenant");
  return {
    ...wire,
    series: wire.series.map((s, i) => ({ ...s, bloom: location(s.bloom, i) })),
  };
}

/**
 * The gateway as a fastify plugin: `POST /bloomgateway/v1/filter` (protobuf in and out,
 * bodies capped at `maxRequestBytes`), and, unless `serveOps` is false, `GET /ready` and
 * `GET /metrics`. Encapsulated: its body parser and error handler apply to its routes only.
 */
export function bloomGatewayPlugin(deps: BloomGatewayHttpDeps): FastifyPluginCallback {
  return (app, _options, done) => {
    const { config, registry } = deps;
    const gateway = deps.gateway ?? new BloomGateway(config, deps.store, deps.logger, registry);
    const metrics = gateway.metricSet;

    app.addContentTypeParser(
      PROTOBUF_TYPE,
      { parseAs: "buffer", bodyLimit: config.maxRequestBytes },
      (_request, body, parsed) => {
        parsed(null, body);
      },
    );

    app.setErrorHandler(
      errorHandler({
        logMessage: "filter request failed",
        onError: (status, _error, reply) => {
          metrics.requestDuration.observe(
            { status_code: String(status) },
            reply.elapsedTime / 1000,
          );
        },
        // fastify's own refusals, in the gateway's words.
        message: (_error, status) =>
          status === 413
            ? `${new GatewayError("body_too_large").message} (limit ${config.maxRequestBytes} bytes)`
            : status === 415
              ? new GatewayError("unsupported_media_type").message
              : undefined,
      }),
    );

    app.post(FILTER_PATH, { logLevel: "warn" }, async (request, reply) => {
      if (!Buffer.isBuffer(request.body)) throw new GatewayError("unsupported_media_type");
      const req = parseFilterRequest(request.body);
      const header = request.headers["x-scope-orgid"];
      const org = Array.isArray(header) ? header[0] : header;
      if (org !== undefined && org !== req.tenant) {
        throw new GatewayError(
          "tenant_mismatch",
          `${JSON.stringify(org)} ≠ ${JSON.stringify(req.tenant)}`,
        );
      }
      const res = await gateway.filterChunkRefs(req);
      metrics.requestDuration.observe({ status_code: "200" }, reply.elapsedTime / 1000);
      return reply.type(PROTOBUF_TYPE).send(Buffer.from(encodeFilterResponse(res)));
    });

    if (deps.serveOps !== false) {
      app.get("/ready", { logLevel: "warn" }, async (_request, reply) =>
        reply.type("text/plain").send("ready\n"),
      );
      app.get("/metrics", { logLevel: "warn" }, async (_request, reply) =>
        reply.type(registry.contentType).send(await registry.metrics()),
      );
    }
    done();
  };
}

/** A fastify server holding only the gateway (the `bloom-gateway` role). */
export async function createBloomGatewayServer(
  deps: BloomGatewayHttpDeps,
): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: deps.logger });
  closeUnusedConnections(app);
  app.setNotFoundHandler(notFoundHandler);
  await app.register(bloomGatewayPlugin(deps));
  return app as unknown as FastifyInstance;
}
