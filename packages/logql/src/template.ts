/**
 * The subset of Go's text/template that Loki's `line_format` and `label_format` use:
 * text, `{{ .label }}`, literals, function calls, pipes, parentheses, `{{- -}}` trimming,
 * comments and `if`/`else if`/`else`/`end`. Written by hand because no npm package speaks
 * Go's template syntax; unknown functions and actions fail at parse time with the name,
 * never as a silent empty string at run time. Functions follow Loki's docs (`template`
 * functions and the sprig ones Loki registers).
 */
import {
  FUNCS,
  TemplateExecError,
  fits,
  show,
  truthy,
  type Ctx,
  type TemplateInput,
  type Value,
} from "./template-funcs.js";

export { TemplateExecError } from "./template-funcs.js";
export type { TemplateInput } from "./template-funcs.js";

/** A template that does not parse, with Go's wording where it has one. */
export class TemplateSyntaxError extends Error {
  override readonly name = "TemplateSyntaxError";
}

type Arg =
  | { t: "field"; name: string }
  | { t: "dot" }
  | { t: "lit"; v: Value }
  | { t: "fn"; name: string }
  | { t: "sub"; p: Pipeline };
type Command = Arg[];
type Pipeline = Command[];
type Node =
  | { t: "text"; s: string }
  | { t: "out"; p: Pipeline }
  | { t: "if"; branches: { cond: Pipeline; body: Node[] }[]; otherwise: Node[] };

/**
 * A compiled template: call it per entry. Throws {@link TemplateExecError} for what Loki
 * turns into `__error__`, and {@link LimitError} when a result would exceed `maxBytes`.
 */
export type Template = (input: TemplateInput) => string;

/** Options of {@link compileTemplate}. */
export interface TemplateOptions {
  /**
   * Longest string a template may build, its result or any value inside it, counted in
   * UTF-16 code units (what the string costs in memory; at most its UTF-8 bytes). Checked
   * before the allocation wherever the size can be known first. Default 1 MiB.
   */
  maxBytes?: number;
}

/** Default for {@link TemplateOptions.maxBytes}: 4x Loki's default `max_line_size` (256 KB). */
export const DEFAULT_MAX_TEMPLATE_OUTPUT_BYTES = 1024 * 1024;

const MAX_TEMPLATE_BYTES = 64 * 1024;
/**
 * Deepest nesting of `(...)` and `{{if}}` in a template: parsing and running recurse once
 * per level. Real templates nest two or three levels.
 */
const MAX_TEMPLATE_DEPTH = 64;

/** Parses `src`; throws {@link TemplateSyntaxError}. A template without actions costs nothing to run. */
export function compileTemplate(src: string, options: TemplateOptions = {}): Template {
  if (src.length > MAX_TEMPLATE_BYTES) throw new TemplateSyntaxError("template too large");
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_TEMPLATE_OUTPUT_BYTES;
  const nodes = parseTemplate(src);
  if (nodes.length === 0) return () => "";
  const only = nodes[0]!;
  if (nodes.length === 1 && only.t === "text") {
    const s = only.s;
    return () => s;
  }
  return (input) => {
    const c: Ctx = { input, maxBytes };
    let out = "";
    const add = (piece: string): void => {
      fits(c, out.length + piece.length);
      out += piece;
    };
    const run = (list: Node[]): void => {
      for (const node of list) {
        if (node.t === "text") add(node.s);
        else if (node.t === "out") add(show(evalPipeline(node.p, c)));
        else {
          const hit = node.branches.find((b) => truthy(evalPipeline(b.cond, c)));
          run(hit === undefined ? node.otherwise : hit.body);
        }
      }
    };
    run(nodes);
    return out;
  };
}

/** Names of the labels a template reads (`.name`), for callers that need to know. */
export function templateFields(src: string): string[] {
  const out = new Set<string>();
  for (const m of src.matchAll(/\.([A-Za-z_][A-Za-z0-9_]*)/g)) out.add(m[1]!);
  return [...out];
}

// ---------------------------------------------------------------------------------------
// Parsing

interface Action {
  body: string;
  at: number;
}

function parseTemplate(src: string): Node[] {
  // Split into text and actions, applying `{{-` / `-}}` trimming.
  const parts: (string | Action)[] = [];
  let i = 0;
  while (i < src.length) {
    const open = src.indexOf("{{", i);
    if (open < 0) {
      parts.push(src.slice(i));
      break;
    }
    let text = src.slice(i, open);
    let j = open + 2;
    if (src[j] === "-" && /\s/.test(src[j + 1] ?? "")) {
      text = text.trimEnd();
      j += 2;
    }
    parts.push(text);
    // Find the closing braces outside string literals.
    let k = j;
    let quote = "";
    while (k < src.length) {
      const ch = src[k]!;
      if (quote !== "") {
        if (ch === "\\" && quote === '"') k++;
        else if (ch === quote) quote = "";
      } else if (ch === '"' || ch === "`") quote = ch;
      else if (src.startsWith("}}", k)) break;
      k++;
    }
    if (k >= src.length) throw new TemplateSyntaxError("template: unclosed action");
    let body = src.slice(j, k);
    let next = k + 2;
    if (/\s-$/.test(body)) {
      body = body.slice(0, -2);
      while (next < src.length && /\s/.test(src[next]!)) next++;
    }
    parts.push({ body, at: j });
    i = next;
  }

  let pos = 0;
  let depth = 0;
  const parseList = (endOn: Set<string>): { nodes: Node[]; end: string; endArg: string } => {
    const nodes: Node[] = [];
    while (pos < parts.length) {
      const part = parts[pos++]!;
      if (typeof part === "string") {
        if (part !== "") nodes.push({ t: "text", s: part });
        continue;
      }
      const body = part.body.trim();
      if (body.startsWith("/*")) {
        if (!body.endsWith("*/")) throw new TemplateSyntaxError("template: unclosed comment");
        continue;
      }
      const word = /^[a-z]+\b/.exec(body)?.[0] ?? "";
      if (word === "if") {
        if (++depth > MAX_TEMPLATE_DEPTH) throw nestedTooDeep();
        nodes.push(parseIf(body.slice(2)));
        depth--;
        continue;
      }
      if (word === "else" || word === "end") {
        if (!endOn.has(word)) throw new TemplateSyntaxError(`template: unexpected {{${word}}}`);
        return { nodes, end: word, endArg: body.slice(word.length).trim() };
      }
      if (["range", "with", "define", "template", "block", "break", "continue"].includes(word)) {
        throw new TemplateSyntaxError(`template: action {{${word}}} is not supported`);
      }
      nodes.push({ t: "out", p: parsePipeline(body) });
    }
    if (endOn.size > 0) throw new TemplateSyntaxError("template: unexpected EOF");
    return { nodes, end: "", endArg: "" };
  };
  const parseIf = (condSrc: string): Node => {
    const branches: { cond: Pipeline; body: Node[] }[] = [];
    let cond = parsePipeline(condSrc);
    for (;;) {
      const r = parseList(new Set(["else", "end"]));
      branches.push({ cond, body: r.nodes });
      if (r.end === "end") return { t: "if", branches, otherwise: [] };
      if (r.endArg.startsWith("if")) {
        cond = parsePipeline(r.endArg.slice(2));
        continue;
      }
      if (r.endArg !== "") throw new TemplateSyntaxError("template: unexpected tokens after else");
      const rest = parseList(new Set(["end"]));
      return { t: "if", branches, otherwise: rest.nodes };
    }
  };
  return parseList(new Set()).nodes;
}

function nestedTooDeep(): TemplateSyntaxError {
  return new TemplateSyntaxError(`template: nested deeper than ${MAX_TEMPLATE_DEPTH} levels`);
}

function parsePipeline(src: string): Pipeline {
  let i = 0;
  let depth = 0;
  const s = src;
  const ws = (): void => {
    while (i < s.length && /\s/.test(s[i]!)) i++;
  };
  const parsePipe = (closing: boolean): Pipeline => {
    const cmds: Pipeline = [];
    let cmd: Command = [];
    for (;;) {
      ws();
      if (i >= s.length) {
        if (closing) throw new TemplateSyntaxError("template: unclosed left paren");
        break;
      }
      const ch = s[i]!;
      if (ch === ")") {
        if (!closing) throw new TemplateSyntaxError("template: unexpected right paren");
        i++;
        break;
      }
      if (ch === "|") {
        if (cmd.length === 0) throw new TemplateSyntaxError("template: missing command");
        cmds.push(cmd);
        cmd = [];
        i++;
        continue;
      }
      if (ch === "(") {
        i++;
        if (++depth > MAX_TEMPLATE_DEPTH) throw nestedTooDeep();
        cmd.push({ t: "sub", p: parsePipe(true) });
        depth--;
        continue;
      }
      if (ch === '"') {
        let j = i + 1;
        let out = "";
        while (j < s.length && s[j] !== '"') {
          if (s[j] === "\\") {
            const e = s[j + 1];
            out += e === "n" ? "\n" : e === "t" ? "\t" : e === "r" ? "\r" : (e ?? "");
            j += 2;
          } else out += s.charAt(j++);
        }
        if (j >= s.length) throw new TemplateSyntaxError("template: unterminated quoted string");
        i = j + 1;
        cmd.push({ t: "lit", v: out });
        continue;
      }
      if (ch === "`") {
        const j = s.indexOf("`", i + 1);
        if (j < 0) throw new TemplateSyntaxError("template: unterminated raw quoted string");
        cmd.push({ t: "lit", v: s.slice(i + 1, j) });
        i = j + 1;
        continue;
      }
      const num = /^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)/.exec(s.slice(i));
      if (num !== null) {
        cmd.push({ t: "lit", v: Number(num[0]) });
        i += num[0].length;
        continue;
      }
      if (ch === ".") {
        const m = /^\.([A-Za-z_][A-Za-z0-9_]*)?/.exec(s.slice(i))!;
        i += m[0].length;
        if (s[i] === ".")
          throw new TemplateSyntaxError("template: nested fields are not supported");
        cmd.push(m[1] === undefined ? { t: "dot" } : { t: "field", name: m[1] });
        continue;
      }
      const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(i));
      if (id !== null) {
        const name = id[0];
        i += name.length;
        if (name === "true" || name === "false") cmd.push({ t: "lit", v: name === "true" });
        else if (name === "nil") cmd.push({ t: "lit", v: null });
        else {
          if (!(name in FUNCS)) throw new TemplateSyntaxError(`function "${name}" not defined`);
          cmd.push({ t: "fn", name });
        }
        continue;
      }
      throw new TemplateSyntaxError(`template: unexpected ${JSON.stringify(ch)} in command`);
    }
    if (cmd.length > 0) cmds.push(cmd);
    if (cmds.length === 0) throw new TemplateSyntaxError("template: missing value for command");
    for (const c of cmds) {
      if (c[0]!.t !== "fn" && c.length > 1) {
        throw new TemplateSyntaxError("template: can't give argument to non-function");
      }
    }
    for (const c of cmds.slice(1)) {
      if (c[0]!.t !== "fn")
        throw new TemplateSyntaxError("template: non executable command in pipeline stage");
    }
    return cmds;
  };
  return parsePipe(false);
}

// ---------------------------------------------------------------------------------------
// Running

function evalPipeline(p: Pipeline, c: Ctx): Value {
  let prev: Value | undefined;
  for (const cmd of p) {
    const head = cmd[0]!;
    if (head.t === "fn") {
      const args = cmd.slice(1).map((a) => evalArg(a, c));
      if (prev !== undefined) args.push(prev);
      prev = callFn(head.name, args, c);
    } else {
      prev = evalArg(head, c);
    }
  }
  return prev ?? null;
}

function evalArg(a: Arg, c: Ctx): Value {
  switch (a.t) {
    case "lit":
      return a.v;
    case "field":
      return c.input.label(a.name) ?? "";
    case "dot":
      throw new TemplateExecError("template: {{.}} is not supported, name a label");
    case "sub":
      return evalPipeline(a.p, c);
    case "fn":
      return callFn(a.name, [], c);
  }
}

function callFn(name: string, args: Value[], c: Ctx): Value {
  const f = FUNCS[name]!;
  if (f.arity >= 0 && args.length !== f.arity) {
    throw new TemplateExecError(
      `template: wrong number of args for ${name}: want ${f.arity} got ${args.length}`,
    );
  }
  const v = f.fn(args, c);
  // Functions whose result can outgrow their input by more than a small factor check
  // before allocating; the others (b64enc, urlencode, ...) are caught here, one step late.
  if (typeof v === "string") fits(c, v.length);
  return v;
}
