/**
 * `GET /loki/api/v1/tail` over WebSocket (Loki's `TailHandler`, `pkg/querier/http.go`):
 * parameters and tenant are checked before the upgrade (a 400 or 401 with Loki's words);
 * then the tenant's tail count is checked, the ingesters hold the tail, the history runs as
 * a backward `query_range` of `limit` lines (on a query worker when there is a pool), and
 * the session (tail.ts) sends it and then the live lines. Every end from the server's side
 * is a close frame 1011 with the reason's words, as Loki's.
 *
 * The tail itself lives on the main thread: it is a subscription, not a computation (the
 * ingesters run its pipeline), and it lasts as long as its socket.
 */
import websocket, { type WebSocket } from "@fastify/websocket";
import { requestTenant } from "@sieve/config";
import { TEXT_ERROR_TYPE, textErrorBody } from "@sieve/kit";
import type { IngesterTail, IngesterTailer } from "@sieve/proto";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { limitsFor, type QuerierConfig } from "./config.js";
import { QueryError, maxEntriesLimit } from "./errors.js";
import type { QueryAnswer, QueryTask } from "./handler.js";
import { FLAG_CATEGORIZE_LABELS, type LokiStream } from "./marshal.js";
import type { QuerierMetrics } from "./metrics.js";
import { ParamError, nowNs } from "./params.js";
import { parseQuery } from "./parse.js";
import { TailSession, historyLines, parseTailQuery, tooManyTails, type TailQuery } from "./tail.js";

/** The tail's path. */
export const TAIL_ROUTE = "/loki/api/v1/tail";

/** Loki's `wsPingPeriod`: a ping a second finds dead clients, and checks a blocked one. */
const PING_MS = 1000;

/** After a slow reader's close frame, how long it has to read it before the socket is cut. */
const CLOSE_GRACE_MS = 1000;

/**
 * Most lines a tail holds waiting (for the history, or their `delay_for`): past it the
 * oldest go out early, so a tail's memory does not follow a tenant's `limit`, which may be
 * unbounded (`maxEntriesLimitPerQuery` 0). Loki holds 10 responses of 100 lines.
 */
const MAX_PENDING_ENTRIES = 10_000;

/** What a client may send on the socket (nothing is read): small. */
const MAX_CLIENT_MESSAGE_BYTES = 4096;

/** Gorilla's refusal of a plain HTTP request on a WebSocket route, as Loki answers it. */
const NOT_WEBSOCKET =
  "websocket: the client is not using the websocket protocol: 'upgrade' token not found in 'Connection' header";

/** What the tail route needs. */
export interface TailRouteDeps {
  /** The ingesters that push the live lines. */
  readonly tailer: IngesterTailer;
  readonly authEnabled: boolean;
  /** The querier's configuration: the tail options and the tenants' limits. */
  readonly config: QuerierConfig;
  /** Runs the history: a `query_range` task, as the HTTP layer runs one. */
  readonly history: (task: QueryTask) => Promise<QueryAnswer>;
  /** Unix ns of now for the history's end (tests pin it); the delay reads the clock. */
  readonly now: () => bigint;
  readonly metrics?: QuerierMetrics | undefined;
}

interface Checked {
  readonly tenant: string;
  readonly q: TailQuery;
  readonly flags: string[];
}

function encodingFlags(request: FastifyRequest): string[] {
  const raw = request.headers["x-loki-response-encoding-flags"];
  const text = Array.isArray(raw) ? raw.join(",") : (raw ?? "");
  return text.split(",").some((f) => f.trim() === FLAG_CATEGORIZE_LABELS)
    ? [FLAG_CATEGORIZE_LABELS]
    : [];
}

/** The first line of a plain-text error body. */
function errorText(body: string): string {
  return body.split("\n")[0] ?? body;
}

/** The tail route, as a plugin of its own: it registers the WebSocket support it needs. */
export function tailPlugin(deps: TailRouteDeps): FastifyPluginAsync {
  return async (app) => {
    /** Every tail being served, so that a shutdown closes each with 1001 and its words. */
    const sessions = new Map<WebSocket, TailSession>();
    await app.register(websocket, {
      options: { maxPayload: MAX_CLIENT_MESSAGE_BYTES },
      // The plugin's own preClose closes every socket without a code (the client reads
      // 1005, "no status"); a tail is told it was the server going away.
      preClose(done) {
        // The close event waits for every socket to close: sockets that are not tails yet
        // are cut, and a tail's own cut (CLOSE_GRACE_MS after its frame) bounds the rest.
        for (const client of app.websocketServer.clients) {
          const session = sessions.get(client);
          if (session === undefined) client.terminate();
          else session.close("shutdown");
        }
        app.websocketServer.close(() => {
          done();
        });
      },
    });
    /** Tails open, by tenant. */
    const open = new Map<string, number>();
    const checked = new WeakMap<FastifyRequest, Checked>();

    /** Tenant and parameters, as Loki checks them before it upgrades. */
    const check = (request: FastifyRequest): Checked | { status: number; message: string } => {
      const tenant = requestTenant(request.headers["x-scope-orgid"], deps.authEnabled);
      if (typeof tenant !== "string") return tenant;
      const at = request.url.indexOf("?");
      const form = new URLSearchParams(at >= 0 ? request.url.slice(at + 1) : "");
      try {
        const q = parseTailQuery(form, deps.now());
        const expr = parseQuery(q.query);
        if (expr.kind !== "log") {
          throw new QueryError("bad_request", "a metric query has no log lines: use a log query");
        }
        const max = limitsFor(deps.config, tenant).maxEntriesLimitPerQuery;
        if (max > 0 && q.limit > max) throw maxEntriesLimit(q.limit, max);
        return { tenant, q, flags: encodingFlags(request) };
      } catch (error) {
        if (error instanceof ParamError || error instanceof QueryError) {
          return { status: error.status, message: error.message };
        }
        throw error;
      }
    };

    app.route({
      method: "GET",
      url: TAIL_ROUTE,
      preValidation: async (request, reply) => {
        const c = check(request);
        if ("status" in c) {
          return reply.code(c.status).type(TEXT_ERROR_TYPE).send(textErrorBody(c.message));
        }
        checked.set(request, c);
        return undefined;
      },
      handler: async (_request, reply) =>
        reply.code(400).type(TEXT_ERROR_TYPE).send(textErrorBody(NOT_WEBSOCKET)),
      wsHandler: (socket, request) => {
        const c = checked.get(request);
        if (c !== undefined) void serve(socket, request, c);
      },
    });

    const serve = async (socket: WebSocket, request: FastifyRequest, c: Checked): Promise<void> => {
      const { tenant, q, flags } = c;
      const config = deps.config;
      const metrics = deps.metrics;
      const count = (open.get(tenant) ?? 0) + 1;
      open.set(tenant, count);
      metrics?.tailsActive.inc();
      const timers: { ping?: NodeJS.Timeout; maxDuration?: NodeJS.Timeout } = {};
      const session = new TailSession(socket, {
        delayForNs: BigInt(q.delayForS) * 1_000_000_000n,
        categorize: flags.length > 0,
        maxBufferedBytes: config.tailMaxBufferedBytes,
        // Lines held for the history or their delay: ten times `limit`, within constants.
        maxPendingEntries: Math.max(1000, Math.min(10 * q.limit, MAX_PENDING_ENTRIES)),
        slowReaderMs: config.tailSlowReaderMs,
        nowNs,
        nowMs: () => performance.now(),
        onClose: (reason, text) => {
          metrics?.tailsClosed.inc({ reason });
          request.log.info({ tenant, query: q.query, reason: text }, "tail closed");
          // A client that does not read its close frame either is cut.
          setTimeout(() => {
            socket.terminate();
          }, CLOSE_GRACE_MS).unref();
        },
        onDropped: () => metrics?.tailDroppedLines.inc(),
      });
      sessions.set(socket, session);
      const timersAndTail: { tail?: IngesterTail } = {};
      socket.on("close", () => {
        sessions.delete(socket);
        session.stop();
        timersAndTail.tail?.close();
        clearInterval(timers.ping);
        clearTimeout(timers.maxDuration);
        const left = (open.get(tenant) ?? 1) - 1;
        if (left > 0) open.set(tenant, left);
        else open.delete(tenant);
        metrics?.tailsActive.dec();
      });
      const max = limitsFor(config, tenant).maxConcurrentTailRequests;
      if (max > 0 && count > max) {
        session.close("too_many_tails", tooManyTails(count, max));
        return;
      }
      const tail = deps.tailer.tail(
        { tenant, selector: q.query },
        {
          entries: (stream) => {
            session.live(stream);
          },
          ended: (error) => {
            request.log.warn({ err: error, tenant }, "the ingesters ended a tail");
            session.close("ingesters_closed");
          },
        },
      );
      timersAndTail.tail = tail;
      request.log.info({ tenant, query: q.query }, "starting to tail logs");
      const ping = setInterval(() => {
        if (session.check()) socket.ping();
      }, PING_MS);
      ping.unref();
      timers.ping = ping;
      if (config.tailMaxDurationMs > 0) {
        const maxDuration = setTimeout(() => {
          session.close("max_duration");
        }, config.tailMaxDurationMs);
        maxDuration.unref();
        timers.maxDuration = maxDuration;
      }
      try {
        await tail.held;
      } catch (error) {
        session.close("error", (error as Error).message);
        return;
      }
      if (session.ended) return;
      // The most recent `limit` lines since `start`, read once the ingesters hold the tail.
      const now = deps.now();
      const form = new URLSearchParams({
        query: q.query,
        start: q.start.toString(),
        end: (now + 1n).toString(),
        limit: String(q.limit),
        direction: "backward",
      });
      const answer = await deps.history({
        route: "query_range",
        form: form.toString(),
        tenant,
        flags,
        nowNs: now,
      });
      if (answer.status !== 200) {
        session.close("error", errorText(answer.body));
        return;
      }
      const body = JSON.parse(answer.body) as { data: { result: LokiStream[] } };
      session.history(historyLines(body.data.result));
    };
  };
}
