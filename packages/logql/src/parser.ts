/**
 * A recursive-descent LogQL parser following Loki's grammar (`pkg/logql/syntax/syntax.y`):
 * the same forms, the same operator precedence, errors worded as goyacc's
 * (`syntax error: unexpected X, expecting Y`) with the offending token's line and column.
 * Hand-written because LogQL has no grammar for a JS parser generator and its lexing is
 * context-dependent (durations, sizes, `or` in line filters). Patterns, regexes and
 * templates are compiled here so that a bad one fails at parse time with its position.
 */
import type {
  BinaryOp,
  CmpOp,
  Conversion,
  ExtractionParam,
  Expr,
  Grouping,
  LabelFilter,
  LabelFormatOp,
  LineFilterOp,
  LineFilterTerm,
  LogExpr,
  LogRange,
  MatchOp,
  Matcher,
  NamedMatcher,
  RangeOp,
  SampleExpr,
  Stage,
  Unwrap,
  VectorMatching,
  VectorOp,
} from "./ast.js";
import { ParseError } from "./errors.js";
import { parseIpFilter } from "./ip.js";
import { parseJsonPath } from "./jsonpath.js";
import { describeToken, tokenize, type Token } from "./lexer.js";
import { parsePattern } from "./pattern.js";
import { compileRegex, RegexSyntaxError } from "./regex.js";
import { compileTemplate, TemplateSyntaxError } from "./template.js";

/** Limits on what the parser accepts. */
export interface ParseOptions {
  /** Longest query accepted, in UTF-16 code units. Default 128 KiB. */
  maxQueryLength?: number;
  /**
   * Deepest nesting accepted, both of the text (parentheses, aggregations) and of the tree
   * (a binary operator or a label filter `and`/`or` is one level: `1 + 1 + 1` is 3 deep).
   * Default {@link DEFAULT_MAX_DEPTH}.
   */
  maxDepth?: number;
  /** Most tree nodes (expressions, matchers, stages, label filters). Default {@link DEFAULT_MAX_NODES}. */
  maxNodes?: number;
}

/** Default for {@link ParseOptions.maxQueryLength}. */
export const DEFAULT_MAX_QUERY_LENGTH = 128 * 1024;
/**
 * Default for {@link ParseOptions.maxDepth}. Every pass over a tree (validation, printing,
 * bloom-test extraction, pipeline compilation, metric evaluation, the querier's planners)
 * recurses once or twice per level, so this bound is what makes them all safe from stack
 * overflow, for every query the parser accepts. Real queries are a few levels deep: a
 * dashboard summing 30 rates is 31; 128 leaves a wide margin and costs a few KB of stack.
 */
export const DEFAULT_MAX_DEPTH = 128;
/**
 * Default for {@link ParseOptions.maxNodes}. Real queries have tens of nodes and generated
 * ones (ad-hoc filters, long `or` chains) hundreds; 10,000 keeps a query's evaluation cost
 * (one pass over the lines per range aggregation) proportionate to what a person writes.
 */
export const DEFAULT_MAX_NODES = 10_000;

export const RANGE_OPS = new Set<string>([
  "count_over_time",
  "rate",
  "rate_counter",
  "bytes_over_time",
  "bytes_rate",
  "avg_over_time",
  "sum_over_time",
  "min_over_time",
  "max_over_time",
  "stdvar_over_time",
  "stddev_over_time",
  "quantile_over_time",
  "first_over_time",
  "last_over_time",
  "absent_over_time",
]);

export const VECTOR_OPS = new Set<string>([
  "sum",
  "avg",
  "count",
  "max",
  "min",
  "stddev",
  "stdvar",
  "bottomk",
  "topk",
  "sort",
  "sort_desc",
]);

/** Binary operator precedence, as Loki's `%left` / `%right` declarations. */
export const BINARY_PRECEDENCE: Record<BinaryOp, number> = {
  or: 1,
  and: 2,
  unless: 2,
  "==": 3,
  "!=": 3,
  ">": 3,
  ">=": 3,
  "<": 3,
  "<=": 3,
  "+": 4,
  "-": 4,
  "*": 5,
  "/": 5,
  "%": 5,
  "^": 6,
};

const COMPARISONS = new Set<string>(["==", "!=", ">", ">=", "<", "<="]);
const LINE_FILTER_OPS = new Set<string>(["|=", "!=", "|~", "!~", "|>", "!>"]);
const MATCH_OPS = new Set<string>(["=", "!=", "=~", "!~"]);
const FILTER_OPS = new Set<string>(["=", "!=", "=~", "!~", "==", ">", ">=", "<", "<="]);
const STAGE_WORDS = new Set<string>([
  "json",
  "logfmt",
  "regexp",
  "pattern",
  "unpack",
  "line_format",
  "label_format",
  "drop",
  "keep",
  "decolorize",
  "unwrap",
]);
const LOGFMT_FLAGS = new Set<string>(["--strict", "--keep-empty"]);
const CONVERSIONS = new Set<string>(["bytes", "duration", "duration_seconds"]);

/** Parses a query into a tree without the semantic checks of `validateExpr`. */
export function parseSyntax(query: string, options: ParseOptions = {}): Expr {
  const max = options.maxQueryLength ?? DEFAULT_MAX_QUERY_LENGTH;
  if (query.length > max) {
    throw new ParseError(
      `query too large: ${query.length} characters, the limit is ${max}`,
      0,
      0,
      "query_too_large",
    );
  }
  return new Parser(
    tokenize(query),
    options.maxDepth ?? DEFAULT_MAX_DEPTH,
    options.maxNodes ?? DEFAULT_MAX_NODES,
  ).parseRoot();
}

interface RangeBody {
  selector: LogExpr;
  unwrap?: Unwrap;
  rangeNs?: bigint;
  offsetNs: bigint;
}

class Parser {
  private pos = 0;
  private depth = 0;
  private nodes = 0;
  /** Height of each nested node built so far (leaves are absent: height 1). */
  private readonly heights = new WeakMap<object, number>();

  constructor(
    private readonly toks: Token[],
    private readonly maxDepth: number,
    private readonly maxNodes: number,
  ) {}

  parseRoot(): Expr {
    if (this.peek().type === "eof") this.unexpected(this.peek());
    const e = this.parseBinary(0);
    if (this.peek().type !== "eof") this.unexpected(this.peek());
    return e;
  }

  // --- token helpers --------------------------------------------------------------------

  private peek(k = 0): Token {
    return this.toks[Math.min(this.pos + k, this.toks.length - 1)]!;
  }

  private next(): Token {
    const t = this.peek();
    if (t.type !== "eof") this.pos++;
    return t;
  }

  private isOp(text: string, k = 0): boolean {
    const t = this.peek(k);
    return t.type === "op" && t.text === text;
  }

  private isWord(word: string, k = 0): boolean {
    const t = this.peek(k);
    return t.type === "ident" && t.text === word;
  }

  private unexpected(t: Token, expecting?: string): never {
    const what = `syntax error: unexpected ${describeToken(t)}`;
    throw new ParseError(
      expecting === undefined ? what : `${what}, expecting ${expecting}`,
      t.line,
      t.col,
    );
  }

  private failAt(t: Token, reason: string): never {
    throw new ParseError(reason, t.line, t.col);
  }

  private expectOp(text: string): Token {
    if (!this.isOp(text)) this.unexpected(this.peek(), text);
    return this.next();
  }

  private expectType(type: Token["type"], name: string): Token {
    if (this.peek().type !== type) this.unexpected(this.peek(), name);
    return this.next();
  }

  private enter(): void {
    if (++this.depth > this.maxDepth) {
      this.failAt(this.peek(), `syntax error: query nested deeper than ${this.maxDepth} levels`);
    }
  }

  private leave(): void {
    this.depth--;
  }

  private height(x: object | undefined): number {
    return x === undefined ? 0 : (this.heights.get(x) ?? 1);
  }

  /**
   * Records a new node of the tree: counts it against the node bound and, for a node with
   * children, checks its height (the tallest child's plus one) against the depth bound.
   * `at` is the token the error points at.
   */
  private node<T extends object>(x: T, at: Token, ...children: (object | undefined)[]): T {
    if (++this.nodes > this.maxNodes) {
      throw new ParseError(
        `query too large: more than ${this.maxNodes} expressions, matchers and stages`,
        at.line,
        at.col,
        "query_too_large",
      );
    }
    if (children.length > 0) {
      let h = 0;
      for (const c of children) h = Math.max(h, this.height(c));
      if (h + 1 > this.maxDepth) {
        this.failAt(at, `syntax error: query nested deeper than ${this.maxDepth} levels`);
      }
      this.heights.set(x, h + 1);
    }
    return x;
  }

  // --- expressions ----------------------------------------------------------------------

  private parseBinary(minPrec: number): Expr {
    let left = this.parseOperand();
    for (;;) {
      const t = this.peek();
      const op = binaryOpOf(t);
      if (op === undefined) break;
      const prec = BINARY_PRECEDENCE[op];
      if (prec < minPrec) break;
      this.next();
      let returnBool = false;
      if (this.isWord("bool")) {
        this.next();
        returnBool = true;
      }
      let matching: VectorMatching | undefined;
      if (this.isWord("on") || this.isWord("ignoring")) {
        const on = this.next().text === "on";
        matching = { on, labels: this.parseLabelList(), card: "one-to-one", include: [] };
        if (this.isWord("group_left") || this.isWord("group_right")) {
          matching.card = this.next().text === "group_left" ? "many-to-one" : "one-to-many";
          if (this.isOp("(")) matching.include = this.parseLabelList();
        }
      }
      this.enter();
      const right = this.parseBinary(op === "^" ? prec : prec + 1);
      this.leave();
      if (left.kind === "log") {
        this.failAt(t, `unexpected type for left leg of binary operation (${op}): log query`);
      }
      if (right.kind === "log") {
        this.failAt(t, `unexpected type for right leg of binary operation (${op}): log query`);
      }
      const node: SampleExpr = { kind: "binary", op, returnBool, left, right };
      if (matching !== undefined) node.matching = matching;
      left = this.node(node, t, left, right);
    }
    return left;
  }

  private parseOperand(): Expr {
    const t = this.peek();
    if (t.type === "op") {
      switch (t.text) {
        case "{":
          return this.parseLogExpr();
        case "(": {
          this.next();
          this.enter();
          const inner = this.parseBinary(0);
          this.leave();
          this.expectOp(")");
          if (this.isOp("[")) this.unexpected(this.peek());
          return inner;
        }
        case "+":
        case "-":
          if (this.peek(1).type === "number") {
            this.next();
            const n = this.next();
            return this.node({ kind: "literal", value: t.text === "-" ? -n.num : n.num }, t);
          }
          return this.unexpected(this.peek(1), "NUMBER");
        default:
          return this.unexpected(t);
      }
    }
    if (t.type === "number") {
      this.next();
      return this.node({ kind: "literal", value: t.num }, t);
    }
    if (t.type === "ident") {
      const fn = t.text;
      if (RANGE_OPS.has(fn) && this.isOp("(", 1)) return this.parseRangeAgg();
      if (
        VECTOR_OPS.has(fn) &&
        (this.isOp("(", 1) || this.isWord("by", 1) || this.isWord("without", 1))
      ) {
        return this.parseVectorAgg();
      }
      if (fn === "label_replace" && this.isOp("(", 1)) return this.parseLabelReplace();
      if (fn === "vector" && this.isOp("(", 1)) {
        this.next();
        this.next();
        const n = this.expectType("number", "NUMBER");
        this.expectOp(")");
        return this.node({ kind: "vector", value: n.num }, t);
      }
    }
    return this.unexpected(t);
  }

  private parseRangeAgg(): SampleExpr {
    const opTok = this.next();
    const op = opTok.text as RangeOp;
    this.expectOp("(");
    this.enter();
    let param: number | undefined;
    if (this.peek().type === "number" && this.isOp(",", 1)) {
      param = this.next().num;
      this.next();
    }
    const range = this.parseLogRange();
    this.leave();
    this.expectOp(")");
    const node: SampleExpr = { kind: "rangeAgg", op, range };
    if (param !== undefined) node.param = param;
    if (this.isWord("by") || this.isWord("without")) node.grouping = this.parseGrouping();
    return this.node(node, opTok, range);
  }

  private parseVectorAgg(): SampleExpr {
    const opTok = this.next();
    const op = opTok.text as VectorOp;
    let grouping: Grouping | undefined;
    if (this.isWord("by") || this.isWord("without")) grouping = this.parseGrouping();
    this.expectOp("(");
    this.enter();
    let param: number | undefined;
    if (this.peek().type === "number" && this.isOp(",", 1)) {
      param = this.next().num;
      this.next();
    }
    const at = this.peek();
    const inner = this.parseBinary(0);
    this.leave();
    if (inner.kind === "log")
      this.failAt(at, `syntax error: unexpected log query in ${op}, expecting a metric query`);
    this.expectOp(")");
    if (grouping === undefined && (this.isWord("by") || this.isWord("without"))) {
      grouping = this.parseGrouping();
    }
    const node: SampleExpr = { kind: "vectorAgg", op, inner };
    if (param !== undefined) node.param = param;
    if (grouping !== undefined) node.grouping = grouping;
    return this.node(node, opTok, inner);
  }

  private parseLabelReplace(): SampleExpr {
    const fnTok = this.next();
    this.expectOp("(");
    this.enter();
    const at = this.peek();
    const inner = this.parseBinary(0);
    this.leave();
    if (inner.kind === "log")
      this.failAt(
        at,
        "syntax error: unexpected log query in label_replace, expecting a metric query",
      );
    const args: string[] = [];
    for (let k = 0; k < 4; k++) {
      this.expectOp(",");
      args.push(this.expectType("string", "STRING").str);
    }
    const regexTok = this.peek(-1);
    this.expectOp(")");
    const [dst, replacement, src, regex] = args as [string, string, string, string];
    this.checkRegex(regex, true, regexTok);
    return this.node({ kind: "labelReplace", inner, dst, replacement, src, regex }, fnTok, inner);
  }

  private parseGrouping(): Grouping {
    const without = this.next().text === "without";
    return { without, labels: this.parseLabelList() };
  }

  private parseLabelList(): string[] {
    this.expectOp("(");
    const labels: string[] = [];
    if (this.isOp(")")) {
      this.next();
      return labels;
    }
    for (;;) {
      labels.push(this.expectType("ident", "IDENTIFIER").text);
      if (this.isOp(",")) {
        this.next();
        continue;
      }
      this.expectOp(")");
      return labels;
    }
  }

  // --- log queries ----------------------------------------------------------------------

  private parseLogExpr(): LogExpr {
    const at = this.peek();
    const matchers = this.parseSelector();
    const { stages, unwrap } = this.parsePipeline(false);
    if (unwrap !== undefined) this.unexpected(this.peek());
    return this.node({ kind: "log", matchers, pipeline: stages }, at, ...stages);
  }

  private parseLogRange(): LogRange {
    const at = this.peek();
    const body = this.parseRangeBody();
    if (body.rangeNs === undefined) this.unexpected(this.peek(), "[");
    // The selector's pipeline is final only now (`{a="b"} [5m] | json` moves it).
    const selector = this.node(body.selector, at, ...body.selector.pipeline);
    const out: LogRange = { selector, rangeNs: body.rangeNs, offsetNs: body.offsetNs };
    if (body.unwrap !== undefined) out.unwrap = body.unwrap;
    return this.node(out, at, selector, out.unwrap);
  }

  private parseRangeBody(): RangeBody {
    if (this.isOp("(")) {
      this.next();
      this.enter();
      const inner = this.parseRangeBody();
      this.leave();
      this.expectOp(")");
      if (inner.rangeNs === undefined) {
        if (!this.isOp("[")) this.unexpected(this.peek(), "[");
        this.parseRangeSuffix(inner);
        if (inner.unwrap === undefined && inner.selector.pipeline.length === 0) {
          const after = this.parsePipeline(true);
          if (after.stages.length > 0) this.unexpected(this.peek());
          if (after.unwrap !== undefined) inner.unwrap = after.unwrap;
        }
      }
      return inner;
    }
    if (!this.isOp("{")) this.unexpected(this.peek(), "{");
    const matchers = this.parseSelector();
    let { stages, unwrap } = this.parsePipeline(true);
    const body: RangeBody = { selector: { kind: "log", matchers, pipeline: stages }, offsetNs: 0n };
    if (this.isOp("[")) {
      this.parseRangeSuffix(body);
      if (stages.length === 0 && unwrap === undefined) {
        ({ stages, unwrap } = this.parsePipeline(true));
        body.selector.pipeline = stages;
      }
    }
    if (unwrap !== undefined) body.unwrap = unwrap;
    return body;
  }

  private parseRangeSuffix(body: RangeBody): void {
    this.expectOp("[");
    const d = this.expectType("duration", "DURATION");
    this.expectOp("]");
    body.rangeNs = BigInt(Math.round(d.num));
    if (this.isWord("offset")) {
      this.next();
      const off = this.expectType("duration", "DURATION");
      body.offsetNs = BigInt(Math.round(off.num));
    }
  }

  private parseSelector(): Matcher[] {
    this.expectOp("{");
    const matchers: Matcher[] = [];
    if (this.isOp("}")) {
      this.next();
      return matchers;
    }
    for (;;) {
      matchers.push(this.parseMatcher());
      if (this.isOp(",")) {
        this.next();
        continue;
      }
      if (!this.isOp("}")) this.unexpected(this.peek(), ", or }");
      this.next();
      return matchers;
    }
  }

  private parseMatcher(): Matcher {
    const at = this.peek();
    const name = this.expectType("ident", "IDENTIFIER").text;
    const opTok = this.peek();
    if (opTok.type !== "op" || !MATCH_OPS.has(opTok.text))
      this.unexpected(opTok, "= or != or =~ or !~");
    this.next();
    const v = this.expectType("string", "STRING");
    const op = opTok.text as MatchOp;
    if (op === "=~" || op === "!~") this.checkRegex(v.str, true, v);
    return this.node({ name, op, value: v.str }, at);
  }

  private checkRegex(pattern: string, anchored: boolean, at: Token): void {
    try {
      compileRegex(pattern, anchored);
    } catch (e) {
      if (e instanceof RegexSyntaxError) this.failAt(at, e.message);
      throw e;
    }
  }

  /** Parses stages while they come; `| unwrap` is accepted only inside a range aggregation. */
  private parsePipeline(allowUnwrap: boolean): { stages: Stage[]; unwrap?: Unwrap } {
    const stages: Stage[] = [];
    for (;;) {
      const t = this.peek();
      if (t.type !== "op") break;
      if (LINE_FILTER_OPS.has(t.text)) {
        stages.push(this.node(this.parseLineFilter(), t));
        continue;
      }
      if (t.text !== "|") break;
      const word = this.peek(1);
      const isStage =
        word.type === "ident" &&
        STAGE_WORDS.has(word.text) &&
        !(this.peek(2).type === "op" && FILTER_OPS.has(this.peek(2).text));
      if (isStage && word.text === "unwrap") {
        if (!allowUnwrap) this.unexpected(word);
        return { stages, unwrap: this.parseUnwrap() };
      }
      this.next();
      if (isStage) {
        stages.push(this.node(this.parseStage(), t));
      } else {
        const filter = this.parseLabelFilter();
        stages.push(this.node({ kind: "labelFilter", filter }, t, filter));
      }
    }
    return { stages };
  }

  private parseLineFilter(): Stage {
    const op = this.next().text as LineFilterOp;
    const terms: LineFilterTerm[] = [this.parseLineFilterTerm(op)];
    while (this.isWord("or")) {
      this.next();
      terms.push(this.parseLineFilterTerm(op));
    }
    return { kind: "lineFilter", op, terms };
  }

  private parseLineFilterTerm(op: LineFilterOp): LineFilterTerm {
    if (this.isWord("ip") && this.isOp("(", 1)) {
      const at = this.next();
      this.next();
      const v = this.expectType("string", "STRING");
      this.expectOp(")");
      if (op !== "|=" && op !== "!=")
        this.failAt(at, `syntax error: ip() is only allowed with |= and !=`);
      this.checkIp(v);
      return { value: v.str, ip: true };
    }
    const v = this.expectType("string", "STRING");
    if (op === "|~" || op === "!~") this.checkRegex(v.str, false, v);
    if (op === "|>" || op === "!>") this.checkPattern(v, false);
    return { value: v.str, ip: false };
  }

  private checkIp(v: Token): void {
    try {
      parseIpFilter(v.str);
    } catch (e) {
      this.failAt(v, e instanceof Error ? e.message : String(e));
    }
  }

  private checkPattern(v: Token, needCapture: boolean): void {
    try {
      parsePattern(v.str, needCapture);
    } catch (e) {
      this.failAt(v, e instanceof Error ? e.message : String(e));
    }
  }

  private parseUnwrap(): Unwrap {
    const at = this.next();
    this.next();
    let conversion: Conversion | undefined;
    let label: string;
    if (this.peek().type === "ident" && CONVERSIONS.has(this.peek().text) && this.isOp("(", 1)) {
      conversion = this.next().text as Conversion;
      this.next();
      label = this.expectType("ident", "IDENTIFIER").text;
      this.expectOp(")");
    } else {
      label = this.expectType("ident", "IDENTIFIER").text;
    }
    const postFilters: LabelFilter[] = [];
    while (
      this.isOp("|") &&
      !(
        this.peek(1).type === "ident" &&
        STAGE_WORDS.has(this.peek(1).text) &&
        !(this.peek(2).type === "op" && FILTER_OPS.has(this.peek(2).text))
      )
    ) {
      this.next();
      postFilters.push(this.parseLabelFilter());
    }
    const out: Unwrap = { label, postFilters };
    if (conversion !== undefined) out.conversion = conversion;
    return this.node(out, at, ...postFilters);
  }

  private parseStage(): Stage {
    const word = this.next();
    switch (word.text) {
      case "json":
        return { kind: "json", params: this.parseExtractionParams(true) };
      case "logfmt": {
        const flags: string[] = [];
        while (this.peek().type === "flag") {
          const f = this.next();
          if (!LOGFMT_FLAGS.has(f.text)) this.failAt(f, `invalid logfmt flag ${f.text}`);
          if (!flags.includes(f.text)) flags.push(f.text);
        }
        return { kind: "logfmt", flags, params: this.parseExtractionParams(false) };
      }
      case "regexp": {
        const v = this.expectType("string", "STRING");
        this.checkRegex(v.str, false, v);
        if (!/\(\?P?<[A-Za-z_]/.test(v.str))
          this.failAt(v, "at least one named capture must be supplied");
        return { kind: "regexp", pattern: v.str };
      }
      case "pattern": {
        const v = this.expectType("string", "STRING");
        this.checkPattern(v, true);
        return { kind: "pattern", pattern: v.str };
      }
      case "unpack":
        return { kind: "unpack" };
      case "decolorize":
        return { kind: "decolorize" };
      case "line_format": {
        const v = this.expectType("string", "STRING");
        this.checkTemplate(v);
        return { kind: "lineFormat", template: v.str };
      }
      case "label_format": {
        const ops: LabelFormatOp[] = [];
        do {
          if (ops.length > 0) this.next();
          const dst = this.expectType("ident", "IDENTIFIER").text;
          this.expectOp("=");
          const v = this.peek();
          if (v.type === "ident") {
            this.next();
            ops.push({ dst, src: v.text, template: false });
          } else {
            this.expectType("string", "IDENTIFIER or STRING");
            this.checkTemplate(v);
            ops.push({ dst, src: v.str, template: true });
          }
        } while (this.isOp(","));
        return { kind: "labelFormat", ops };
      }
      case "drop":
      case "keep": {
        const items: NamedMatcher[] = [];
        do {
          if (items.length > 0) this.next();
          if (this.peek(1).type === "op" && MATCH_OPS.has(this.peek(1).text)) {
            const m = this.parseMatcher();
            items.push({ name: m.name, matcher: m });
          } else {
            items.push({ name: this.expectType("ident", "IDENTIFIER").text });
          }
        } while (this.isOp(","));
        return { kind: word.text, items };
      }
      default:
        return this.unexpected(word);
    }
  }

  private checkTemplate(v: Token): void {
    try {
      compileTemplate(v.str);
    } catch (e) {
      if (e instanceof TemplateSyntaxError || e instanceof RegexSyntaxError)
        this.failAt(v, e.message);
      throw e;
    }
  }

  private parseExtractionParams(json: boolean): ExtractionParam[] {
    const params: ExtractionParam[] = [];
    if (this.peek().type !== "ident") return params;
    do {
      if (params.length > 0) this.next();
      const label = this.expectType("ident", "IDENTIFIER").text;
      let path = label;
      if (this.isOp("=")) {
        this.next();
        const v = this.expectType("string", "STRING");
        path = v.str;
        if (json) {
          try {
            parseJsonPath(path);
          } catch (e) {
            this.failAt(v, e instanceof Error ? e.message : String(e));
          }
        }
      }
      params.push({ label, path });
    } while (this.isOp(","));
    return params;
  }

  // --- label filters --------------------------------------------------------------------

  private parseLabelFilter(): LabelFilter {
    let left = this.parseLabelFilterAnd();
    while (this.isWord("or")) {
      const at = this.next();
      const right = this.parseLabelFilterAnd();
      left = this.node({ kind: "or", left, right }, at, left, right);
    }
    return left;
  }

  private parseLabelFilterAnd(): LabelFilter {
    let left = this.parseLabelFilterPrimary();
    for (;;) {
      const at = this.peek();
      if (this.isWord("and") || this.isOp(",")) {
        this.next();
      } else if (
        !(
          this.peek().type === "ident" &&
          this.peek(1).type === "op" &&
          FILTER_OPS.has(this.peek(1).text)
        ) &&
        !this.isOp("(")
      ) {
        return left;
      }
      const right = this.parseLabelFilterPrimary();
      left = this.node({ kind: "and", left, right }, at, left, right);
    }
  }

  private parseLabelFilterPrimary(): LabelFilter {
    if (this.isOp("(")) {
      this.next();
      this.enter();
      const f = this.parseLabelFilter();
      this.leave();
      this.expectOp(")");
      return f;
    }
    const at = this.peek();
    return this.node(this.parseLabelComparison(), at);
  }

  private parseLabelComparison(): LabelFilter {
    const name = this.expectType("ident", "IDENTIFIER").text;
    const opTok = this.peek();
    if (opTok.type !== "op" || !FILTER_OPS.has(opTok.text)) {
      this.unexpected(opTok, "= or != or =~ or !~ or == or > or >= or < or <=");
    }
    this.next();
    const op = opTok.text;
    const v = this.peek();
    if (op === "=~" || op === "!~") {
      this.expectType("string", "STRING");
      this.checkRegex(v.str, true, v);
      return { kind: "string", name, op, value: v.str };
    }
    if ((op === "=" || op === "!=") && v.type === "string") {
      this.next();
      return { kind: "string", name, op, value: v.str };
    }
    if ((op === "=" || op === "!=") && v.type === "ident" && v.text === "ip" && this.isOp("(", 1)) {
      this.next();
      this.next();
      const s = this.expectType("string", "STRING");
      this.expectOp(")");
      this.checkIp(s);
      return { kind: "ip", name, op, value: s.str };
    }
    const cmp: CmpOp = op === "=" ? "==" : (op as CmpOp);
    if (v.type === "duration") {
      this.next();
      return { kind: "duration", name, op: cmp, valueNs: v.num };
    }
    if (v.type === "bytes") {
      this.next();
      return { kind: "bytes", name, op: cmp, value: v.num };
    }
    if (v.type === "number") {
      this.next();
      return { kind: "number", name, op: cmp, value: v.num };
    }
    if (v.type === "op" && (v.text === "-" || v.text === "+") && this.peek(1).type === "number") {
      this.next();
      const n = this.next().num;
      return { kind: "number", name, op: cmp, value: v.text === "-" ? -n : n };
    }
    return this.unexpected(
      v,
      op === "=" || op === "!="
        ? "STRING or NUMBER or DURATION or BYTES or ip"
        : "NUMBER or DURATION or BYTES",
    );
  }
}

function binaryOpOf(t: Token): BinaryOp | undefined {
  if (t.type === "ident") {
    return t.text === "or" || t.text === "and" || t.text === "unless" ? t.text : undefined;
  }
  if (t.type !== "op") return undefined;
  if (COMPARISONS.has(t.text) || "+-*/%^".includes(t.text)) return t.text as BinaryOp;
  return undefined;
}
