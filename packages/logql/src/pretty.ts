/**
 * LogQL formatted for reading, as Loki's `format_query` answers (`syntax.Prettify`, after
 * Prometheus' PromQL prettier): an expression whose one-line text fits in 100 characters
 * stays on one line; a longer one is broken into its parts, each child on its own lines,
 * indented two spaces per level. Pipelines put each stage (a run of line filters counts as
 * one stage, broken one filter per line when it is itself too long) on its own line under
 * the selector; range and vector aggregations put their arguments between `(` and `)` lines;
 * binary operations put the operator on a line of its own between the operands.
 *
 * The one-line text is this package's printer's, so lengths and spacing follow it (a range
 * is written `{a="b"} [5m]`). Unlike Loki's, operands that need parentheses to keep their
 * meaning are kept whole on one line with them, so the output always parses back to the
 * same tree.
 */
import type { Expr, LogExpr, LogRange, SampleExpr, Stage } from "./ast.js";
import { BINARY_PRECEDENCE } from "./parser.js";
import {
  formatNumber,
  printGrouping,
  printLog,
  printSample,
  printSelector,
  printStage,
  printLabelFilter,
  quote,
} from "./printer.js";
import { formatDuration } from "./units.js";

/** Loki's `maxCharsPerLine`: longer expressions are broken over several lines. */
export const MAX_CHARS_PER_LINE = 100;

const pad = (level: number): string => "  ".repeat(level);

/** `e` formatted for reading (see the file comment). */
export function prettyExpr(e: Expr): string {
  return e.kind === "log" ? prettyLog(e, 0) : prettySample(e, 0);
}

/** Consecutive line filters form one stage, as in Loki's tree. */
function stageGroups(stages: readonly Stage[]): Stage[][] {
  const groups: Stage[][] = [];
  for (const s of stages) {
    const last = groups[groups.length - 1];
    if (s.kind === "lineFilter" && last?.[0]?.kind === "lineFilter") last.push(s);
    else groups.push([s]);
  }
  return groups;
}

function prettyLog(e: LogExpr, level: number): string {
  const line = printLog(e);
  if (line.length <= MAX_CHARS_PER_LINE) return pad(level) + line;
  const lines = [pad(level) + printSelector(e.matchers)];
  for (const group of stageGroups(e.pipeline)) {
    const text = group.map(printStage).join(" ");
    if (group.length > 1 && text.length > MAX_CHARS_PER_LINE) {
      for (const s of group) lines.push(pad(level + 1) + printStage(s));
    } else lines.push(pad(level + 1) + text);
  }
  return lines.join("\n");
}

function prettyRange(r: LogRange, level: number): string {
  let out = prettyLog(r.selector, level);
  if (r.unwrap !== undefined) {
    const u = r.unwrap;
    const target = u.conversion === undefined ? u.label : `${u.conversion}(${u.label})`;
    out += `\n${pad(level + 1)}| unwrap ${target}`;
    for (const f of u.postFilters) out += `\n${pad(level + 1)}| ${printLabelFilter(f)}`;
  }
  out += ` [${formatDuration(r.rangeNs)}]`;
  if (r.offsetNs !== 0n) out += ` offset ${formatDuration(r.offsetNs)}`;
  return out;
}

/** `(`, the arguments one per line (each already indented), `)`. */
function args(level: number, items: readonly string[]): string {
  return `(\n${items.join(",\n")}\n${pad(level)})`;
}

function prettySample(e: SampleExpr, level: number): string {
  const line = printSample(e);
  if (line.length <= MAX_CHARS_PER_LINE) return pad(level) + line;
  switch (e.kind) {
    case "literal":
    case "vector":
      return pad(level) + line;
    case "rangeAgg": {
      const items = e.param === undefined ? [] : [pad(level + 1) + formatNumber(e.param)];
      items.push(prettyRange(e.range, level + 1));
      const g = e.grouping === undefined ? "" : ` ${printGrouping(e.grouping)}`;
      return `${pad(level)}${e.op}${args(level, items)}${g}`;
    }
    case "vectorAgg": {
      const items = e.param === undefined ? [] : [pad(level + 1) + formatNumber(e.param)];
      items.push(prettySample(e.inner, level + 1));
      const g = e.grouping === undefined ? "" : ` ${printGrouping(e.grouping)}`;
      return `${pad(level)}${e.op}${g}${args(level, items)}`;
    }
    case "labelReplace": {
      const quoted = [e.dst, e.replacement, e.src, e.regex].map((v) => pad(level + 1) + quote(v));
      return `${pad(level)}label_replace${args(level, [prettySample(e.inner, level + 1), ...quoted])}`;
    }
    case "binary": {
      const prec = BINARY_PRECEDENCE[e.op];
      const side = (c: SampleExpr, right: boolean): string => {
        if (c.kind === "binary") {
          const cp = BINARY_PRECEDENCE[c.op];
          const rightAssoc = e.op === "^";
          if (cp < prec || (cp === prec && (right ? !rightAssoc : rightAssoc))) {
            return `${pad(level + 1)}(${printSample(c)})`;
          }
        }
        return prettySample(c, level + 1);
      };
      let op = e.op as string;
      if (e.returnBool) op += " bool";
      const m = e.matching;
      if (m !== undefined) {
        op += ` ${m.on ? "on" : "ignoring"} (${m.labels.join(", ")})`;
        if (m.card !== "one-to-one") {
          const group = m.card === "many-to-one" ? "group_left" : "group_right";
          op += m.include.length === 0 ? ` ${group}` : ` ${group} (${m.include.join(", ")})`;
        }
      }
      return `${side(e.left, false)}\n${pad(level)}${op}\n${side(e.right, true)}`;
    }
  }
}
