/**
 * The LogQL lexer. Tokens carry their 1-based line and column so that the parser can word
 * errors as Loki does. Keywords are not reserved here: the parser reads identifiers in
 * context, as Loki's lexer does for function names, so `{rate="x"}` stays a label.
 */
import { ParseError } from "./errors.js";
import { parseBytes, parseDuration } from "./units.js";

/** A token's class. `op` covers punctuation and operators; `text` says which. */
export type TokenType =
  "ident" | "string" | "number" | "duration" | "bytes" | "flag" | "op" | "eof";

/** One token. `value` is the unquoted string, the number, or nanoseconds / bytes. */
export interface Token {
  type: TokenType;
  text: string;
  str: string;
  num: number;
  offset: number;
  line: number;
  col: number;
}

// Longest first, so that `!=` wins over `!` and `|=` over `|`.
const OPERATORS = [
  "|=",
  "|~",
  "|>",
  "!=",
  "!~",
  "!>",
  "=~",
  "==",
  ">=",
  "<=",
  "{",
  "}",
  "(",
  ")",
  "[",
  "]",
  ",",
  "|",
  "=",
  ">",
  "<",
  "+",
  "-",
  "*",
  "/",
  "%",
  "^",
];

/** How a token is named in `unexpected X` messages (Loki names value tokens by class). */
export function describeToken(t: Token): string {
  switch (t.type) {
    case "ident":
      return "IDENTIFIER";
    case "string":
      return "STRING";
    case "number":
      return "NUMBER";
    case "duration":
      return "DURATION";
    case "bytes":
      return "BYTES";
    case "flag":
      return "FUNCTION_FLAG";
    case "eof":
      return "$end";
    case "op":
      return t.text;
  }
}

const isIdentStart = (c: number): boolean =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95;
const isIdentPart = (c: number): boolean => isIdentStart(c) || (c >= 48 && c <= 57);
const isDigit = (c: number): boolean => c >= 48 && c <= 57;

/** Splits a query into tokens; throws {@link ParseError} on a character no token can start with. */
export function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  let line = 1;
  let lineStart = 0;
  const n = src.length;
  const fail = (reason: string, at: number): never => {
    throw new ParseError(reason, line, at - lineStart + 1);
  };
  const push = (type: TokenType, start: number, str = "", num = 0): void => {
    tokens.push({
      type,
      text: src.slice(start, i),
      str,
      num,
      offset: start,
      line,
      col: start - lineStart + 1,
    });
  };
  while (i < n) {
    const c = src.charCodeAt(i);
    if (c === 10) {
      i++;
      line++;
      lineStart = i;
      continue;
    }
    if (c === 32 || c === 9 || c === 13) {
      i++;
      continue;
    }
    if (c === 35 /* # comment to end of line */) {
      while (i < n && src.charCodeAt(i) !== 10) i++;
      continue;
    }
    const start = i;
    if (c === 34 /* " */) {
      const str = readQuoted(src, i, (reason, at) => fail(reason, at));
      i = str.end;
      push("string", start, str.value);
      continue;
    }
    if (c === 96 /* ` */) {
      const end = src.indexOf("`", i + 1);
      if (end < 0) fail("literal not terminated", start);
      const value = src.slice(i + 1, end);
      i = end + 1;
      push("string", start, value);
      // A raw string may span lines; keep positions right after it.
      for (let k = start; k < end; k++) {
        if (src.charCodeAt(k) === 10) {
          line++;
          lineStart = k + 1;
        }
      }
      continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(src.charCodeAt(i + 1)))) {
      lexNumber(start);
      continue;
    }
    if (isIdentStart(c)) {
      while (i < n && isIdentPart(src.charCodeAt(i))) i++;
      push("ident", start, src.slice(start, i));
      continue;
    }
    if (c === 45 && src.charCodeAt(i + 1) === 45 && isIdentStart(src.charCodeAt(i + 2))) {
      i += 2;
      while (i < n && (isIdentPart(src.charCodeAt(i)) || src.charCodeAt(i) === 45)) i++;
      push("flag", start, src.slice(start, i));
      continue;
    }
    let matched = false;
    for (const op of OPERATORS) {
      if (src.startsWith(op, i)) {
        i += op.length;
        push("op", start, op);
        matched = true;
        break;
      }
    }
    if (!matched) {
      const ch = String.fromCodePoint(src.codePointAt(i)!);
      fail(`syntax error: unexpected character ${JSON.stringify(ch)}`, start);
    }
  }
  tokens.push({ type: "eof", text: "", str: "", num: 0, offset: n, line, col: n - lineStart + 1 });
  return tokens;

  function lexNumber(start: number): void {
    if (src.charCodeAt(i) === 48 && (src[i + 1] === "x" || src[i + 1] === "X")) {
      i += 2;
      while (i < n && /[0-9a-fA-F]/.test(src[i]!)) i++;
      const v = Number.parseInt(src.slice(start + 2, i), 16);
      if (i === start + 2 || !Number.isFinite(v)) fail("syntax error: invalid number", start);
      push("number", start, src.slice(start, i), v);
      return;
    }
    while (i < n && isDigit(src.charCodeAt(i))) i++;
    if (src[i] === "." && isDigit(src.charCodeAt(i + 1))) {
      i++;
      while (i < n && isDigit(src.charCodeAt(i))) i++;
    } else if (src[i] === "." && !isIdentStart(src.charCodeAt(i + 1))) {
      i++;
    }
    // An exponent only when digits follow; otherwise `e` may start a unit (none does today).
    if (
      (src[i] === "e" || src[i] === "E") &&
      (isDigit(src.charCodeAt(i + 1)) ||
        ((src[i + 1] === "+" || src[i + 1] === "-") && isDigit(src.charCodeAt(i + 2))))
    ) {
      i += 2;
      while (i < n && isDigit(src.charCodeAt(i))) i++;
    }
    const numEnd = i;
    // A unit suffix makes a duration (`5m`, `1h30m`) or a size (`20MB`).
    while (i < n && (isIdentPart(src.charCodeAt(i)) || src[i] === "." || src[i] === "µ")) i++;
    const text = src.slice(start, i);
    if (i === numEnd) {
      const v = Number(text);
      if (!Number.isFinite(v)) fail(`syntax error: invalid number ${text}`, start);
      push("number", start, text, v);
      return;
    }
    const d = parseDuration(text);
    if (d !== undefined) {
      push("duration", start, text, d);
      return;
    }
    const b = parseBytes(text);
    if (b !== undefined) {
      push("bytes", start, text, b);
      return;
    }
    fail(`syntax error: invalid duration or size ${JSON.stringify(text)}`, start);
  }
}

/**
 * Reads a double-quoted Go string starting at `start` (the quote) and unescapes it as
 * `strconv.Unquote` does: `\a \b \f \n \r \t \v \\ \"`, `\xHH`, `\ooo`, `\uHHHH`, `\UHHHHHHHH`.
 */
export function readQuoted(
  src: string,
  start: number,
  fail: (reason: string, at: number) => never,
): { value: string; end: number } {
  let i = start + 1;
  let out = "";
  let chunk = i;
  const n = src.length;
  for (;;) {
    if (i >= n) fail("literal not terminated", start);
    const c = src.charCodeAt(i);
    if (c === 34) {
      out += src.slice(chunk, i);
      return { value: out, end: i + 1 };
    }
    if (c === 10) fail("literal not terminated", start);
    if (c !== 92) {
      i++;
      continue;
    }
    out += src.slice(chunk, i);
    const e = src[i + 1];
    i += 2;
    switch (e ?? "") {
      case "a":
        out += "\x07";
        break;
      case "b":
        out += "\b";
        break;
      case "f":
        out += "\f";
        break;
      case "n":
        out += "\n";
        break;
      case "r":
        out += "\r";
        break;
      case "t":
        out += "\t";
        break;
      case "v":
        out += "\v";
        break;
      case "\\":
        out += "\\";
        break;
      case '"':
        out += '"';
        break;
      case "x":
      case "u":
      case "U": {
        const len = e === "x" ? 2 : e === "u" ? 4 : 8;
        const hex = src.slice(i, i + len);
        if (hex.length !== len || !/^[0-9a-fA-F]+$/.test(hex)) {
          fail("invalid syntax: bad escape in string", i - 2);
        }
        const cp = Number.parseInt(hex, 16);
        if (cp > 0x10ffff || (e !== "x" && cp >= 0xd800 && cp <= 0xdfff)) {
          fail("invalid syntax: escape out of range", i - 2);
        }
        // \xHH is a byte in Go; a lone byte above 0x7f is not valid UTF-8 text either way.
        out += String.fromCodePoint(cp);
        i += len;
        break;
      }
      default: {
        if (e !== undefined && e >= "0" && e <= "7") {
          const oct = src.slice(i - 1, i + 2);
          if (!/^[0-7]{3}$/.test(oct) || Number.parseInt(oct, 8) > 255) {
            fail("invalid syntax: bad octal escape in string", i - 2);
          }
          out += String.fromCharCode(Number.parseInt(oct, 8));
          i += 2;
          break;
        }
        fail(`invalid syntax: unknown escape sequence \\${e ?? ""}`, i - 2);
      }
    }
    chunk = i;
  }
}
