/**
 * @sieve/logql: LogQL parsing, printing, validation, bloom-test extraction and evaluation.
 * Pure computation, no I/O.
 */
import type { Expr } from "./ast.js";
import { parseSyntax, type ParseOptions } from "./parser.js";
import { validateExpr } from "./validate.js";

export type * from "./ast.js";
export { isLogExpr, PARSER_STAGES } from "./ast.js";
export { LOGQL_ERRORS, LogqlError, ParseError, EvalError, type LogqlErrorCode } from "./errors.js";
export { parseSyntax, DEFAULT_MAX_QUERY_LENGTH, type ParseOptions } from "./parser.js";
export { validateExpr, selectorIsSpecific, ERR_EMPTY_SELECTOR } from "./validate.js";
export { printExpr, printLabelFilter, printSelector, printStage, quote } from "./printer.js";
export { matchesLabels, matcherMatches } from "./matchers.js";
export { formatDuration, parseDuration, parseBytes, formatBytes } from "./units.js";

/** Parses and validates a query (Loki's `ParseExpr`); throws {@link ParseError}. */
export function parseExpr(query: string, options?: ParseOptions): Expr {
  const e = parseSyntax(query, options);
  validateExpr(e);
  return e;
}
