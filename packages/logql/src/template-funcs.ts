/**
 * The runtime of the templates of template.ts: the values a template computes with, how
 * they print and compare, and the function library (Loki's `template` functions and the
 * sprig ones it registers), each bounded by the per-line output budget before it
 * allocates where the size can be known first.
 */
import { LimitError } from "./errors.js";
import { compileRegex, RegexSyntaxError } from "./regex.js";

/** A template that failed while running on a line (Loki sets `__error__=TemplateFormatErr`). */
export class TemplateExecError extends Error {
  override readonly name = "TemplateExecError";
}

/** What a template reads: labels by name, the line and its timestamp. */
export interface TemplateInput {
  label(name: string): string | undefined;
  line: string;
  timestampNs: bigint;
}

/** A time value (`now`, `toDate`, `unixToTime`, ...). */
export interface Time {
  ns: bigint;
}
export type Value = string | number | boolean | Time | null;

/** What the functions of a running template see. */
export interface Ctx {
  input: TemplateInput;
  maxBytes: number;
}

/** Throws the limit error unless a string of `size` code units fits in the budget. */
export function fits(c: Ctx, size: number): void {
  if (size > c.maxBytes) {
    throw new LimitError(
      `template output would exceed the limit of ${c.maxBytes} bytes per line (maxLineBytes)`,
    );
  }
}

export function isTime(v: Value): v is Time {
  return typeof v === "object" && v !== null;
}

export function show(v: Value): string {
  if (v === null) return "<no value>";
  if (isTime(v)) {
    const d = new Date(Number(v.ns / 1_000_000n));
    if (Number.isNaN(d.getTime())) throw new TemplateExecError("template: time out of range");
    return d.toISOString();
  }
  return String(v);
}

export function truthy(v: Value): boolean {
  if (v === null) return false;
  if (typeof v === "string") return v.length > 0;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "boolean") return v;
  return true;
}

const str = (v: Value | undefined): string => (v === undefined ? "" : show(v));
function num(v: Value | undefined): number {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v === null || v === undefined || v === "") return 0;
  if (isTime(v)) return Number(v.ns);
  const n = Number(v);
  if (Number.isNaN(n))
    throw new TemplateExecError(`template: cannot convert ${JSON.stringify(v)} to a number`);
  return n;
}
const int = (v: Value | undefined): number => Math.trunc(num(v));
function compare(a: Value | undefined, b: Value | undefined): number {
  if (typeof a === "number" || typeof b === "number") return num(a) - num(b);
  const x = str(a);
  const y = str(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
function time(v: Value | undefined): Time {
  if (v !== undefined && isTime(v)) return v;
  throw new TemplateExecError("template: expected a time");
}

export interface Fn {
  arity: number;
  fn: (a: Value[], c: Ctx) => Value;
}
const f = (arity: number, fn: (a: Value[], c: Ctx) => Value): Fn => ({ arity, fn });
const s1 = (g: (s: string) => Value): Fn => f(1, (a) => g(str(a[0])));

/** A regex from a template argument: a bad one is the line's error, as a bad value is. */
function runtimeRegex(pattern: string): ReturnType<typeof compileRegex> {
  try {
    return compileRegex(pattern, false, true);
  } catch (e) {
    if (e instanceof RegexSyntaxError) throw new TemplateExecError(`template: ${e.message}`);
    throw e;
  }
}

/** Go's `%c`: an invalid code point prints as U+FFFD. */
function rune(n: number): string {
  return n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : "\ufffd";
}

function printf(format: string, args: Value[], c: Ctx): string {
  let k = 0;
  let total = format.length;
  return format.replace(
    /%([-+ 0#]*)(\d*)(?:\.(\d+))?([sdvfqxXtegc%])/g,
    (_m, flags: string, width: string, prec: string | undefined, verb: string) => {
      if (verb === "%") return "%";
      const v = args[k++];
      let out: string;
      switch (verb) {
        case "d":
          out = String(int(v));
          break;
        case "f":
        case "e":
        case "g":
          if (verb === "f" && prec !== undefined && Number(prec) > 100) {
            throw new TemplateExecError("template: printf precision out of range");
          }
          out =
            verb === "f" ? num(v).toFixed(prec === undefined ? 6 : Number(prec)) : String(num(v));
          break;
        case "q":
          out = JSON.stringify(str(v));
          break;
        case "x":
        case "X":
          out =
            typeof v === "number"
              ? Math.trunc(v).toString(16)
              : Buffer.from(str(v)).toString("hex");
          if (verb === "X") out = out.toUpperCase();
          break;
        case "c":
          out = rune(int(v));
          break;
        default:
          out = v === undefined ? "%!" + verb + "(MISSING)" : str(v);
          if (prec !== undefined && verb === "s") out = out.slice(0, Number(prec));
      }
      const w = width === "" ? 0 : Number(width);
      total += Math.max(w, out.length);
      fits(c, total);
      if (out.length < w)
        out = flags.includes("-")
          ? out.padEnd(w)
          : out.padStart(w, flags.includes("0") ? "0" : " ");
      return out;
    },
  );
}

/** Loki's template functions that Sieve supports. Anything else fails at parse time. */
export const FUNCS: Record<string, Fn> = {
  __line__: f(0, (_a, c) => c.input.line),
  __timestamp__: f(0, (_a, c) => ({ ns: c.input.timestampNs })),
  ToLower: s1((s) => s.toLowerCase()),
  ToUpper: s1((s) => s.toUpperCase()),
  lower: s1((s) => s.toLowerCase()),
  upper: s1((s) => s.toUpperCase()),
  title: s1((s) => s.replace(/\b\w/g, (c) => c.toUpperCase())),
  Title: s1((s) => s.replace(/\b\w/g, (c) => c.toUpperCase())),
  TrimSpace: s1((s) => s.trim()),
  trim: s1((s) => s.trim()),
  trimAll: f(2, (a) => trimChars(str(a[1]), str(a[0]))),
  trimPrefix: f(2, (a) =>
    str(a[1]).startsWith(str(a[0])) ? str(a[1]).slice(str(a[0]).length) : str(a[1]),
  ),
  trimSuffix: f(2, (a) =>
    str(a[0]) !== "" && str(a[1]).endsWith(str(a[0]))
      ? str(a[1]).slice(0, -str(a[0]).length)
      : str(a[1]),
  ),
  TrimPrefix: f(2, (a) =>
    str(a[0]).startsWith(str(a[1])) ? str(a[0]).slice(str(a[1]).length) : str(a[0]),
  ),
  TrimSuffix: f(2, (a) =>
    str(a[1]) !== "" && str(a[0]).endsWith(str(a[1]))
      ? str(a[0]).slice(0, -str(a[1]).length)
      : str(a[0]),
  ),
  replace: f(3, (a, c) => replaceN(str(a[2]), str(a[0]), str(a[1]), -1, c)),
  Replace: f(4, (a, c) => replaceN(str(a[0]), str(a[1]), str(a[2]), int(a[3]), c)),
  trunc: f(2, (a) => {
    const n = int(a[0]);
    const s = str(a[1]);
    return n >= 0 ? s.slice(0, n) : s.slice(Math.max(0, s.length + n));
  }),
  substr: f(3, (a) => {
    const s = str(a[2]);
    const start = int(a[0]);
    const end = int(a[1]);
    if (start < 0) return s.slice(0, end);
    if (end < 0 || end > s.length) return s.slice(start);
    return s.slice(start, end);
  }),
  contains: f(2, (a) => str(a[1]).includes(str(a[0]))),
  hasPrefix: f(2, (a) => str(a[1]).startsWith(str(a[0]))),
  hasSuffix: f(2, (a) => str(a[1]).endsWith(str(a[0]))),
  indent: f(2, (a, c) => indent(int(a[0]), str(a[1]), c)),
  nindent: f(2, (a, c) => "\n" + indent(int(a[0]), str(a[1]), c)),
  repeat: f(2, (a, c) => {
    const n = int(a[0]);
    const s = str(a[1]);
    if (n < 0) throw new TemplateExecError("template: repeat count out of range");
    fits(c, n * s.length);
    return s.repeat(n);
  }),
  default: f(2, (a) => (truthy(a[1]!) ? a[1]! : a[0]!)),
  regexReplaceAll: f(3, (a, c) => {
    // Go's $1 / ${name} expansion; RE2's replace speaks $1 and $<name>.
    const repl = str(a[2]).replace(/\$\{(\w+)\}/g, (_m, g: string) =>
      /^\d+$/.test(g) ? `$${g}` : `$<${g}>`,
    );
    return replaceRegex(str(a[1]), runtimeRegex(str(a[0])), (m) => expand(repl, m), c);
  }),
  regexReplaceAllLiteral: f(3, (a, c) => {
    const lit = str(a[2]);
    return replaceRegex(str(a[1]), runtimeRegex(str(a[0])), () => lit, c);
  }),
  count: f(2, (a) => {
    const m = str(a[1]).match(runtimeRegex(str(a[0])));
    return m === null ? 0 : m.length;
  }),
  urlencode: s1((s) => encodeURIComponent(s)),
  urldecode: s1((s) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, " "));
    } catch {
      throw new TemplateExecError("template: invalid URL escape");
    }
  }),
  b64enc: s1((s) => Buffer.from(s).toString("base64")),
  b64dec: s1((s) => Buffer.from(s, "base64").toString()),
  alignLeft: f(2, (a, c) => {
    const n = int(a[0]);
    const s = str(a[1]);
    if (s.length >= n) return s.slice(0, Math.max(0, n));
    fits(c, n);
    return s.padEnd(n);
  }),
  alignRight: f(2, (a, c) => {
    const n = int(a[0]);
    const s = str(a[1]);
    if (s.length >= n) return s.slice(s.length - Math.max(0, n));
    fits(c, n);
    return s.padStart(n);
  }),
  add: f(2, (a) => int(a[0]) + int(a[1])),
  sub: f(2, (a) => int(a[0]) - int(a[1])),
  mul: f(2, (a) => int(a[0]) * int(a[1])),
  div: f(2, (a) => {
    if (int(a[1]) === 0) throw new TemplateExecError("template: integer divide by zero");
    return Math.trunc(int(a[0]) / int(a[1]));
  }),
  mod: f(2, (a) => {
    if (int(a[1]) === 0) throw new TemplateExecError("template: integer divide by zero");
    return int(a[0]) % int(a[1]);
  }),
  addf: f(2, (a) => num(a[0]) + num(a[1])),
  subf: f(2, (a) => num(a[0]) - num(a[1])),
  mulf: f(2, (a) => num(a[0]) * num(a[1])),
  divf: f(2, (a) => num(a[0]) / num(a[1])),
  max: f(-1, (a) => Math.max(...a.map(int))),
  min: f(-1, (a) => Math.min(...a.map(int))),
  maxf: f(-1, (a) => Math.max(...a.map(num))),
  minf: f(-1, (a) => Math.min(...a.map(num))),
  ceil: f(1, (a) => Math.ceil(num(a[0]))),
  floor: f(1, (a) => Math.floor(num(a[0]))),
  round: f(-1, (a) => {
    const p = a.length > 1 ? int(a[1]) : 0;
    return Math.round(num(a[0]) * 10 ** p) / 10 ** p;
  }),
  int: f(1, (a) => int(a[0])),
  float64: f(1, (a) => num(a[0])),
  len: f(1, (a) => str(a[0]).length),
  printf: f(-1, (a, c) => printf(str(a[0]), a.slice(1), c)),
  eq: f(-1, (a) => a.slice(1).some((b) => compare(a[0], b) === 0)),
  ne: f(2, (a) => compare(a[0], a[1]) !== 0),
  lt: f(2, (a) => compare(a[0], a[1]) < 0),
  le: f(2, (a) => compare(a[0], a[1]) <= 0),
  gt: f(2, (a) => compare(a[0], a[1]) > 0),
  ge: f(2, (a) => compare(a[0], a[1]) >= 0),
  and: f(-1, (a) => a.find((v) => !truthy(v)) ?? a[a.length - 1] ?? null),
  or: f(-1, (a) => a.find((v) => truthy(v)) ?? a[a.length - 1] ?? null),
  not: f(1, (a) => !truthy(a[0]!)),
  unixEpoch: f(1, (a) => Number(time(a[0]).ns / 1_000_000_000n)),
  unixEpochMillis: f(1, (a) => Number(time(a[0]).ns / 1_000_000n)),
  unixEpochNanos: f(1, (a) => Number(time(a[0]).ns)),
  unixToTime: f(1, (a) => {
    const s = str(a[0]);
    if (!/^\d+$/.test(s))
      throw new TemplateExecError(`template: unable to parse ${JSON.stringify(s)} as a unix time`);
    // Loki guesses the unit from the number of digits: s, ms, us or ns.
    const v = BigInt(s);
    const ns =
      s.length <= 10
        ? v * 1_000_000_000n
        : s.length <= 13
          ? v * 1_000_000n
          : s.length <= 16
            ? v * 1_000n
            : v;
    return { ns };
  }),
};

function indent(n: number, s: string, c: Ctx): string {
  const pad = " ".repeat(Math.max(0, Math.min(n, 1024)));
  let lines = 1;
  for (let i = s.indexOf("\n"); i >= 0; i = s.indexOf("\n", i + 1)) lines++;
  fits(c, s.length + lines * pad.length);
  return pad + s.replace(/\n/g, "\n" + pad);
}

/**
 * Go's `strings.Replace(s, old, new, n)` (n < 0: all), sized before it is built. An empty
 * `old` matches at every position, as `split("")` does.
 */
function replaceN(s: string, old: string, repl: string, n: number, c: Ctx): string {
  if (n === 0) return s;
  const parts = s.split(old);
  const hits = n < 0 ? parts.length - 1 : Math.min(n, parts.length - 1);
  fits(c, s.length + hits * (repl.length - old.length));
  if (hits === parts.length - 1) return parts.join(repl);
  return parts.slice(0, hits + 1).join(repl) + old + parts.slice(hits + 1).join(old);
}

/** `s.replace(re, each)` for a global regex, stopping as soon as the result would not fit. */
function replaceRegex(
  s: string,
  re: ReturnType<typeof compileRegex>,
  each: (m: unknown[]) => string,
  c: Ctx,
): string {
  let size = s.length;
  return s.replace(re, (...m: unknown[]) => {
    const piece = each(m);
    size += piece.length - (m[0] as string).length;
    fits(c, size);
    return piece;
  });
}

/**
 * Expands a JS replacement pattern (`$$`, `$&`, `` $` ``, `$'`, `$1`..`$99`, `$<name>`) for
 * one match, given the arguments `String.prototype.replace` passes to a function.
 */
function expand(repl: string, m: unknown[]): string {
  if (!repl.includes("$")) return repl;
  const last = m[m.length - 1];
  const named =
    typeof last === "object" && last !== null ? (last as Record<string, string>) : undefined;
  const nGroups = m.length - (named === undefined ? 3 : 4);
  const whole = m[m.length - (named === undefined ? 1 : 2)] as string;
  const offset = m[m.length - (named === undefined ? 2 : 3)] as number;
  const match = m[0] as string;
  return repl.replace(
    /\$(\$|&|`|'|\d{1,2}|<([^>]*)>)/g,
    (tok: string, what: string, name?: string) => {
      if (what === "$") return "$";
      if (what === "&") return match;
      if (what === "`") return whole.slice(0, offset);
      if (what === "'") return whole.slice(offset + match.length);
      if (name !== undefined) return named === undefined ? tok : (named[name] ?? "");
      let g = Number(what);
      if (g > nGroups && what.length === 2) {
        g = Number(what[0]);
        if (g >= 1 && g <= nGroups) return ((m[g] as string | undefined) ?? "") + what[1]!;
        return tok;
      }
      if (g < 1 || g > nGroups) return tok;
      return (m[g] as string | undefined) ?? "";
    },
  );
}

function trimChars(s: string, cut: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && cut.includes(s[a]!)) a++;
  while (b > a && cut.includes(s[b - 1]!)) b--;
  return s.slice(a, b);
}
