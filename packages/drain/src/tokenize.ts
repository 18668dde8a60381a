/**
 * Lines into tokens, and tokens back into a pattern, as Loki's pattern ingester splits them
 * (`pkg/pattern/drain/line_tokenizer.go`), by the stream's format:
 *
 * - `plain`: punctuation. Letters, digits and `_ - . : /` make up a token; `=` and every
 *   Unicode punctuation mark is a token of its own; spaces separate tokens and are kept as
 *   counts (`gaps`), so joining the tokens gives back the line exactly.
 * - `logfmt`: one token for each key and each value (`level`, `info`, `msg`, `hello world`);
 *   the values of time and trace keys (`ts`, `t`, `time`, `timestamp`, `traceID`) are the
 *   placeholder from the start. Joined back as logfmt.
 * - `json`: the first string field among {@link JSON_MESSAGE_FIELDS}, tokenized as `plain`,
 *   joined between two placeholders (the rest of the object).
 *
 * Written by hand: no package tokenizes lines the way Loki's patterns need (the result must
 * be Loki's patterns, byte for byte, so Grafana's Logs Drilldown filters by them alike).
 */

/** What stands for a variable part of a line in a pattern (Loki's `<_>`). */
export const PLACEHOLDER = "<_>";

/** The three ways a stream's lines are tokenized. */
export type LogFormat = "plain" | "logfmt" | "json";

/**
 * Top-level JSON fields holding the message, in the order they are looked for (Loki's
 * `tokenizable_json_fields_default`).
 */
export const JSON_MESSAGE_FIELDS = ["log", "message", "msg", "msg_", "_msg", "content"] as const;

/** logfmt keys whose values always vary: their value is the placeholder (Loki's list). */
function variableKey(key: string): boolean {
  switch (key.length) {
    case 1:
      return key === "t";
    case 2:
      return key.toLowerCase() === "ts";
    case 4:
      return key.toLowerCase() === "time";
    case 7:
      return key.toLowerCase() === "traceid";
    case 9:
      return key.toLowerCase() === "timestamp";
    default:
      return false;
  }
}

// `key=value` pairs separated by single spaces, values bare or double-quoted (with escapes).
const LOGFMT_LINE =
  /^\w+=(?:"(?:[^"\\]|\\.)*"|[^\s"]\S*|)(?: \w+=(?:"(?:[^"\\]|\\.)*"|[^\s"]\S*|))*$/;

/**
 * A stream's format, guessed from one line as Loki guesses it from a stream's first line:
 * an object is `json`, `key=value` pairs are `logfmt`, anything else `plain`.
 */
export function detectFormat(line: string): LogFormat {
  const trimmed = line.trim();
  if (trimmed.startsWith("{") && trimmed.endsWith("}")) return "json";
  if (LOGFMT_LINE.test(trimmed)) return "logfmt";
  return "plain";
}

/**
 * Character classes of the punctuation tokenizer for ASCII: 0 part of a token, 1 a space,
 * 2 a token of its own. Go's `unicode.IsPunct` for ASCII is `!"#%&'()*,-./:;?@[\]_{}`; of
 * those `_ - . : /` stay inside tokens (paths, hosts, times), and `=` is split too.
 */
const ASCII_CLASS = (() => {
  const table = new Uint8Array(128);
  for (const c of `!"#%&'()*,;?@[\\]{}=`) table[c.charCodeAt(0)] = 2;
  table[32] = 1;
  return table;
})();

const PUNCTUATION = /^\p{P}$/u;

function charClass(code: number, line: string, i: number): number {
  if (code < 128) return ASCII_CLASS[code]!;
  // Surrogates (astral code points: emoji, rare scripts) stay inside tokens.
  if (code >= 0xd800 && code <= 0xdfff) return 0;
  return PUNCTUATION.test(line[i]!) ? 2 : 0;
}

/** Why a line taught nothing: shared by code and the `reason` label of the skipped-lines metric. */
export const SKIP_REASONS = {
  line_too_long: "the line is longer than maxLineLength",
  too_few_tokens: "fewer than minTokens tokens",
  too_many_tokens: "more than maxTokens tokens",
  unparsable: "not the stream's format (bad logfmt, JSON without a message field)",
  paused: "learning paused: clusters were evicted for over maxEvictionRatio of the lines",
} as const;

/** A key of {@link SKIP_REASONS}. */
export type SkipReason = keyof typeof SKIP_REASONS;

/** A line's tokens. `gaps` (plain and json only): spaces before `tokens[0]`, then after each. */
export interface Tokenized {
  readonly tokens: string[];
  readonly gaps: number[] | undefined;
}

/** Limits a tokenizer applies. */
export interface TokenizerLimits {
  /** Longer lines (UTF-16 code units) are skipped (Loki: 3000 bytes). */
  readonly maxLineLength: number;
  /** Lines with more tokens are skipped (Loki: 80). */
  readonly maxTokens: number;
}

/**
 * Tokenizes lines of one format into scratch arrays it reuses: the result is valid until
 * the next call (copy what is kept; see `Drain`).
 */
export class Tokenizer {
  private readonly tokens: string[] = [];
  private readonly gaps: number[] = [];

  constructor(
    readonly format: LogFormat,
    private readonly limits: TokenizerLimits,
  ) {}

  /** The line's tokens, or why it has none worth learning. */
  tokenize(line: string): Tokenized | SkipReason {
    if (line.length > this.limits.maxLineLength) return "line_too_long";
    switch (this.format) {
      case "plain":
        return this.punctuation(line);
      case "logfmt":
        return this.logfmt(line);
      case "json": {
        const message = jsonMessage(line);
        return message === undefined ? "unparsable" : this.punctuation(message);
      }
    }
  }

  /** The pattern of `tokens` (with placeholders), runs of placeholders made one. */
  join(tokens: readonly string[], gaps: readonly number[] | undefined): string {
    let out: string;
    switch (this.format) {
      case "plain":
        out = joinPunctuation(tokens, gaps);
        break;
      case "json":
        out = PLACEHOLDER + joinPunctuation(tokens, gaps) + PLACEHOLDER;
        break;
      case "logfmt":
        out = joinLogfmt(tokens);
        break;
    }
    return out.includes(PLACEHOLDER + PLACEHOLDER) ? dedupePlaceholders(out) : out;
  }

  private punctuation(line: string): Tokenized | SkipReason {
    const tokens = this.tokens;
    const gaps = this.gaps;
    const max = this.limits.maxTokens;
    tokens.length = 0;
    gaps.length = 1;
    gaps[0] = 0;
    let start = 0;
    const n = line.length;
    for (let i = 0; i < n; i++) {
      const code = line.charCodeAt(i);
      const cls = charClass(code, line, i);
      if (cls === 0) continue;
      if (i > start) {
        tokens.push(line.slice(start, i));
        gaps.push(0);
      }
      if (cls === 1) {
        gaps[gaps.length - 1]!++;
      } else {
        tokens.push(line[i]!);
        gaps.push(0);
      }
      start = i + 1;
      if (tokens.length > max) return "too_many_tokens";
    }
    if (start < n) {
      tokens.push(line.slice(start));
      gaps.push(0);
    }
    if (tokens.length > max) return "too_many_tokens";
    return { tokens, gaps };
  }

  private logfmt(line: string): Tokenized | SkipReason {
    const tokens = this.tokens;
    const max = this.limits.maxTokens;
    tokens.length = 0;
    const n = line.length;
    let i = 0;
    while (i < n) {
      while (i < n && line.charCodeAt(i) <= 32) i++;
      if (i >= n) break;
      const keyStart = i;
      while (i < n) {
        const c = line.charCodeAt(i);
        if (c === 61 /* = */ || c <= 32) break;
        if (c === 34 /* " */) return "unparsable";
        i++;
      }
      const key = line.slice(keyStart, i);
      let value = "";
      if (i < n && line.charCodeAt(i) === 61) {
        i++;
        if (i < n && line.charCodeAt(i) === 34) {
          const valueStart = i;
          i++;
          let escaped = false;
          while (i < n) {
            const c = line.charCodeAt(i);
            if (c === 92 /* \ */) {
              escaped = true;
              i += 2;
              continue;
            }
            if (c === 34) break;
            i++;
          }
          if (i >= n) return "unparsable";
          i++;
          value = escaped ? unquote(line.slice(valueStart, i)) : line.slice(valueStart + 1, i - 1);
        } else {
          const valueStart = i;
          while (i < n && line.charCodeAt(i) > 32) i++;
          value = line.slice(valueStart, i);
        }
      }
      if (key === "") return "unparsable";
      tokens.push(key, variableKey(key) ? PLACEHOLDER : value);
      if (tokens.length > max) return "too_many_tokens";
    }
    return { tokens, gaps: undefined };
  }
}

/** A quoted logfmt value, unescaped as JSON escapes are (what go-logfmt writes); raw if not JSON. */
function unquote(quoted: string): string {
  try {
    return JSON.parse(quoted) as string;
  } catch {
    return quoted.slice(1, -1);
  }
}

/** The message of a JSON line: its first string field of {@link JSON_MESSAGE_FIELDS}. */
function jsonMessage(line: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
  const object = parsed as Record<string, unknown>;
  for (const field of JSON_MESSAGE_FIELDS) {
    const v = object[field];
    if (typeof v === "string") return v;
  }
  return undefined;
}

function joinPunctuation(tokens: readonly string[], gaps: readonly number[] | undefined): string {
  let out = gaps === undefined || gaps[0] === 0 ? "" : " ".repeat(gaps[0]!);
  for (let i = 0; i < tokens.length; i++) {
    out += tokens[i]!;
    const g = gaps?.[i + 1] ?? 0;
    if (g === 1) out += " ";
    else if (g > 1) out += " ".repeat(g);
  }
  return out;
}

// A value go-logfmt writes quoted: empty is written bare (`k=`); spaces, `=`, `"` and
// control characters need quotes.
// eslint-disable-next-line no-control-regex -- control characters are what must be quoted
const NEEDS_QUOTES = /[\s="\\\u0000-\u001f\u007f]/;

function joinLogfmt(tokens: readonly string[]): string {
  let out = "";
  for (let i = 0; i < tokens.length; i += 2) {
    if (i > 0) out += " ";
    const value = tokens[i + 1] ?? "";
    out += tokens[i]! + "=" + (NEEDS_QUOTES.test(value) ? JSON.stringify(value) : value);
  }
  return out;
}

function dedupePlaceholders(pattern: string): string {
  let out = "";
  let i = 0;
  const p = PLACEHOLDER.length;
  while (i < pattern.length) {
    const at = pattern.indexOf(PLACEHOLDER, i);
    if (at < 0) {
      out += pattern.slice(i);
      break;
    }
    out += pattern.slice(i, at + p);
    i = at + p;
    while (pattern.startsWith(PLACEHOLDER, i)) i += p;
  }
  return out;
}
