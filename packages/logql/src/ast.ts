/**
 * The LogQL syntax tree. Plain data (no classes) so that trees compare with deep equality,
 * cross worker and process boundaries as JSON, and print back with {@link printExpr}.
 * Times inside the tree are nanoseconds: `bigint` for ranges and offsets (they meet entry
 * timestamps), `number` for duration label filters (they meet parsed label values).
 */

/** A label matcher operator, as in stream selectors and string label filters. */
export type MatchOp = "=" | "!=" | "=~" | "!~";

/** A label matcher: `name op "value"`. Regexes are fully anchored, as in Prometheus. */
export interface Matcher {
  name: string;
  op: MatchOp;
  value: string;
}

/** A numeric, duration or size comparison in a label filter. `=` is normalised to `==`. */
export type CmpOp = "==" | "!=" | ">" | ">=" | "<" | "<=";

/** A label filter expression: leaves compare one label, `and`/`or` combine them. */
export type LabelFilter =
  | { kind: "string"; name: string; op: MatchOp; value: string }
  | { kind: "number"; name: string; op: CmpOp; value: number }
  | { kind: "duration"; name: string; op: CmpOp; valueNs: number }
  | { kind: "bytes"; name: string; op: CmpOp; value: number }
  | { kind: "ip"; name: string; op: "=" | "!="; value: string }
  | { kind: "and" | "or"; left: LabelFilter; right: LabelFilter };

/** A line filter operator: contains, not contains, regex, not regex, pattern, not pattern. */
export type LineFilterOp = "|=" | "!=" | "|~" | "!~" | "|>" | "!>";

/** One operand of a line filter; `ip` marks `ip("cidr")`. */
export interface LineFilterTerm {
  value: string;
  ip: boolean;
}

/** A label extraction parameter of `json`/`logfmt`: `label="path"`, or `label` alone (path = label). */
export interface ExtractionParam {
  label: string;
  path: string;
}

/** One `label_format` assignment: a rename (`dst=src`) or a template (`dst="{{...}}"`). */
export interface LabelFormatOp {
  dst: string;
  src: string;
  template: boolean;
}

/** A `drop`/`keep` operand: a bare name, or a matcher that selects by value. */
export interface NamedMatcher {
  name: string;
  matcher?: Matcher;
}

/** A stage of a log pipeline. */
export type Stage =
  | { kind: "lineFilter"; op: LineFilterOp; terms: LineFilterTerm[] }
  | { kind: "json"; params: ExtractionParam[] }
  | { kind: "logfmt"; flags: string[]; params: ExtractionParam[] }
  | { kind: "regexp"; pattern: string }
  | { kind: "pattern"; pattern: string }
  | { kind: "unpack" }
  | { kind: "labelFilter"; filter: LabelFilter }
  | { kind: "lineFormat"; template: string }
  | { kind: "labelFormat"; ops: LabelFormatOp[] }
  | { kind: "drop"; items: NamedMatcher[] }
  | { kind: "keep"; items: NamedMatcher[] }
  | { kind: "decolorize" };

/** A log query: a stream selector and its pipeline. */
export interface LogExpr {
  kind: "log";
  matchers: Matcher[];
  pipeline: Stage[];
}

/** How an unwrapped label becomes a number. */
export type Conversion = "bytes" | "duration" | "duration_seconds";

/** `| unwrap [conv(]label[)]`, with the label filters that follow it. */
export interface Unwrap {
  label: string;
  conversion?: Conversion;
  postFilters: LabelFilter[];
}

/** The log side of a range aggregation: `selector pipeline [| unwrap] [range] [offset]`. */
export interface LogRange {
  selector: LogExpr;
  rangeNs: bigint;
  offsetNs: bigint;
  unwrap?: Unwrap;
}

/** The range aggregation functions. */
export type RangeOp =
  | "count_over_time"
  | "rate"
  | "rate_counter"
  | "bytes_over_time"
  | "bytes_rate"
  | "avg_over_time"
  | "sum_over_time"
  | "min_over_time"
  | "max_over_time"
  | "stdvar_over_time"
  | "stddev_over_time"
  | "quantile_over_time"
  | "first_over_time"
  | "last_over_time"
  | "absent_over_time";

/** The vector aggregation operators. */
export type VectorOp =
  | "sum"
  | "avg"
  | "count"
  | "max"
  | "min"
  | "stddev"
  | "stdvar"
  | "bottomk"
  | "topk"
  | "sort"
  | "sort_desc";

/** `by (...)` or `without (...)`. */
export interface Grouping {
  without: boolean;
  labels: string[];
}

/** Binary operators, lowest precedence first. */
export type BinaryOp =
  | "or"
  | "and"
  | "unless"
  | "=="
  | "!="
  | ">"
  | ">="
  | "<"
  | "<="
  | "+"
  | "-"
  | "*"
  | "/"
  | "%"
  | "^";

/** `on`/`ignoring` and `group_left`/`group_right` of a binary operation between vectors. */
export interface VectorMatching {
  on: boolean;
  labels: string[];
  card: "one-to-one" | "many-to-one" | "one-to-many";
  include: string[];
}

/** A metric (sample) query. */
export type SampleExpr =
  | { kind: "rangeAgg"; op: RangeOp; param?: number; range: LogRange; grouping?: Grouping }
  | { kind: "vectorAgg"; op: VectorOp; param?: number; grouping?: Grouping; inner: SampleExpr }
  | {
      kind: "binary";
      op: BinaryOp;
      returnBool: boolean;
      matching?: VectorMatching;
      left: SampleExpr;
      right: SampleExpr;
    }
  | { kind: "literal"; value: number }
  | { kind: "vector"; value: number }
  | {
      kind: "labelReplace";
      inner: SampleExpr;
      dst: string;
      replacement: string;
      src: string;
      regex: string;
    };

/** Any LogQL query. */
export type Expr = LogExpr | SampleExpr;

/** A range aggregation: the only place a metric query reads lines. */
export type RangeAggExpr = Extract<SampleExpr, { kind: "rangeAgg" }>;

/**
 * The range aggregations of a metric query, left to right: what its lookback, its log
 * selectors and its shared terms are read from.
 */
export function rangeAggregations(e: SampleExpr): RangeAggExpr[] {
  const out: RangeAggExpr[] = [];
  const walk = (x: SampleExpr): void => {
    switch (x.kind) {
      case "rangeAgg":
        out.push(x);
        return;
      case "vectorAgg":
      case "labelReplace":
        walk(x.inner);
        return;
      case "binary":
        walk(x.left);
        walk(x.right);
        return;
      case "literal":
      case "vector":
        return;
    }
  };
  walk(e);
  return out;
}

/** True for a log query (its result is streams of lines, not samples). */
export function isLogExpr(e: Expr): e is LogExpr {
  return e.kind === "log";
}

/** Parsers: stages after which labels may come from the line. */
export const PARSER_STAGES = new Set<Stage["kind"]>([
  "json",
  "logfmt",
  "regexp",
  "pattern",
  "unpack",
]);
