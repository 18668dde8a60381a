/**
 * Every way this package refuses its input, as one table: the code is what callers switch on
 * (the querier maps every code to HTTP 400), the text is the start of the message; a `limit`
 * error's message is Loki's or Prometheus' own words, naming the limit.
 */
export const LOGQL_ERRORS = {
  parse: "parse error",
  validation: "parse error",
  query_too_large: "parse error",
  pipeline: "pipeline error",
  evaluation: "evaluation error",
  invalid_parameters: "invalid evaluation parameters",
  limit: "limit exceeded",
} as const;

/** A code of {@link LOGQL_ERRORS}. */
export type LogqlErrorCode = keyof typeof LOGQL_ERRORS;

/** Base of every error the package throws on purpose. */
export class LogqlError extends Error {
  override readonly name: string = "LogqlError";

  constructor(
    readonly code: LogqlErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A syntax or semantic error in a query, worded as Loki words it
 * (`logqlmodel/error.go`): `parse error at line 1, col 15: syntax error: unexpected ...`.
 * Semantic errors found after parsing carry line 0 and col 0 and read `parse error : ...`,
 * as Loki's do.
 */
export class ParseError extends LogqlError {
  override readonly name = "ParseError";

  constructor(
    /** The bare reason, without the position prefix. */
    readonly reason: string,
    /** 1-based line, or 0 when the error has no position. */
    readonly line: number,
    /** 1-based column, or 0 when the error has no position. */
    readonly col: number,
    code: "parse" | "validation" | "query_too_large" = "parse",
  ) {
    super(
      code,
      line === 0 && col === 0
        ? `parse error : ${reason}`
        : `parse error at line ${line}, col ${col}: ${reason}`,
    );
  }
}

/** Raised while evaluating a metric query, e.g. Loki's "pipeline error" for unfiltered `__error__`. */
export class EvalError extends LogqlError {
  override readonly name = "EvalError";
}

/**
 * A query that would exceed a resource bound while running (a line longer than
 * `maxLineBytes`, more samples than `maxSamples`, more series than `maxSeries`). A user
 * error, never retried: the message names the bound so that the user can narrow the query.
 */
export class LimitError extends LogqlError {
  override readonly name = "LimitError";

  constructor(message: string) {
    super("limit", message);
  }
}
