/**
 * The canonical text of a tree. Printing then parsing gives back an equal tree, which the
 * tests check for every query of the table and for random trees; queries that differ only in
 * spacing, quoting or redundant parentheses print the same, so the text can key caches.
 */
import type {
  Expr,
  Grouping,
  LabelFilter,
  LogExpr,
  LogRange,
  Matcher,
  NamedMatcher,
  SampleExpr,
  Stage,
  Unwrap,
} from "./ast.js";
import { BINARY_PRECEDENCE } from "./parser.js";
import { formatBytes, formatDuration } from "./units.js";

/** The canonical query text of a tree. */
export function printExpr(e: Expr): string {
  return e.kind === "log" ? printLog(e) : printSample(e);
}

/** Quotes a string as Go's `strconv.Quote` would, so that LogQL's lexer reads it back. */
export function quote(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 34) out += '\\"';
    else if (c === 92) out += "\\\\";
    else if (c === 10) out += "\\n";
    else if (c === 9) out += "\\t";
    else if (c === 13) out += "\\r";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += s.charAt(i);
  }
  return out + '"';
}

/** A number as the lexer reads it back (`-0` keeps its sign). */
export function formatNumber(n: number): string {
  return Object.is(n, -0) ? "-0" : String(n);
}

/** `name op "value"`. */
export function printMatcher(m: Matcher): string {
  return `${m.name}${m.op}${quote(m.value)}`;
}

/** `{a="b", c=~"d"}`. */
export function printSelector(matchers: readonly Matcher[]): string {
  return `{${matchers.map(printMatcher).join(", ")}}`;
}

/** A log query on one line: its selector and its stages. */
export function printLog(e: LogExpr): string {
  const sel = printSelector(e.matchers);
  return e.pipeline.length === 0 ? sel : `${sel} ${e.pipeline.map(printStage).join(" ")}`;
}

function printNamed(items: readonly NamedMatcher[]): string {
  return items.map((i) => (i.matcher === undefined ? i.name : printMatcher(i.matcher))).join(", ");
}

/** One pipeline stage. */
export function printStage(s: Stage): string {
  switch (s.kind) {
    case "lineFilter":
      return `${s.op} ${s.terms.map((t) => (t.ip ? `ip(${quote(t.value)})` : quote(t.value))).join(" or ")}`;
    case "json":
    case "logfmt": {
      const flags = s.kind === "logfmt" ? s.flags.map((f) => ` ${f}`).join("") : "";
      const params = s.params.map((p) => `${p.label}=${quote(p.path)}`).join(", ");
      return `| ${s.kind}${flags}${params === "" ? "" : ` ${params}`}`;
    }
    case "regexp":
    case "pattern":
      return `| ${s.kind} ${quote(s.pattern)}`;
    case "unpack":
    case "decolorize":
      return `| ${s.kind}`;
    case "labelFilter":
      return `| ${printLabelFilter(s.filter)}`;
    case "lineFormat":
      return `| line_format ${quote(s.template)}`;
    case "labelFormat":
      return `| label_format ${s.ops.map((o) => `${o.dst}=${o.template ? quote(o.src) : o.src}`).join(", ")}`;
    case "drop":
    case "keep":
      return `| ${s.kind} ${printNamed(s.items)}`;
  }
}

/** A label filter expression, with parentheses only where the tree needs them. */
export function printLabelFilter(f: LabelFilter): string {
  switch (f.kind) {
    case "string":
      return `${f.name}${f.op}${quote(f.value)}`;
    case "number":
      return `${f.name}${f.op}${formatNumber(f.value)}`;
    case "duration":
      return `${f.name}${f.op}${formatDuration(f.valueNs)}`;
    case "bytes":
      return `${f.name}${f.op}${formatBytes(f.value)}`;
    case "ip":
      return `${f.name}${f.op}ip(${quote(f.value)})`;
    case "and": {
      const l = f.left.kind === "or" ? `(${printLabelFilter(f.left)})` : printLabelFilter(f.left);
      const r =
        f.right.kind === "or" || f.right.kind === "and"
          ? `(${printLabelFilter(f.right)})`
          : printLabelFilter(f.right);
      return `${l} and ${r}`;
    }
    case "or": {
      const r =
        f.right.kind === "or" ? `(${printLabelFilter(f.right)})` : printLabelFilter(f.right);
      return `${printLabelFilter(f.left)} or ${r}`;
    }
  }
}

/** `| unwrap [conv(]label[)]` and its post-filters. */
export function printUnwrap(u: Unwrap): string {
  const target = u.conversion === undefined ? u.label : `${u.conversion}(${u.label})`;
  return `| unwrap ${target}${u.postFilters.map((f) => ` | ${printLabelFilter(f)}`).join("")}`;
}

function printRange(r: LogRange): string {
  let out = printLog(r.selector);
  if (r.unwrap !== undefined) out += ` ${printUnwrap(r.unwrap)}`;
  out += ` [${formatDuration(r.rangeNs)}]`;
  if (r.offsetNs !== 0n) out += ` offset ${formatDuration(r.offsetNs)}`;
  return out;
}

/** `by (a, b)` or `without (a)`. */
export function printGrouping(g: Grouping): string {
  return `${g.without ? "without" : "by"} (${g.labels.join(", ")})`;
}

/** A metric query on one line. */
export function printSample(e: SampleExpr): string {
  switch (e.kind) {
    case "literal":
      return formatNumber(e.value);
    case "vector":
      return `vector(${formatNumber(e.value)})`;
    case "rangeAgg": {
      const param = e.param === undefined ? "" : `${formatNumber(e.param)}, `;
      const g = e.grouping === undefined ? "" : ` ${printGrouping(e.grouping)}`;
      return `${e.op}(${param}${printRange(e.range)})${g}`;
    }
    case "vectorAgg": {
      const param = e.param === undefined ? "" : `${formatNumber(e.param)}, `;
      const g = e.grouping === undefined ? "" : ` ${printGrouping(e.grouping)}`;
      return `${e.op}${g}${g === "" ? "" : " "}(${param}${printSample(e.inner)})`;
    }
    case "labelReplace":
      return `label_replace(${printSample(e.inner)}, ${[e.dst, e.replacement, e.src, e.regex].map(quote).join(", ")})`;
    case "binary": {
      const prec = BINARY_PRECEDENCE[e.op];
      const side = (c: SampleExpr, right: boolean): string => {
        const text = printSample(c);
        if (c.kind !== "binary") return text;
        const cp = BINARY_PRECEDENCE[c.op];
        const rightAssoc = e.op === "^";
        const needs = cp < prec || (cp === prec && (right ? !rightAssoc : rightAssoc));
        return needs ? `(${text})` : text;
      };
      let op = e.op as string;
      if (e.returnBool) op += " bool";
      const m = e.matching;
      if (m !== undefined) {
        op += ` ${m.on ? "on" : "ignoring"}(${m.labels.join(", ")})`;
        if (m.card !== "one-to-one") {
          op += ` ${m.card === "many-to-one" ? "group_left" : "group_right"}(${m.include.join(", ")})`;
        }
      }
      return `${side(e.left, false)} ${op} ${side(e.right, true)}`;
    }
  }
}
