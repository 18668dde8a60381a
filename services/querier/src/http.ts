import Fastify from "fastify";
import { requestTenant, requestTenants } from "@sieve/config";
import { closeUnusedConnections, notFoundHandler } from "@sieve/kit";
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import {
  QUERY_ROUTES,
  errorAnswer,
  handleQuery,
  type QueryAnswer,
  type QueryRoute,
  type QueryTask,
} from "./handler.js";
import { FLAG_CATEGORIZE_LABELS } from "./marshal.js";
import type { QuerierMetrics } from "./metrics.js";
import { nowNs } from "./params.js";
import type { InlineQueries } from "./inline.js";
import type { QueryPool } from "./pool.js";
import type { Querier } from "./querier.js";
import type { IngesterTailer } from "@sieve/proto";
import { tailPlugin } from "./tail-http.js";

/**
 * What runs the queries: a querier in this thread, or a pool of worker threads (with,
 * optionally, this thread's lane for needle queries: inline.ts).
 */
export type QueryRunner =
  { readonly querier: Querier } | { readonly pool: QueryPool; readonly inline?: InlineQueries };

/** What the querier's HTTP side needs. */
export type QuerierHttpDeps = QueryRunner & {
  /** Whether X-Scope-OrgID is required; off: every query is tenant `fake`. */
  readonly authEnabled: boolean;
  /**
   * Whether `X-Scope-OrgID: a|b` reads several tenants (with auth on; the querier's
   * `multiTenantQueriesEnabled`). Off or absent: refused as an invalid tenant ID.
   */
  readonly multiTenantQueries?: boolean;
  /** Served at `/metrics` (when `serveOps` is not false). */
  readonly registry: Registry;
  readonly logger?: Logger;
  /** Unix ns of now; tests pin it. */
  readonly now?: () => bigint;
  /** Whether the plugin serves `/metrics` and `/ready` (false when the host serves them). */
  readonly serveOps?: boolean;
  /** The ingesters' live lines, for `/loki/api/v1/tail` (not served without). */
  readonly tailer?: IngesterTailer;
};

/** Query string values and, for POST, form body values (Go's `r.Form`), URL-encoded. */
function formOf(request: FastifyRequest): string {
  const q = request.url.indexOf("?");
  const query = q >= 0 ? request.url.slice(q + 1) : "";
  if (typeof request.body === "string" && request.body !== "") {
    return query === "" ? request.body : `${query}&${request.body}`;
  }
  return query;
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

/**
 * The Loki query API as a fastify plugin: `query_range`, `query`, `labels`,
 * `label/<name>/values`, `series`, `index/stats` under `/loki/api/v1/`, each on GET and
 * POST (form bodies, as Loki reads `r.Form`), and, unless `serveOps` is false, `/ready`
 * and `/metrics`. Errors are plain text with Loki's status and words; a 500 also names
 * the request id its log line carries. Encapsulated: its form parser applies to its own
 * routes only, so `sieve all` mounts it beside the push route.
 *
 * With a `pool`, this thread only reads the tenant and the form and writes the answer:
 * each query runs on a worker thread (see {@link QueryPool}), but the needle queries the
 * `inline` lane answers within its budget (see {@link InlineQueries}).
 */
export function querierPlugin(deps: QuerierHttpDeps): FastifyPluginCallback {
  return (app, _options, done) => {
    const now = deps.now ?? nowNs;
    const pool = "pool" in deps ? deps.pool : undefined;
    const querier = "querier" in deps ? deps.querier : undefined;
    const inline = "pool" in deps ? deps.inline : undefined;
    // In process, the querier counts as it goes; from a worker, the answer brings the counts.
    const metrics: QuerierMetrics | undefined =
      pool !== undefined ? pool.metrics : querier?.metrics;

    app.addContentTypeParser(
      "application/x-www-form-urlencoded",
      { parseAs: "string" },
      (_request, body, parsed) => {
        parsed(null, body);
      },
    );

    /** The tenant, or the answer refusing the request. */
    const tenantOf = (request: FastifyRequest): string | QueryAnswer => {
      if (deps.authEnabled && deps.multiTenantQueries === true) {
        const several = requestTenants(request.headers["x-scope-orgid"]);
        if (several !== undefined) {
          return typeof several === "string"
            ? several
            : errorAnswer(several.status, several.message);
        }
      }
      const tenant = requestTenant(request.headers["x-scope-orgid"], deps.authEnabled);
      return typeof tenant === "string" ? tenant : errorAnswer(tenant.status, tenant.message);
    };

    const run = async (task: QueryTask, started: number): Promise<QueryAnswer> => {
      if (pool === undefined) return handleQuery(querier!, task);
      // Counted as it ran (its querier counts on the pool's metrics).
      const inlined = await inline?.run(task);
      if (inlined !== undefined) return inlined;
      const answer = await pool.run(task, started);
      if (answer.readReport !== undefined) pool.report.add(answer.readReport);
      const c = answer.counts;
      if (c !== undefined && metrics !== undefined) {
        metrics.chunksInRange.inc(c.chunksInRange);
        metrics.chunksPruned.inc(c.chunksPruned);
        metrics.chunksFetched.inc(c.chunksFetched);
        metrics.bytesFetched.inc(c.bytesFetched);
        metrics.linesScanned.inc(c.linesScanned);
        // A read across tenants (`a|b`) has no one tenant to count for: its per-tenant
        // counts are left out, so clients cannot mint a label value per tenant combination.
        if (!task.tenant.includes("|")) {
          const tenant = { tenant: task.tenant };
          metrics.bloomPrunedChunks.inc(tenant, c.chunksPruned);
          metrics.falsePositiveChunks.inc(tenant, c.falsePositiveChunks);
        }
      }
      return answer;
    };

    const route = (name: QueryRoute): void => {
      const path = QUERY_ROUTES[name];
      const serve = async (request: FastifyRequest, reply: FastifyReply) => {
        const started = performance.now();
        let answer: QueryAnswer;
        const tenant = tenantOf(request);
        if (typeof tenant !== "string") answer = tenant;
        else {
          const labelName = (request.params as { name?: string }).name;
          answer = await run(
            {
              route: name,
              form: formOf(request),
              tenant,
              flags: encodingFlags(request),
              nowNs: now(),
              ...(labelName !== undefined && { labelName }),
            },
            started,
          );
        }
        let body = answer.body;
        if (answer.internal !== undefined) {
          request.log.error({ err: answer.internal }, "query failed");
          body = `${answer.body.trimEnd()} (request id: ${request.id})\n`;
        }
        metrics?.requestDuration.observe(
          { route: path, status_code: String(answer.status) },
          (performance.now() - started) / 1000,
        );
        return reply.code(answer.status).type(answer.contentType).send(body);
      };
      app.get(path, serve);
      app.post(path, serve);
    };

    for (const name of Object.keys(QUERY_ROUTES) as QueryRoute[]) route(name);

    if (deps.tailer !== undefined) {
      void app.register(
        tailPlugin({
          tailer: deps.tailer,
          authEnabled: deps.authEnabled,
          config: pool !== undefined ? pool.config : querier!.config,
          history: (task) => run(task, performance.now()),
          now,
          metrics,
        }),
      );
    }

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
  closeUnusedConnections(app);
  app.setNotFoundHandler(notFoundHandler);
  await app.register(querierPlugin(deps));
  return app as unknown as FastifyInstance;
}
