/**
 * The query API's routes as one pure function of plain data: a {@link QueryTask} in, a
 * {@link QueryAnswer} (status, content type, body text) out. The same function serves a
 * query in process and on a worker thread of a {@link QueryPool}, so the two cannot drift;
 * the HTTP layer only reads the tenant and the form, and writes the answer.
 */
import { TEXT_ERROR_TYPE, textErrorBody } from "@sieve/kit";
import { LogqlError, type Expr } from "@sieve/logql";
import { OverBudget } from "./context.js";
import { QueryError, tooLarge } from "./errors.js";
import type { ReadReportCounts } from "./labels.js";
import { applyInterval, queryResponse, toStreams } from "./marshal.js";
import {
  DEFAULT_SINCE_NS,
  ParamError,
  parseBounds,
  parseExplain,
  parseInstantQuery,
  parsePatternsQuery,
  parseRangeQuery,
  seriesMatchers,
  type Form,
} from "./params.js";
import { Querier } from "./querier.js";
import { TENANT_SEPARATOR, routeMultiTenant } from "./multi-tenant.js";
import { routeDetected } from "./routes-detected.js";
import type { QueryStats } from "./stats.js";
import { routeVolume } from "./volume.js";

/** The routes under `/loki/api/v1/`, by the name a task carries. */
export const QUERY_ROUTES = {
  query_range: "/loki/api/v1/query_range",
  query: "/loki/api/v1/query",
  labels: "/loki/api/v1/labels",
  label_values: "/loki/api/v1/label/:name/values",
  series: "/loki/api/v1/series",
  index_stats: "/loki/api/v1/index/stats",
  detected_labels: "/loki/api/v1/detected_labels",
  detected_fields: "/loki/api/v1/detected_fields",
  detected_field_values: "/loki/api/v1/detected_field/:name/values",
  format_query: "/loki/api/v1/format_query",
  index_volume: "/loki/api/v1/index/volume",
  index_volume_range: "/loki/api/v1/index/volume_range",
  patterns: "/loki/api/v1/patterns",
} as const;

/** A route of {@link QUERY_ROUTES}. */
export type QueryRoute = keyof typeof QUERY_ROUTES;

/** One request, as plain data that crosses to a worker thread (structured clone). */
export interface QueryTask {
  readonly route: QueryRoute;
  /** The query string and form body, URL-encoded (Go's `r.Form`). */
  readonly form: string;
  /** The `<name>` of `label/<name>/values` and `detected_field/<name>/values`. */
  readonly labelName?: string;
  readonly tenant: string;
  /** Loki's response encoding flags the client asked for (`categorize-labels`). */
  readonly flags: readonly string[];
  /** Unix ns of now, as the HTTP layer read it (tests pin it). */
  readonly nowNs: bigint;
}

/**
 * What a query did that the querier's metrics count: returned with each answer so the
 * main thread can count a query that ran on a worker.
 */
export interface QueryCounts {
  chunksInRange: number;
  chunksPruned: number;
  chunksFetched: number;
  bytesFetched: number;
  linesScanned: number;
  falsePositiveChunks: number;
}

/** A query's answer, ready to write. */
export interface QueryAnswer {
  readonly status: number;
  readonly contentType: string;
  /** The body: JSON on success, Loki's plain-text error otherwise. */
  readonly body: string;
  /** Present when the query ran (absent on errors before it did). */
  readonly counts?: QueryCounts;
  /** From a worker: what its read report counted during the query (it logged them). */
  readonly readReport?: ReadReportCounts;
  /**
   * On a 500, what went wrong inside Sieve (message and stack), for the HTTP layer to log
   * with the request id; the body says only the message.
   */
  readonly internal?: { readonly message: string; readonly stack?: string };
}

const JSON_TYPE = "application/json; charset=utf-8";

function countsOf(stats: QueryStats): QueryCounts {
  return {
    chunksInRange: stats.chunksInRange,
    chunksPruned: stats.chunksPrunedByBlooms,
    chunksFetched: stats.chunksFetched,
    bytesFetched: stats.bytesFetched,
    linesScanned: stats.linesScanned,
    falsePositiveChunks: stats.falsePositiveChunks,
  };
}

/** A refusal with its status and plain-text message (Loki's words). */
export function errorAnswer(status: number, message: string): QueryAnswer {
  return { status, contentType: TEXT_ERROR_TYPE, body: textErrorBody(message) };
}

/** Maps what a route threw to its answer: user errors keep their 4xx, the rest is a 500. */
function answerOfError(error: unknown): QueryAnswer {
  if (error instanceof QueryError || error instanceof ParamError) {
    return errorAnswer(error.status, error.message);
  }
  // Past one of LogQL's bounds while evaluating (a template's line size, the samples or
  // series of a metric query): the query's fault, in LogQL's words.
  if (error instanceof LogqlError) return errorAnswer(400, error.message);
  // A value past V8's size limits (a string doubled by `line_format` stages, an array of
  // billions): the query asked for it, so the client is told, as for the memory budget.
  if (
    error instanceof RangeError &&
    /^Invalid (string|array|typed array) length/.test(error.message)
  ) {
    const refused = tooLarge(error.message);
    return errorAnswer(refused.status, refused.message);
  }
  const e = error instanceof Error ? error : new Error(String(error));
  return {
    ...errorAnswer(500, e.message),
    internal: { message: e.message, ...(e.stack !== undefined && { stack: e.stack }) },
  };
}

const optionalQuery = (form: Form): string | undefined => {
  const q = form.get("query");
  return q === null || q === "" ? undefined : q;
};

type Routed = { body: unknown; stats?: QueryStats; status?: number };

/**
 * What a caller read of a task before handing it to {@link handleQuery}, which then does not
 * read it again: its form, and the form's query parsed (absent when it was not).
 */
export interface ReadTask {
  readonly form: Form;
  readonly expr?: Expr;
}

async function route(querier: Querier, task: QueryTask, read: ReadTask): Promise<Routed> {
  const { form } = read;
  // `a|b`: the HTTP layer let a read across tenants through (multiTenantQueriesEnabled).
  if (task.tenant.includes(TENANT_SEPARATOR)) return routeMultiTenant(querier, task, form);
  const { tenant, flags } = task;
  const now = task.nowNs;
  switch (task.route) {
    case "query_range": {
      const q = parseRangeQuery(form, now);
      const explain = parseExplain(form);
      const t0 = performance.now();
      const expr = read.expr ?? Querier.parse(q.query);
      if (expr.kind === "log") {
        const answer = await querier.selectLogs({
          tenant,
          query: q.query,
          expr,
          start: q.start,
          end: q.end,
          limit: q.limit,
          direction: q.direction,
          explain,
        });
        const { stats } = answer;
        const kept = applyInterval(answer.entries, q.interval);
        stats.entriesReturned = kept.length;
        const secs = (performance.now() - t0) / 1000;
        const result = toStreams(kept, flags.length > 0);
        const json = stats.toJSON(secs);
        return { body: queryResponse("streams", result, json, flags, answer.explain), stats };
      }
      const answer = await querier.selectMatrix({
        tenant,
        query: q.query,
        expr,
        start: q.start,
        end: q.end,
        step: q.step,
        explain,
      });
      const { result, stats } = answer;
      const secs = (performance.now() - t0) / 1000;
      const json = stats.toJSON(secs);
      return { body: queryResponse("matrix", result, json, flags, answer.explain), stats };
    }
    case "query": {
      const q = parseInstantQuery(form, now);
      const explain = parseExplain(form);
      const t0 = performance.now();
      const expr = read.expr ?? Querier.parse(q.query);
      if (expr.kind === "log") {
        // Sieve's reading of an instant log query: the `limit` lines of the hour up to
        // `time` (inclusive), in `direction`.
        const answer = await querier.selectLogs({
          tenant,
          query: q.query,
          expr,
          start: q.time - DEFAULT_SINCE_NS,
          end: q.time + 1n,
          limit: q.limit,
          direction: q.direction,
          explain,
        });
        const { stats } = answer;
        const secs = (performance.now() - t0) / 1000;
        const result = toStreams(answer.entries, flags.length > 0);
        const json = stats.toJSON(secs);
        return { body: queryResponse("streams", result, json, flags, answer.explain), stats };
      }
      const answer = await querier.selectVector(tenant, expr, q.time, explain);
      const { result, stats } = answer;
      const secs = (performance.now() - t0) / 1000;
      const json = stats.toJSON(secs);
      return { body: queryResponse("vector", result, json, flags, answer.explain), stats };
    }
    case "labels": {
      const { start, end } = parseBounds(form, now);
      const data = await querier.labelNames(tenant, start, end, optionalQuery(form));
      return { body: { status: "success", data } };
    }
    case "label_values": {
      const { start, end } = parseBounds(form, now);
      const name = task.labelName ?? "";
      const data = await querier.labelValues(tenant, name, start, end, optionalQuery(form));
      return { body: { status: "success", data } };
    }
    case "series": {
      const { start, end } = parseBounds(form, now);
      const data = await querier.series(tenant, seriesMatchers(form), start, end);
      return { body: { status: "success", data } };
    }
    case "index_stats": {
      const { start, end } = parseBounds(form, now);
      if (end < start)
        throw new ParamError("end timestamp must not be before or equal to start time");
      return { body: await querier.indexStats(tenant, form.get("query") ?? "", start, end) };
    }
    case "detected_labels":
    case "detected_fields":
    case "detected_field_values":
    case "format_query":
      return routeDetected(querier, task.route, task, form);
    case "index_volume":
    case "index_volume_range":
      return routeVolume(querier, task.route, tenant, form, now);
    case "patterns": {
      const q = parsePatternsQuery(form, now);
      return { body: await querier.patterns(tenant, q.query, q.start, q.end, q.step) };
    }
  }
}

/**
 * Runs one request of the query API on `querier`: parse the form (unless `read`), plan,
 * fetch, evaluate, and marshal the JSON body. Every failure is an answer (see
 * {@link answerOfError}) but one: a querier with a budget ({@link Querier.withBudget})
 * throws {@link OverBudget}.
 */
export async function handleQuery(
  querier: Querier,
  task: QueryTask,
  read?: ReadTask,
): Promise<QueryAnswer> {
  try {
    const { body, stats, status } = await route(
      querier,
      task,
      read ?? { form: new URLSearchParams(task.form) },
    );
    return {
      status: status ?? 200,
      contentType: JSON_TYPE,
      body: JSON.stringify(body),
      ...(stats !== undefined && { counts: countsOf(stats) }),
    };
  } catch (error) {
    if (error instanceof OverBudget) throw error;
    return answerOfError(error);
  }
}
