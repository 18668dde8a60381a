/**
 * @sieve/logql: LogQL parsing, printing, validation, bloom-test extraction and evaluation.
 * Pure computation, no I/O.
 */
import type { Expr } from "./ast.js";
import { parseSyntax, type ParseOptions } from "./parser.js";
import { validateExpr } from "./validate.js";

export type * from "./ast.js";
export { isLogExpr, rangeAggregations, PARSER_STAGES } from "./ast.js";
export type { RangeAggExpr } from "./ast.js";
export {
  LOGQL_ERRORS,
  LogqlError,
  ParseError,
  EvalError,
  LimitError,
  type LogqlErrorCode,
} from "./errors.js";
export {
  parseSyntax,
  DEFAULT_MAX_QUERY_LENGTH,
  DEFAULT_MAX_DEPTH,
  DEFAULT_MAX_NODES,
  type ParseOptions,
} from "./parser.js";
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
export {
  extractBloomTests,
  evaluateBloomTest,
  bloomTestTokens,
  kvToken,
  logSelectors,
  extractLineFilterTests,
  evaluateLineTest,
  ngrams,
  type BloomTest,
  type LineTest,
} from "./bloom.js";
export { regexLiterals, MAX_REGEX_LITERALS } from "./simplify.js";
export {
  compilePipeline,
  compileLabelFilter,
  LABEL_FILTER_ERR,
  TEMPLATE_FORMAT_ERR,
  DEFAULT_MAX_LINE_BYTES,
  type LogEntry,
  type Pipeline,
  type PipelineOptions,
  type PipelineOutput,
} from "./pipeline.js";
export { ERROR_LABEL, ERROR_DETAILS_LABEL, LabelsBuilder } from "./builder.js";
export { JSON_PARSER_ERR, LOGFMT_PARSER_ERR } from "./extract.js";
export {
  evaluateRange,
  evaluateInstant,
  formatValue,
  nsToSeconds,
  quantile,
  MAX_POINTS,
  DEFAULT_MAX_SAMPLES,
  DEFAULT_MAX_SERIES,
  type EvalOptions,
  type Matrix,
  type Vector,
  type RangeParams,
  type StreamEntries,
} from "./metric.js";
