import Fastify from "fastify";
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { QueryError } from "./errors.js";
import { FLAG_CATEGORIZE_LABELS, applyInterval, queryResponse, toStreams } from "./marshal.js";
import {
  DEFAULT_SINCE_NS,
  ParamError,
  nowNs,
  parseBounds,
  parseInstantQuery,
  parseRangeQuery,
  seriesMatchers,
  type Form,
} from "./params.js";
import { Querier } from "./querier.js";

/** What the querier's HTTP side needs. */
export interface QuerierHttpDeps {
  readonly querier: Querier;
  /** Whether X-Scope-OrgID is required; off: every query is tenant `fake`. */
  readonly authEnabled: boolean;
  /** Served at `/metrics` (when `serveOps` is not false). */
  readonly registry: Registry;
  readonly logger?: Logger;
  /** Unix ns of now; tests pin it. */
  readonly now?: () => bigint;
  /** Whether the plugin serves `/metrics` and `/ready` (false when the host serves them). */
  readonly serveOps?: boolean;
}

/** The tenant of single-tenant mode, as Loki's. */
export const FAKE_TENANT = "fake";

const MAX_TENANT_LENGTH = 150;
const TENANT_CHARS = /^[a-zA-Z0-9!\-_.*'()]*$/;

/** Loki's tenant ID rules (`dskit/tenant`); undefined when `id` is valid. */
export function tenantIdError(id: string): string | undefined {
  if (id.length > MAX_TENANT_LENGTH)
    return `tenant ID is too long: max ${MAX_TENANT_LENGTH} characters`;
  if (id === "." || id === "..") return "tenant ID is '.' or '..'";
  if (!TENANT_CHARS.test(id)) {
    const bad = Array.from(id).find((c) => !TENANT_CHARS.test(c))!;
    return `tenant ID '${id}' contains unsupported character '${bad}'`;
  }
  return undefined;
}

/** Query string values (and, for POST, form body values), as Go's `r.Form`. */
function formOf(request: FastifyRequest): Form {
  const q = request.url.indexOf("?");
  const form = new URLSearchParams(q >= 0 ? request.url.slice(q + 1) : "");
  if (typeof request.body === "string" && request.body !== "") {
    for (const [k, v] of new URLSearchParams(request.body)) form.append(k, v);
  }
  return form;
}

function encodingFlags(request: FastifyRequest): string[] {
  const raw = request.headers["x-loki-response-encoding-flags"];
  const text = Array.isArray(raw) ? raw.join(",") : (raw ?? "");
  const flags = text
    .split(",")
    .map((f) => f.trim())
    .filter((f) => f === FLAG_CATEGORIZE_LABELS);
  return [...new Set(flags)];
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The Loki query API as a fastify plugin: `query_range`, `query`, `labels`,
 * `label/<name>/values`, `series`, `index/stats` under `/loki/api/v1/`, each on GET and
 * POST (form bodies, as Loki reads `r.Form`), and, unless `serveOps` is false, `/ready`
 * and `/metrics`. Errors are plain text with Loki's status and words. Encapsulated: its
 * form parser applies to its own routes only, so `sieve all` mounts it beside the push route.
 */
export function querierPlugin(deps: QuerierHttpDeps): FastifyPluginCallback {
  return (app, _options, done) => {
    const { querier } = deps;
    const now = deps.now ?? nowNs;
    const metrics = querier.metrics;

    app.addContentTypeParser(
      "application/x-www-form-urlencoded",
      { parseAs: "string" },
      (_request, body, parsed) => {
        parsed(null, body);
      },
    );

    const tenantOf = (request: FastifyRequest): string => {
      if (!deps.authEnabled) return FAKE_TENANT;
      const header = request.headers["x-scope-orgid"];
      const id = Array.isArray(header) ? header[0] : header;
      if (id === undefined || id === "") throw new HttpError(401, "no org id");
      const error = tenantIdError(id);
      if (error !== undefined) throw new HttpError(400, error);
      return id;
    };

    type Handler = (request: FastifyRequest, form: Form, tenant: string) => Promise<unknown>;
    const route = (path: string, handler: Handler): void => {
      const serve = async (request: FastifyRequest, reply: FastifyReply) => {
        const started = performance.now();
        let status = 200;
        try {
          const tenant = tenantOf(request);
          const body = await handler(request, formOf(request), tenant);
          return await reply.type("application/json; charset=utf-8").send(JSON.stringify(body));
        } catch (error) {
          let message: string;
          if (
            error instanceof HttpError ||
            error instanceof QueryError ||
            error instanceof ParamError
          ) {
            status = error.status;
            message = error.message;
          } else {
            status = 500;
            message = (error as Error).message;
            request.log.error({ err: error }, "query failed");
          }
          return await reply
            .code(status)
            .type("text/plain; charset=utf-8")
            .send(message + "\n");
        } finally {
          metrics?.requestDuration.observe(
            { route: path, status_code: String(status) },
            (performance.now() - started) / 1000,
          );
        }
      };
      app.get(path, serve);
      app.post(path, serve);
    };

    route("/loki/api/v1/query_range", async (request, form, tenant) => {
      const q = parseRangeQuery(form, now());
      const flags = encodingFlags(request);
      const t0 = performance.now();
      if (Querier.isLogQuery(q.query)) {
        const { entries, stats } = await querier.selectLogs({
          tenant,
          query: q.query,
          start: q.start,
          end: q.end,
          limit: q.limit,
          direction: q.direction,
        });
        const kept = applyInterval(entries, q.interval);
        stats.entriesReturned = kept.length;
        const secs = (performance.now() - t0) / 1000;
        return queryResponse(
          "streams",
          toStreams(kept, flags.length > 0),
          stats.toJSON(secs),
          flags,
        );
      }
      const { result, stats } = await querier.selectMatrix({
        tenant,
        query: q.query,
        start: q.start,
        end: q.end,
        step: q.step,
      });
      return queryResponse("matrix", result, stats.toJSON((performance.now() - t0) / 1000), flags);
    });

    route("/loki/api/v1/query", async (request, form, tenant) => {
      const q = parseInstantQuery(form, now());
      const flags = encodingFlags(request);
      const t0 = performance.now();
      if (Querier.isLogQuery(q.query)) {
        // Sieve's reading of an instant log query: the `limit` lines of the hour up to
        // `time` (inclusive), in `direction`.
        const { entries, stats } = await querier.selectLogs({
          tenant,
          query: q.query,
          start: q.time - DEFAULT_SINCE_NS,
          end: q.time + 1n,
          limit: q.limit,
          direction: q.direction,
        });
        const secs = (performance.now() - t0) / 1000;
        return queryResponse(
          "streams",
          toStreams(entries, flags.length > 0),
          stats.toJSON(secs),
          flags,
        );
      }
      const { result, stats } = await querier.selectVector(tenant, q.query, q.time);
      return queryResponse("vector", result, stats.toJSON((performance.now() - t0) / 1000), flags);
    });

    const optionalQuery = (form: Form): string | undefined => {
      const q = form.get("query");
      return q === null || q === "" ? undefined : q;
    };

    route("/loki/api/v1/labels", async (_request, form, tenant) => {
      const { start, end } = parseBounds(form, now());
      return {
        status: "success",
        data: await querier.labelNames(tenant, start, end, optionalQuery(form)),
      };
    });

    route("/loki/api/v1/label/:name/values", async (request, form, tenant) => {
      const { start, end } = parseBounds(form, now());
      const { name } = request.params as { name: string };
      return {
        status: "success",
        data: await querier.labelValues(tenant, name, start, end, optionalQuery(form)),
      };
    });

    route("/loki/api/v1/series", async (_request, form, tenant) => {
      const { start, end } = parseBounds(form, now());
      return {
        status: "success",
        data: await querier.series(tenant, seriesMatchers(form), start, end),
      };
    });

    route("/loki/api/v1/index/stats", async (_request, form, tenant) => {
      const { start, end } = parseBounds(form, now());
      if (end < start)
        throw new ParamError("end timestamp must not be before or equal to start time");
      return querier.indexStats(tenant, form.get("query") ?? "", start, end);
    });

    if (deps.serveOps !== false) {
      app.get("/ready", { logLevel: "warn" }, async (_request, reply) =>
        reply.type("text/plain").send("ready\n"),
      );
      app.get("/metrics", { logLevel: "warn" }, async (_request, reply) =>
        reply.type(deps.registry.contentType).send(await deps.registry.metrics()),
      );
    }
    done();
  };
}

/**
 * A fastify server holding only the querier (the `querier` role). `sieve all` registers
 * {@link querierPlugin} on its shared server instead.
 */
export async function createQuerierServer(deps: QuerierHttpDeps): Promise<FastifyInstance> {
  const app = Fastify(deps.logger !== undefined ? { loggerInstance: deps.logger } : {});
  await app.register(querierPlugin(deps));
  return app as unknown as FastifyInstance;
}
