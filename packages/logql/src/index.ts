/**
 * @sieve/logql: LogQL parsing, printing, validation, bloom-test extraction and evaluation.
 * Pure computation, no I/O.
 */
import type { Expr } from "./ast.js";
import { parseSyntax, type ParseOptions } from "./parser.js";
import { validateExpr } from "./validate.js";

export type * from "./ast.js";
export { rangeAggregations } from "./ast.js";
export {
  LOGQL_ERRORS,
  LogqlError,
  ParseError,
  EvalError,
  LimitError,
  type LogqlErrorCode,
} from "./errors.js";
export { parseSyntax, type ParseOptions } from "./parser.js";
export { validateExpr } from "./validate.js";
export { printExpr, printSelector } from "./printer.js";
export { prettyExpr, MAX_CHARS_PER_LINE } from "./pretty.js";
export { matchesLabels } from "./matchers.js";
export { parseDuration } from "./units.js";
export {
  DEFAULT_RETENTION_LIMITS,
  MIN_RETENTION_PERIOD_MS,
  NO_RETENTION,
  Retention,
  TenantRetention,
  parseStreamRetention,
  type RetentionConfig,
  type RetentionLimits,
  type StreamRetention,
} from "./retention.js";

/** Parses and validates a query (Loki's `ParseExpr`); throws {@link ParseError}. */
export function parseExpr(query: string, options?: ParseOptions): Expr {
  const e = parseSyntax(query, options);
  validateExpr(e);
  return e;
}
export {
  extractBloomTests,
  evaluateMetadataTest,
  chunkFilters,
  kvToken,
  logSelectors,
  withoutLineTests,
  type BloomTest,
  type MetadataOracle,
  type ChunkFilters,
  type ChunkSymbols,
} from "./bloom.js";
export {
  compilePipeline,
  type LogEntry,
  type Pipeline,
  type PipelineOptions,
  type PipelineOutput,
} from "./pipeline.js";
export {
  DEFAULT_MAX_SAMPLES,
  evaluateRange,
  evaluateInstant,
  type EvalOptions,
  type Matrix,
  type Vector,
  type RangeParams,
  type RangeVectors,
  type StepVector,
  type StreamEntries,
} from "./metric.js";
export {
  SamplePlan,
  Partials,
  type AggPlan,
  type FoldEntry,
  type SamplePlanOptions,
  type SeriesPartial,
  type StreamFold,
} from "./partials.js";
export { splitRange, mergeMatrices } from "./split.js";
export {
  DeleteFilter,
  parseDeleteQuery,
  type DeleteSpec,
  type DeletableEntry,
  type StreamDeleteTest,
} from "./deletes.js";
