/** Parsing of the query API's LogQL: whole queries and bare stream selectors. */
import { LogqlError, parseExpr, type Expr, type Matcher } from "@sieve/logql";
import { QueryError } from "./errors.js";

/**
 * LogQL's refusals as 400s with LogQL's (Loki's) text. A stack overflow while parsing is
 * the query's size, not Sieve's fault: a 400 too (the parser bounds depth; this catches
 * what still recurses too deep, e.g. a walk over a very long chain).
 */
function parsed<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof LogqlError) throw new QueryError("bad_request", error.message);
    if (error instanceof RangeError) {
      throw new QueryError(
        "bad_request",
        `parse error : the query is too complex: ${error.message}`,
      );
    }
    throw error;
  }
}

/** Parses and validates a query. */
export function parseQuery(query: string): Expr {
  return parsed(() => parseExpr(query));
}

/**
 * Parses a stream selector (`{a="b"}`) of the series, labels and stats APIs, validated as
 * Loki's `syntax.ParseMatchers(input, true)`: a selector every stream matches (`{a=""}`,
 * `{a=~".*"}`, `{a!~"x"}`) is refused with Loki's 400 rather than passed on to the
 * ingesters, which refuse it too.
 */
export function parseSelector(text: string): Matcher[] {
  const e = parsed(() => parseExpr(text));
  if (e.kind !== "log" || e.pipeline.length > 0) {
    throw new QueryError(
      "bad_request",
      `parse error : only a stream selector is allowed here: ${text}`,
    );
  }
  return e.matchers;
}
