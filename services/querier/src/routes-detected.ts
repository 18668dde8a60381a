/**
 * The routes of issue 15 that `handleQuery` dispatches here: `detected_labels`,
 * `detected_fields`, `detected_field/<name>/values` (see detected.ts) and `format_query`.
 * Kept apart from handler.ts so that the routes' table there only grows by its entries.
 */
import { LogqlError, parseExpr, prettyExpr } from "@sieve/logql";
import {
  detectFieldValues,
  detectFields,
  detectLabels,
  detectedLabelsBody,
  detectedFieldsBody,
  detectedValuesBody,
  parseDetectedFieldsQuery,
  sampleLines,
} from "./detected.js";
import type { QueryTask } from "./handler.js";
import { parseBounds, type Form } from "./params.js";
import type { Querier } from "./querier.js";

/** A route's answer: the JSON body and, when not 200, its status. */
export interface DetectedRouted {
  readonly body: unknown;
  readonly status?: number;
}

/**
 * Loki's `format_query` (`pkg/loki/format_query_handler.go`): the query parsed and laid out
 * as Loki's `Prettify` does (`prettyExpr`: one line up to 100 characters, else broken and
 * indented), `{"status":"success","data":"<formatted>"}`, or a 400 `{"status":"invalid-query",
 * "error":"<parse error>"}`.
 */
export function formatQuery(query: string): DetectedRouted {
  try {
    return { body: { status: "success", data: prettyExpr(parseExpr(query)) } };
  } catch (error) {
    if (!(error instanceof LogqlError) && !(error instanceof RangeError)) throw error;
    const message =
      error instanceof LogqlError
        ? error.message
        : `parse error : the query is too complex: ${error.message}`;
    return { status: 400, body: { status: "invalid-query", error: message } };
  }
}

/** The routes this file serves. */
export type DetectedRoute = Extract<
  QueryTask["route"],
  "detected_labels" | "detected_fields" | "detected_field_values" | "format_query"
>;

/** Runs `route`, one of the routes this file serves. */
export async function routeDetected(
  querier: Querier,
  route: DetectedRoute,
  task: QueryTask,
  form: Form,
): Promise<DetectedRouted> {
  const { tenant } = task;
  switch (route) {
    case "detected_labels": {
      const { start, end } = parseBounds(form, task.nowNs);
      const query = form.get("query") ?? "";
      const series = await querier.series(tenant, query === "" ? [] : [query], start, end);
      return { body: detectedLabelsBody(detectLabels(series)) };
    }
    case "detected_fields": {
      const q = parseDetectedFieldsQuery(form, task.nowNs);
      const sample = await sampleLines(querier, tenant, q);
      return { body: detectedFieldsBody(detectFields(sample, q.fieldLimit), q.fieldLimit) };
    }
    case "detected_field_values": {
      const q = parseDetectedFieldsQuery(form, task.nowNs);
      const sample = await sampleLines(querier, tenant, q);
      const values = detectFieldValues(sample, task.labelName ?? "", q.fieldLimit);
      return { body: detectedValuesBody(values, q.fieldLimit) };
    }
    case "format_query":
      return formatQuery(form.get("query") ?? "");
  }
}
