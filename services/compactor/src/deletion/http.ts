/**
 * Loki's delete API as a fastify plugin (`deletion/request_handler.go`, served by Loki's
 * compactor):
 *
 *   PUT|POST /loki/api/v1/delete?query=…&start=…&end=…   204, X-Delete-Request-ID
 *   GET      /loki/api/v1/delete[?start=…&end=…]          the tenant's requests, JSON
 *   DELETE   /loki/api/v1/delete?request_id=…[&force=true] 204, within the cancel period
 *
 * The tenant comes from X-Scope-OrgID as for every other API; a tenant whose
 * `deletionMode` is `disabled` gets Loki's 403. Refusals are plain text in Loki's words.
 */
import { requestTenant } from "@sieve/config";
import type { DeleteRequestRecord } from "@sieve/index";
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { DeletionMetrics } from "./metrics.js";
import { DeleteApiError, goDuration, parseAddParams, parseDeleteTime } from "./params.js";
import type { DeleteRequestsStore } from "./requests.js";

/** Loki's words for a tenant without the delete API. */
export const DELETION_NOT_AVAILABLE = "deletion is not available for this tenant";

/** Loki's `delete_request_cancel_period` default: 24h. */
export const DEFAULT_CANCEL_PERIOD_MS = 24 * 3_600_000;

/** What the delete API needs. */
export interface DeleteApiDeps {
  readonly requests: DeleteRequestsStore;
  /** Whether X-Scope-OrgID is required; off: every request is tenant `fake`. */
  readonly authEnabled: boolean;
  /** The tenant's `deletionMode`: `disabled`, `filter-only` or `filter-and-delete`. */
  readonly deletionMode: (tenant: string) => string;
  /** Loki's `delete_request_cancel_period`. */
  readonly cancelPeriodMs?: number;
  readonly metrics?: DeletionMetrics;
  readonly logger?: Logger;
  /** Unix ms of now; tests pin it. */
  readonly now?: () => number;
}

const PATH = "/loki/api/v1/delete";

/** A request as Loki's list answers it: `model.Time` is seconds as a JSON number. */
function listed(r: DeleteRequestRecord): Record<string, unknown> {
  return {
    request_id: r.requestId,
    start_time: r.startMs / 1000,
    end_time: r.endMs / 1000,
    query: r.query,
    status: r.status,
    created_at: r.createdMs / 1000,
    // Loki blanks the user before answering (the field stays).
    user_id: "",
  };
}

/** Go's `http.Error`: the message and a newline, as plain text. */
function refuse(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply
    .code(status)
    .header("x-content-type-options", "nosniff")
    .type("text/plain; charset=utf-8")
    .send(`${message}\n`);
}

function paramsOf(request: FastifyRequest): URLSearchParams {
  const q = request.url.indexOf("?");
  return new URLSearchParams(q >= 0 ? request.url.slice(q + 1) : "");
}

/** The delete API's routes (see the top of this file). */
export function deleteApiPlugin(deps: DeleteApiDeps): FastifyPluginCallback {
  return (app, _options, done) => {
    // Parameters are read from the URL, as Loki's handler reads them; a form body of a
    // client that sends one is accepted and ignored.
    app.addContentTypeParser(
      "application/x-www-form-urlencoded",
      { parseAs: "string" },
      (_request, body, parsed) => {
        parsed(null, body);
      },
    );
    const now = deps.now ?? Date.now;
    const cancelPeriodMs = deps.cancelPeriodMs ?? DEFAULT_CANCEL_PERIOD_MS;

    /** The tenant of a request allowed to delete; throws the refusal otherwise. */
    const tenantOf = (request: FastifyRequest): string => {
      const tenant = requestTenant(request.headers["x-scope-orgid"], deps.authEnabled);
      if (typeof tenant !== "string") throw new DeleteApiError(tenant.status, tenant.message);
      if (deps.deletionMode(tenant) === "disabled") {
        throw new DeleteApiError(403, DELETION_NOT_AVAILABLE);
      }
      return tenant;
    };

    const route =
      (handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) =>
      async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
        try {
          return await handler(request, reply);
        } catch (error) {
          if (error instanceof DeleteApiError) return refuse(reply, error.status, error.message);
          deps.logger?.error({ err: error }, "delete API");
          return refuse(reply, 500, (error as Error).message);
        }
      };

    const add = route(async (request, reply) => {
      const tenant = tenantOf(request);
      const params = parseAddParams(paramsOf(request), now());
      const record = await deps.requests.add({ tenant, ...params });
      deps.metrics?.requestsReceived.inc({ user: tenant });
      deps.logger?.info(
        { delete_request_id: record.requestId, user: tenant, query: record.query },
        "delete request for user added",
      );
      return reply.code(204).header("x-delete-request-id", record.requestId).send();
    });
    app.post(PATH, add);
    app.put(PATH, add);

    app.get(
      PATH,
      route(async (request, reply) => {
        const tenant = tenantOf(request);
        const params = paramsOf(request);
        let all = await deps.requests.list(tenant);
        const start = params.get("start") ?? "";
        const end = params.get("end") ?? "";
        // Optional overlap filter, as Loki's (both given).
        if (start !== "" && end !== "") {
          const from = parseDeleteTime(start, now());
          if (from === undefined) {
            throw new DeleteApiError(
              400,
              "invalid start time: require unix seconds or RFC3339 format",
            );
          }
          const to = parseDeleteTime(end, now());
          if (to === undefined) {
            throw new DeleteApiError(
              400,
              "invalid end time: require unix seconds or RFC3339 format",
            );
          }
          all = all.filter((r) => r.startMs <= to && r.endMs >= from);
        }
        return reply.type("application/json").send(`${JSON.stringify(all.map(listed))}\n`);
      }),
    );

    app.delete(
      PATH,
      route(async (request, reply) => {
        const tenant = tenantOf(request);
        const params = paramsOf(request);
        const id = params.get("request_id") ?? "";
        const found = /^[0-9a-f]{8}$/.test(id) ? await deps.requests.get(tenant, id) : undefined;
        if (found === undefined) {
          throw new DeleteApiError(404, "could not find delete request with given id");
        }
        const r = found.record;
        if (r.status === "processed") {
          throw new DeleteApiError(
            400,
            "deletion of request which is in process or already processed is not allowed",
          );
        }
        if (
          (r.status !== "received" || r.createdMs + cancelPeriodMs < now()) &&
          params.get("force") !== "true"
        ) {
          throw new DeleteApiError(
            400,
            `Cancellation of partially completed delete request or delete request past the deadline of ${goDuration(cancelPeriodMs)} since its creation is not allowed. To force, use the ?force query parameter`,
          );
        }
        await deps.requests.remove(tenant, id);
        return reply.code(204).send();
      }),
    );
    done();
  };
}
