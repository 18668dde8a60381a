import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip, createInflate } from "node:zlib";
import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback } from "fastify";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { QueueWriter } from "@sieve/queue";
import type { DistributorConfig } from "./config.js";
import { DecodeError, decodeJsonPush, decodeProtobufPush } from "./decode.js";
import type { IncomingStream } from "./decode.js";
import { Distributor } from "./distributor.js";
import type { Limits } from "./limits.js";
import { DistributorMetrics } from "./metrics.js";
import { messages, tenantIdError } from "./validation.js";

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

/** The tenant of single-tenant mode, as Loki's. */
export const FAKE_TENANT = "fake";

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Collects a stream into one Buffer, failing with 413 once it passes `max` bytes. */
function collector(max: number, what: string): { sink: Writable; result: () => Buffer } {
  const chunks: Buffer[] = [];
  let total = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      total += chunk.length;
      if (total > max) {
        done(new HttpError(413, `${messages.bodyTooLarge(total, max)} (${what})`));
        return;
      }
      chunks.push(chunk);
      done();
    },
  });
  return { sink, result: () => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total)) };
}

/** Passes a stream through, failing with 413 once it passes `max` bytes. */
async function* capped(source: AsyncIterable<Buffer>, max: number): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.length;
    if (total > max) throw new HttpError(413, messages.bodyTooLarge(total, max));
    yield chunk;
  }
}

/**
 * Reads a request body: at most `maxBodyBytes` as received, then, for gzip or deflate,
 * inflated as it streams in and stopped as soon as the output passes
 * `maxDecompressedBytes`: a bomb costs at most one zlib chunk past the cap.
 */
async function readBody(
  raw: Readable,
  encoding: string | undefined,
  config: DistributorConfig,
): Promise<Buffer> {
  const enc = (encoding ?? "").trim().toLowerCase();
  if (enc === "" || enc === "identity") {
    const out = collector(config.maxBodyBytes, "body");
    await pipeline(raw, out.sink);
    return out.result();
  }
  const inflater =
    enc === "gzip" ? createGunzip() : enc === "deflate" ? createInflate() : undefined;
  if (inflater === undefined) throw new HttpError(415, `Content-Encoding "${enc}" not supported`);
  const out = collector(config.maxDecompressedBytes, "decompressed");
  try {
    await pipeline(
      raw,
      (src: AsyncIterable<Buffer>) => capped(src, config.maxBodyBytes),
      inflater,
      out.sink,
    );
  } catch (error) {
    if (error instanceof HttpError) throw error;
    const code = (error as { code?: string }).code;
    if (code?.startsWith("Z_") === true || code === "ERR_ZLIB_INITIALIZATION_FAILED") {
      throw new HttpError(400, `${enc} body does not decompress: ${(error as Error).message}`);
    }
    throw error;
  }
  return out.result();
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
    const distributor = new Distributor({
      config,
      queue: deps.queue,
      logger: deps.logger,
      metrics,
      ...(deps.limits !== undefined && { limits: deps.limits }),
      ...(deps.now !== undefined && { now: deps.now }),
    });

    // The push route reads its own body (see readBody), so every content type passes raw.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", (_request, payload, done) => {
      done(null, payload);
    });

    // Request logs at info would be one line per push; the route logs refusals itself.
    app.post("/loki/api/v1/push", { logLevel: "warn" }, async (request, reply) => {
      const started = performance.now();
      let closeConnection = false;
      const send = (status: number, body: string) => {
        metrics.requestDuration.observe(
          { status_code: String(status) },
          (performance.now() - started) / 1000,
        );
        if (status === 204) return reply.code(204).send();
        // The body may be unread: close rather than leave the client streaming into a
        // keep-alive connection nobody reads.
        if (closeConnection) void reply.header("connection", "close");
        return reply
          .code(status)
          .type("text/plain; charset=utf-8")
          .send(body + "\n");
      };
      let tenant = FAKE_TENANT;
      if (config.authEnabled) {
        const header = request.headers["x-scope-orgid"];
        const id = Array.isArray(header) ? header[0] : header;
        if (id === undefined || id === "") return send(401, "no org id");
        const error = tenantIdError(id);
        if (error !== undefined) return send(400, error);
        tenant = id;
      }
      const declared = Number(request.headers["content-length"]);
      if (declared > config.maxBodyBytes) {
        closeConnection = true;
        return send(413, messages.bodyTooLarge(declared, config.maxBodyBytes));
      }
      let streams: IncomingStream[];
      try {
        // Without a Content-Type fastify runs no parser and leaves no stream: an empty body.
        const raw = request.body;
        const body =
          raw instanceof Readable
            ? await readBody(raw, request.headers["content-encoding"], config)
            : Buffer.alloc(0);
        const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
        streams =
          type === "application/json"
            ? decodeJsonPush(body.toString("utf8"))
            : decodeProtobufPush(body, config.maxDecompressedBytes);
      } catch (error) {
        if (error instanceof HttpError) {
          closeConnection = true;
          return send(error.status, error.message);
        }
        if (error instanceof DecodeError) {
          if (error.code === "body_too_large") {
            return send(413, messages.bodyTooLarge(error.bytes, config.maxDecompressedBytes));
          }
          if (error.code === "too_many_messages") return send(413, error.message);
          return send(400, error.message);
        }
        throw error;
      }
      const result = await distributor.push(tenant, streams);
      return send(result.status, result.body);
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
  await app.register(distributorPlugin(deps));
  return app as unknown as FastifyInstance;
}
