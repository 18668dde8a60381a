/**
 * Semantic checks, a separate pass after parsing as in Loki (`ParseExpr` = parse, then
 * validate). Errors carry no position and read `parse error : ...`, Loki's wording.
 */
import type { Expr, LogExpr, Matcher, SampleExpr } from "./ast.js";
import { ParseError } from "./errors.js";
import { matcherMatches } from "./matchers.js";

/** Loki's message for a selector that could match every stream. */
export const ERR_EMPTY_SELECTOR =
  'queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~".*" does not meet this requirement, but app=~".+" will';

const UNWRAP_ALLOWED = new Set([
  "avg_over_time",
  "sum_over_time",
  "max_over_time",
  "min_over_time",
  "stddev_over_time",
  "stdvar_over_time",
  "quantile_over_time",
  "rate",
  "rate_counter",
  "absent_over_time",
  "first_over_time",
  "last_over_time",
]);
const NO_UNWRAP_ALLOWED = new Set([
  "bytes_over_time",
  "bytes_rate",
  "count_over_time",
  "rate",
  "absent_over_time",
]);
const GROUPING_ALLOWED = new Set([
  "avg_over_time",
  "stddev_over_time",
  "stdvar_over_time",
  "quantile_over_time",
  "rate",
  "rate_counter",
  "max_over_time",
  "min_over_time",
  "first_over_time",
  "last_over_time",
  "sum_over_time",
]);
const SET_OPS = new Set(["and", "or", "unless"]);
const COMPARISONS = new Set(["==", "!=", ">", ">=", "<", "<="]);
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const fail = (reason: string): never => {
  throw new ParseError(reason, 0, 0, "validation");
};

/** True when some matcher cannot match the empty string (Loki's rule for selectors). */
export function selectorIsSpecific(matchers: readonly Matcher[]): boolean {
  return matchers.some((m) => !matcherMatches(m, ""));
}

/** Checks what the grammar cannot; throws {@link ParseError} with code `validation`. */
export function validateExpr(e: Expr): void {
  if (e.kind === "log") validateLog(e);
  else validateSample(e);
}

function validateLog(e: LogExpr): void {
  if (!selectorIsSpecific(e.matchers)) fail(ERR_EMPTY_SELECTOR);
}

function validateSample(e: SampleExpr): void {
  switch (e.kind) {
    case "literal":
    case "vector":
      return;
    case "labelReplace":
      if (!LABEL_NAME.test(e.dst))
        fail(`invalid destination label name in label_replace(): ${e.dst}`);
      validateSample(e.inner);
      return;
    case "rangeAgg": {
      validateLog(e.range.selector);
      if (e.grouping !== undefined && !GROUPING_ALLOWED.has(e.op)) {
        fail(`grouping not allowed for ${e.op} aggregation`);
      }
      if (e.range.unwrap !== undefined) {
        if (!UNWRAP_ALLOWED.has(e.op)) fail(`invalid aggregation ${e.op} with unwrap`);
      } else if (!NO_UNWRAP_ALLOWED.has(e.op)) {
        fail(`invalid aggregation ${e.op} without unwrap`);
      }
      if (e.op === "quantile_over_time") {
        if (e.param === undefined) fail("parameter required for operation quantile_over_time");
      } else if (e.param !== undefined) {
        fail(`unsupported parameter for operation ${e.op}(${e.param},`);
      }
      if (e.range.rangeNs <= 0n) fail(`invalid range ${e.range.rangeNs}ns: must be positive`);
      return;
    }
    case "vectorAgg": {
      validateSample(e.inner);
      if (e.op === "topk" || e.op === "bottomk") {
        if (e.param === undefined) fail(`parameter required for operation ${e.op}`);
        if (!Number.isInteger(e.param) || e.param! <= 0) {
          fail(`invalid parameter for operation ${e.op}(${e.param},: must be a positive integer`);
        }
      } else if (e.param !== undefined) {
        fail(`unsupported parameter for operation ${e.op}(${e.param},`);
      }
      if ((e.op === "sort" || e.op === "sort_desc") && e.grouping !== undefined) {
        fail(`grouping not allowed for ${e.op} aggregation`);
      }
      return;
    }
    case "binary": {
      validateSample(e.left);
      validateSample(e.right);
      if (e.returnBool && !COMPARISONS.has(e.op)) {
        fail("bool modifier can only be used on comparison operators");
      }
      const scalar = (x: SampleExpr): boolean => x.kind === "literal";
      if (SET_OPS.has(e.op)) {
        if (scalar(e.left))
          fail(
            `unexpected literal for left leg of logical/set binary operation (${e.op}): ${e.left.kind === "literal" ? e.left.value : ""}`,
          );
        if (scalar(e.right))
          fail(
            `unexpected literal for right leg of logical/set binary operation (${e.op}): ${e.right.kind === "literal" ? e.right.value : ""}`,
          );
        if (e.matching !== undefined && e.matching.card !== "one-to-one") {
          fail(`no grouping allowed for ${e.op} operation`);
        }
      }
      if (COMPARISONS.has(e.op) && scalar(e.left) && scalar(e.right) && !e.returnBool) {
        fail("comparisons between scalars must use BOOL modifier");
      }
      return;
    }
  }
}
