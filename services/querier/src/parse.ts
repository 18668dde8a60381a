/** Parsing of the query API's LogQL: whole queries and bare stream selectors. */
import { LogqlError, parseExpr, parseSyntax, type Expr, type Matcher } from "@sieve/logql";
import { QueryError } from "./errors.js";

/** Parses a query, mapping LogQL's refusals to 400s with LogQL's (Loki's) text. */
export function parseQuery(query: string): Expr {
  try {
    return parseExpr(query);
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    throw error;
  }
}

/** Parses a stream selector (`{a="b"}`) of the series, labels and stats APIs. */
export function parseSelector(text: string): Matcher[] {
  let e: Expr;
  try {
    e = parseSyntax(text);
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    throw error;
  }
  if (e.kind !== "log" || e.pipeline.length > 0) {
    throw new QueryError(
      "bad_request",
      `parse error : only a stream selector is allowed here: ${text}`,
    );
  }
  return e.matchers;
}
