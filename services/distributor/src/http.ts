import { Readable } from "node:stream";
import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import {
  TEXT_ERROR_TYPE,
  closeUnusedConnections,
  errorHandler,
  notFoundHandler,
  textErrorBody,
} from "@sieve/kit";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { QueueWriter } from "@sieve/queue";
import type { DistributorConfig } from "./config.js";
import { Distributor } from "./distributor.js";
import { parseMediaType } from "./decode.js";
import { DistributorError } from "./errors.js";
import type { Limits } from "./limits.js";
import { DistributorMetrics } from "./metrics.js";
import type { BodyEncoding } from "./prepare.js";
import { requestTenant } from "@sieve/config";
import { encodeOtlpLogsResponse, encodeOtlpStatus, otlpLogsResponseJson } from "@sieve/proto";
import { messages } from "./validation.js";
import { PushPreparer } from "./workers.js";

/** What the distributor's HTTP side needs. */
export interface DistributorHttpDeps {
  readonly config: DistributorConfig;
  readonly queue: QueueWriter;
  readonly logger: Logger;
  /** Where the distributor's metrics are registered; `/metrics` serves it. */
  readonly registry: Registry;
  readonly limits?: Limits;
  readonly now?: () => number;
  /** Whether the plugin serves `/metrics` and `/ready` (false when the host serves them). */
  readonly serveOps?: boolean;
}

/**
 * Reads a request body as received (compressed or not), failing with 413 once it passes
 * `maxBytes`, into a buffer of its own (so it can be transferred to a worker whole).
 * Decompression happens where the body is decoded (prepare.ts), off this thread.
 */
async function readBody(raw: Readable, maxBytes: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of raw as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      throw new DistributorError("body_too_large", messages.bodyTooLarge(total, maxBytes));
    }
    chunks.push(chunk);
  }
  const body = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.length;
  }
  return body;
}

/**
 * The Content-Encoding of a push, or undefined when not supported. `snappy` reads as no
 * encoding, as Loki does: a protobuf body is raw snappy whatever the header says, and a JSON
 * body is read as sent (clients set the header on protobuf pushes that need no more).
 */
function bodyEncoding(header: string | undefined): BodyEncoding | undefined {
  const enc = (header ?? "").trim().toLowerCase();
  if (enc === "" || enc === "identity" || enc === "snappy") return "identity";
  return enc === "gzip" || enc === "deflate" ? enc : undefined;
}

/**
 * The distributor as a fastify plugin: `POST /loki/api/v1/push`, and, unless
 * `serveOps` is false, `GET /ready` and `GET /metrics`. Encapsulated: its body parsing
 * applies to its own routes only, so `sieve all` can mount it beside the querier.
 */
export function distributorPlugin(deps: DistributorHttpDeps): FastifyPluginCallback {
  return (app, _options, done) => {
    const { config, registry } = deps;
    const metrics = new DistributorMetrics(registry);
    /** Counts an answer of either push route, by status, with the request's whole time. */
    const observe = (status: number, reply: { elapsedTime: number }) => {
      metrics.requestDuration.observe({ status_code: String(status) }, reply.elapsedTime / 1000);
    };
    const distributor = new Distributor({
      config,
      queue: deps.queue,
      logger: deps.logger,
      metrics,
      ...(deps.limits !== undefined && { limits: deps.limits }),
      ...(deps.now !== undefined && { now: deps.now }),
    });
    const now = deps.now ?? Date.now;
    const preparer = new PushPreparer({
      threads: config.decodeThreads,
      heapMb: config.decodeWorkerHeapMb,
      inlineMaxBytes: config.inlineDecodeMaxBytes,
    });
    // Idle tenants are also forgotten when no push comes to trigger it.
    const eviction = setInterval(() => {
      distributor.evictIdle();
    }, distributor.evictionIntervalMs);
    eviction.unref();
    app.addHook("onClose", async () => {
      clearInterval(eviction);
      await preparer.close();
    });

    // The push route reads its own body (see readBody), so every content type passes raw.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", (_request, payload, done) => {
      done(null, payload);
    });

    // Refusals thrown by the route: Loki's plain text, counted like every answer. Other
    // errors keep fastify's own answer (a JSON 500), as before the shared mapper.
    app.setErrorHandler(
      errorHandler({
        foreign: "default",
        onError: (status, error, reply) => {
          observe(status, reply);
          if (error instanceof DistributorError && error.bodyUnread) {
            void reply.header("connection", "close");
          }
        },
      }),
    );

    // Request logs at info would be one line per push; the route logs refusals itself.
    // Fastify answers 415 itself for a Content-Type it cannot parse, before the route runs;
    // Loki answers 400 with Go's words. So the route parses the header (parseMediaType) and
    // fastify sees a neutral type, the client's kept aside.
    const declaredTypes = new WeakMap<object, string>();
    const setAsideType = (request: FastifyRequest, _reply: unknown, next: () => void) => {
      const declared = request.headers["content-type"];
      if (declared !== undefined) {
        declaredTypes.set(request, declared);
        request.headers["content-type"] = "application/octet-stream";
      }
      next();
    };
    const routeOptions = { logLevel: "warn", onRequest: setAsideType } as const;

    /** The tenant of a push, or a refusal: Loki's words for both routes. */
    const tenantOf = (request: FastifyRequest): string => {
      const tenant = requestTenant(request.headers["x-scope-orgid"], config.authEnabled);
      if (typeof tenant !== "string") {
        throw new DistributorError(
          tenant.status === 401 ? "no_org_id" : "invalid_tenant",
          tenant.message,
        );
      }
      return tenant;
    };

    /** A push body as received, refused with 413 past `maxBodyBytes` (declared or read). */
    const bodyOf = async (request: FastifyRequest): Promise<Uint8Array> => {
      const declared = Number(request.headers["content-length"]);
      if (declared > config.maxBodyBytes) {
        throw new DistributorError(
          "body_too_large",
          messages.bodyTooLarge(declared, config.maxBodyBytes),
        );
      }
      // Without a Content-Type fastify runs no parser and leaves no stream: an empty body.
      const raw = request.body;
      return raw instanceof Readable ? readBody(raw, config.maxBodyBytes) : new Uint8Array(0);
    };

    app.post("/loki/api/v1/push", routeOptions, async (request, reply) => {
      /** Answers the push's outcome: 204, or Loki's refusal text of its data. */
      const send = (status: number, body: string) => {
        observe(status, reply);
        if (status === 204) return reply.code(204).send();
        return reply.code(status).type(TEXT_ERROR_TYPE).send(textErrorBody(body));
      };
      const tenant = tenantOf(request);
      const encoding = bodyEncoding(request.headers["content-encoding"]);
      if (encoding === undefined) {
        const enc = request.headers["content-encoding"]!.trim().toLowerCase();
        throw new DistributorError(
          "unsupported_encoding",
          `Content-Encoding "${enc}" not supported`,
        );
      }
      const body = await bodyOf(request);
      // Loki refuses a Content-Type Go's mime.ParseMediaType refuses. A missing one stays
      // protobuf, as Loki's own comment means it to (its parser refuses "" too).
      const header = declaredTypes.get(request) ?? "";
      const media = header.trim() === "" ? { type: "" } : parseMediaType(header);
      if ("error" in media) return send(400, media.error);
      const type = media.type;
      const outcome = await preparer.prepare({
        tenant,
        body,
        format: type === "application/json" ? "json" : "protobuf",
        encoding,
        maxDecompressedBytes: config.maxDecompressedBytes,
        limits: distributor.limitsFor(tenant),
        nowMs: now(),
      });
      if (!outcome.ok) return send(outcome.refusal.status, outcome.refusal.message);
      const result = await distributor.admit(tenant, outcome.push);
      return send(result.status, result.body);
    });

    // OTLP/HTTP logs (the OTLP specification's "OTLP/HTTP" section, Loki's otlp.go): protobuf
    // or JSON, gzip or not, answered in the request's encoding; the same validation,
    // limits and queue as the push above.
    app.post("/otlp/v1/logs", routeOptions, async (request, reply) => {
      const header = declaredTypes.get(request) ?? "";
      const media = header.trim() === "" ? { type: "" } : parseMediaType(header);
      const json = !("error" in media) && media.type === "application/json";
      const answer = (status: number, payload: Uint8Array | string) => {
        observe(status, reply);
        return reply
          .code(status)
          .type(json ? "application/json" : "application/x-protobuf")
          .send(typeof payload === "string" ? payload : Buffer.from(payload));
      };
      /** A refusal: google.rpc.Status in the request's encoding. */
      const refuse = (status: number, message: string) => {
        const code = status === 429 || status === 413 ? 8 : status === 503 ? 14 : 3;
        return answer(
          status,
          json ? JSON.stringify({ code, message }) : encodeOtlpStatus(code, message),
        );
      };
      let tenant: string;
      let body: Uint8Array;
      try {
        tenant = tenantOf(request);
        body = await bodyOf(request);
      } catch (error) {
        if (!(error instanceof DistributorError)) throw error;
        if (error.bodyUnread) void reply.header("connection", "close");
        return refuse(error.status, error.message);
      }
      if ("error" in media) return refuse(400, media.error);
      if (media.type !== "application/x-protobuf" && media.type !== "application/json") {
        return refuse(
          415,
          `Content-Type ${JSON.stringify(header)} not supported: application/x-protobuf or application/json`,
        );
      }
      const enc = (request.headers["content-encoding"] ?? "").trim().toLowerCase();
      if (enc !== "" && enc !== "identity" && enc !== "gzip") {
        return refuse(415, `Content-Encoding "${enc}" not supported: gzip or none`);
      }
      const outcome = await preparer.prepare({
        tenant,
        body,
        format: json ? "otlp-json" : "otlp-protobuf",
        encoding: enc === "gzip" ? "gzip" : "identity",
        maxDecompressedBytes: config.maxDecompressedBytes,
        limits: distributor.limitsFor(tenant),
        nowMs: now(),
      });
      if (!outcome.ok) return refuse(outcome.refusal.status, outcome.refusal.message);
      const result = await distributor.admit(tenant, outcome.push);
      if (result.status === 204)
        return answer(200, json ? otlpLogsResponseJson() : encodeOtlpLogsResponse());
      // Some records refused for good, some stored: a partial success (200), which the
      // client must not retry. None stored: the request was invalid (400, no retry).
      if (result.status === 400 && result.acceptedLines > 0) {
        const partial = {
          rejectedLogRecords: outcome.push.entries - result.acceptedLines,
          errorMessage: result.body,
        };
        return answer(200, json ? otlpLogsResponseJson(partial) : encodeOtlpLogsResponse(partial));
      }
      // 429 and 503 are retryable as the specification says; 400 is not.
      return refuse(result.status, result.body);
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

/**
 * A fastify server holding only the distributor (the `distributor` role). `sieve all`
 * registers {@link distributorPlugin} on its shared server instead.
 */
export async function createDistributorServer(deps: DistributorHttpDeps): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: deps.logger });
  closeUnusedConnections(app);
  app.setNotFoundHandler(notFoundHandler);
  await app.register(distributorPlugin(deps));
  return app as unknown as FastifyInstance;
}
