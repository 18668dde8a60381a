/**
 * Log pipeline evaluation. A pipeline is compiled once per query into an array of
 * closures; each entry runs through them with a reused {@link LabelsBuilder}. Semantics
 * follow Loki's `pkg/logql/log`: parsed labels shadow structured metadata, which shadows
 * stream labels; a parsed name that is a stream label gets `_extracted`; parser failures set
 * `__error__` / `__error_details__` and keep the line; numeric, duration and size filters let
 * an erroneous line through (only string filters, e.g. `__error__=""`, drop it).
 */
import type { CmpOp, LabelFilter, LineFilterStage, NamedMatcher, Stage } from "./pipeline-types.js";
import { LabelsBuilder, ERROR_LABEL, ERROR_DETAILS_LABEL, sanitizeLabelName } from "./builder.js";
import { jsonExpressionParser, logfmtParser, parseJsonLine, unpackLine } from "./extract.js";
import { lineHasIp, parseIpFilter } from "./ip.js";
import { matcherMatches } from "./matchers.js";
import { matchPattern, parsePattern } from "./pattern.js";
import { compileRegex } from "./regex.js";
import { regexLiterals } from "./simplify.js";
import {
  compileTemplate,
  DEFAULT_MAX_TEMPLATE_OUTPUT_BYTES,
  TemplateExecError,
  type TemplateOptions,
} from "./template.js";
import { parseBytes, parseDuration } from "./units.js";

/** One log entry as storage hands it to the querier. */
export interface LogEntry {
  /** Unix epoch nanoseconds. */
  timestamp: bigint;
  line: string;
  /** The stream's labels. */
  labels: Readonly<Record<string, string>>;
  /** The entry's structured metadata. */
  structuredMetadata: Readonly<Record<string, string>>;
}

/** A kept entry: its line and labels after the pipeline. Treat `labels` as read-only. */
export interface PipelineOutput {
  line: string;
  labels: Readonly<Record<string, string>>;
}

/** A compiled pipeline. Not re-entrant: use one per concurrent evaluation. */
export interface Pipeline {
  /** Runs one entry; answers null when the pipeline drops it. */
  process(entry: LogEntry): PipelineOutput | null;
  /**
   * Runs one entry and leaves labels in the builder (for metric extraction, which needs
   * only some labels). Answers the output line, or null when dropped.
   */
  run(entry: LogEntry): string | null;
  /** The builder holding the labels of the last entry given to {@link Pipeline.run}. */
  readonly builder: LabelsBuilder;
  /** True when the pipeline has only line filters, so labels pass through untouched. */
  readonly lineOnly: boolean;
  /** For a line-only pipeline, the filter itself: true when the line is kept. */
  readonly testLine?: (line: string) => boolean;
}

/** Loki's `__error__` for failed label filter conversions and templates. */
export const LABEL_FILTER_ERR = "LabelFilterErr";
export const TEMPLATE_FORMAT_ERR = "TemplateFormatErr";

interface State {
  line: string;
  ts: bigint;
  b: LabelsBuilder;
}
type Step = (s: State) => boolean;

/** Options of {@link compilePipeline}. */
export interface PipelineOptions {
  /**
   * Longest line or label value that `line_format` and `label_format` may build, in UTF-16
   * code units; a template that would build a longer one throws a `LimitError` (a 400 for
   * the querier) before allocating it. Default {@link DEFAULT_MAX_LINE_BYTES}.
   */
  maxLineBytes?: number;
}

/**
 * Default for {@link PipelineOptions.maxLineBytes}: 1 MiB, four times Loki's default
 * `max_line_size` (256 KB), so no stored line is refused, while 30 doubling
 * `line_format` stages stop at 1 MiB instead of exhausting the heap.
 */
export const DEFAULT_MAX_LINE_BYTES = DEFAULT_MAX_TEMPLATE_OUTPUT_BYTES;

/** Compiles the stages of a log query. Stages are assumed to have passed the parser. */
export function compilePipeline(stages: readonly Stage[], options: PipelineOptions = {}): Pipeline {
  const templates: TemplateOptions = { maxBytes: options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES };
  const b = new LabelsBuilder();
  const lineOnly = stages.every((s) => s.kind === "lineFilter");
  if (lineOnly) {
    const tests = stages.map((s) => compileLineFilter(s));
    const test =
      tests.length === 0
        ? () => true
        : tests.length === 1
          ? tests[0]!
          : (line: string) => {
              for (const t of tests) if (!t(line)) return false;
              return true;
            };
    return {
      builder: b,
      lineOnly,
      testLine: test,
      process(entry) {
        if (!test(entry.line)) return null;
        b.reset(entry.labels, entry.structuredMetadata);
        return { line: entry.line, labels: b.labels() };
      },
      run(entry) {
        b.reset(entry.labels, entry.structuredMetadata);
        return test(entry.line) ? entry.line : null;
      },
    };
  }
  const steps = stages.map((st) => compileStage(st, templates));
  const state: State = { line: "", ts: 0n, b };
  const run = (entry: LogEntry): string | null => {
    b.reset(entry.labels, entry.structuredMetadata);
    state.line = entry.line;
    state.ts = entry.timestamp;
    for (const step of steps) if (!step(state)) return null;
    return state.line;
  };
  return {
    builder: b,
    lineOnly,
    process(entry) {
      const line = run(entry);
      return line === null ? null : { line, labels: b.labels() };
    },
    run,
  };
}

function compileStage(s: Stage, templates: TemplateOptions): Step {
  switch (s.kind) {
    case "lineFilter": {
      const t = compileLineFilter(s);
      return (st) => t(st.line);
    }
    case "json": {
      if (s.params.length === 0) {
        return (st) => {
          parseJsonLine(st.line, st.b);
          return true;
        };
      }
      const p = jsonExpressionParser(s.params);
      return (st) => {
        p(st.line, st.b);
        return true;
      };
    }
    case "logfmt": {
      const p = logfmtParser(s.flags, s.params);
      return (st) => {
        p(st.line, st.b);
        return true;
      };
    }
    case "regexp": {
      const re = compileRegex(s.pattern, false);
      return (st) => {
        const m = re.exec(st.line);
        const groups = m?.groups;
        if (groups !== undefined) {
          for (const [k, v] of Object.entries(groups)) {
            const name = sanitizeLabelName(k);
            st.b.set(st.b.isStreamLabel(name) ? name + "_extracted" : name, v);
          }
        }
        return true;
      };
    }
    case "pattern": {
      const p = parsePattern(s.pattern, true);
      return (st) => {
        const vals = matchPattern(p, st.line);
        if (vals !== undefined) {
          p.names.forEach((name, k) => {
            st.b.set(st.b.isStreamLabel(name) ? name + "_extracted" : name, vals[k]!);
          });
        }
        return true;
      };
    }
    case "unpack":
      return (st) => {
        st.line = unpackLine(st.line, st.b);
        return true;
      };
    case "labelFilter": {
      const f = compileLabelFilter(s.filter);
      return (st) => f(st.b);
    }
    case "lineFormat": {
      const t = compileTemplate(s.template, templates);
      return (st) => {
        try {
          st.line = t({ label: (n) => st.b.get(n), line: st.line, timestampNs: st.ts });
        } catch (e) {
          if (!(e instanceof TemplateExecError)) throw e;
          st.b.setError(TEMPLATE_FORMAT_ERR, e.message);
        }
        return true;
      };
    }
    case "labelFormat": {
      const ops = s.ops.map((o) => ({
        ...o,
        t: o.template ? compileTemplate(o.src, templates) : undefined,
      }));
      return (st) => {
        // All assignments read the labels as they were before the stage, as in Loki.
        const input = { label: (n: string) => st.b.get(n), line: st.line, timestampNs: st.ts };
        const results: [string, string, string | undefined][] = [];
        for (const o of ops) {
          if (o.t === undefined) results.push([o.dst, st.b.get(o.src) ?? "", o.src]);
          else {
            try {
              results.push([o.dst, o.t(input), undefined]);
            } catch (e) {
              if (!(e instanceof TemplateExecError)) throw e;
              st.b.setError(TEMPLATE_FORMAT_ERR, e.message);
            }
          }
        }
        for (const [dst, value, renamedFrom] of results) {
          if (renamedFrom !== undefined && renamedFrom !== dst) st.b.delete(renamedFrom);
          st.b.set(dst, value);
        }
        return true;
      };
    }
    case "drop":
      return (st) => {
        for (const item of s.items) {
          const v = st.b.get(item.name);
          if (v === undefined) continue;
          if (item.matcher === undefined || matcherMatches(item.matcher, v)) st.b.delete(item.name);
        }
        return true;
      };
    case "keep":
      return (st) => {
        for (const name of st.b.names_()) {
          if (!s.items.some((item) => keeps(item, name, st.b.get(name)!))) st.b.delete(name);
        }
        return true;
      };
    case "decolorize":
      return (st) => {
        // eslint-disable-next-line no-control-regex -- ANSI escape sequences are the point.
        st.line = st.line.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");
        return true;
      };
  }
}

function keeps(item: NamedMatcher, name: string, value: string): boolean {
  if (item.name !== name) return false;
  return item.matcher === undefined || matcherMatches(item.matcher, value);
}

/** Compiles one line filter into a test of the line. */
export function compileLineFilter(s: LineFilterStage): (line: string) => boolean {
  const positive = s.op === "|=" || s.op === "|~" || s.op === "|>";
  const terms = s.terms.map((t): ((line: string) => boolean) => {
    if (t.ip) {
      const test = parseIpFilter(t.value);
      return (line) => lineHasIp(line, test);
    }
    switch (s.op) {
      case "|=":
      case "!=": {
        const v = t.value;
        return (line) => line.includes(v);
      }
      case "|~":
      case "!~": {
        // Loki's trick: a regex that is a few literals is a substring search.
        const lits = regexLiterals(t.value);
        if (lits !== undefined && lits.length > 0 && lits.length <= 8 && !lits.includes("")) {
          if (lits.length === 1) {
            const v = lits[0]!;
            return (line) => line.includes(v);
          }
          return (line) => lits.some((v) => line.includes(v));
        }
        const re = compileRegex(t.value, false);
        return (line) => re.test(line);
      }
      case "|>":
      case "!>": {
        const p = parsePattern(t.value, false);
        return (line) => matchPattern(p, line) !== undefined;
      }
    }
  });
  if (terms.length === 1) {
    const t = terms[0]!;
    return positive ? t : (line) => !t(line);
  }
  return positive ? (line) => terms.some((t) => t(line)) : (line) => !terms.some((t) => t(line));
}

function cmp(op: CmpOp, a: number, b: number): boolean {
  switch (op) {
    case "==":
      return a === b;
    case "!=":
      return a !== b;
    case ">":
      return a > b;
    case ">=":
      return a >= b;
    case "<":
      return a < b;
    case "<=":
      return a <= b;
  }
}

const GO_FLOAT =
  /^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+|[Ii]nf(?:inity)?|NaN)$/;

/** Parses a label value as Go's `strconv.ParseFloat` would; undefined when it would fail. */
export function parseFloatStrict(v: string): number | undefined {
  if (!GO_FLOAT.test(v)) return undefined;
  const lower = v.toLowerCase();
  if (lower.endsWith("inf") || lower.endsWith("infinity"))
    return v.startsWith("-") ? -Infinity : Infinity;
  return Number(v);
}

/** Compiles a label filter tree into a test that may also set `__error__`. */
export function compileLabelFilter(f: LabelFilter): (b: LabelsBuilder) => boolean {
  switch (f.kind) {
    case "and": {
      const l = compileLabelFilter(f.left);
      const r = compileLabelFilter(f.right);
      return (b) => l(b) && r(b);
    }
    case "or": {
      const l = compileLabelFilter(f.left);
      const r = compileLabelFilter(f.right);
      return (b) => l(b) || r(b);
    }
    case "string": {
      const m = { name: f.name, op: f.op, value: f.value };
      const name = f.name;
      if (m.op === "=") {
        const want = m.value;
        return (b) => (b.get(name) ?? "") === want;
      }
      return (b) => matcherMatches(m, b.get(name) ?? "");
    }
    case "ip": {
      const test = parseIpFilter(f.value);
      const name = f.name;
      return (b) => {
        const v = b.get(name);
        if (v === undefined) return false;
        return f.op === "=" ? test(v) : !test(v);
      };
    }
    case "number":
    case "duration":
    case "bytes": {
      const name = f.name;
      const op = f.op;
      const want = f.kind === "duration" ? f.valueNs : f.value;
      const conv =
        f.kind === "number" ? parseFloatStrict : f.kind === "duration" ? parseDuration : parseBytes;
      return (b) => {
        if (b.hasError()) return true;
        const v = b.get(name);
        if (v === undefined) return false;
        const x = conv(v);
        if (x === undefined) {
          b.setError(LABEL_FILTER_ERR, `cannot parse ${JSON.stringify(v)} as a ${f.kind}`);
          return true;
        }
        return cmp(op, x, want);
      };
    }
  }
}

export { ERROR_LABEL, ERROR_DETAILS_LABEL };
