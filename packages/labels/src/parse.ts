import { LabelsError } from "./errors.js";

/**
 * One label: a name and its value. The one `{name, value}` type of Sieve: stream labels,
 * structured metadata pairs (`@sieve/chunk`'s MetadataPair), bloom tokens' pairs
 * (`@sieve/index`) and the label pairs of the internal wire contracts (`@sieve/proto`).
 */
export interface Label {
  readonly name: string;
  readonly value: string;
}

/** Prometheus' legacy label name rule, which Loki enforces: `[a-zA-Z_][a-zA-Z0-9_]*`. */
export function isValidLabelName(name: string): boolean {
  return LABEL_NAME.test(name);
}
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Longest label set string accepted, in UTF-16 code units; keeps parsing bounded. */
export const MAX_LABELS_STRING = 1 << 20;

/**
 * Parses a label set in selector syntax, `{a="b", c="d"}`, as Loki's `syntax.ParseLabels`
 * does with Prometheus' `ParseMetric`, then returns it the way Loki normalises it: labels
 * with an empty value dropped (an empty value means "absent" in Prometheus), and sorted by
 * name (stable, so duplicate names stay, side by side, for validation to report).
 *
 * Accepted, as real clients send it: any whitespace between tokens, labels in any order, a
 * trailing comma, label names in double quotes (`{"app"="x"}`), values in double quotes
 * with Go escapes (`\n`, `\"`, `\x41`, `\101`, `\u00e9`, `\U0001F600`), in single quotes,
 * or in backticks (raw). Names must still satisfy {@link isValidLabelName}. Hand-written:
 * no npm package parses Prometheus label sets; this is a small recursive-descent scanner
 * over one string, linear in its length.
 */
export function parseLabels(input: string): Label[] {
  if (input.length > MAX_LABELS_STRING) {
    throw new LabelsError("parse_error", `label set longer than ${MAX_LABELS_STRING}`, 1);
  }
  const p = new Parser(input);
  const labels = p.labels();
  const kept = labels.filter((l) => l.value !== "");
  kept.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return kept;
}

class Parser {
  private pos = 0;

  constructor(private readonly s: string) {}

  labels(): Label[] {
    this.space();
    this.expect("{");
    const out: Label[] = [];
    this.space();
    while (this.peek() !== "}") {
      const nameAt = this.pos;
      const name = this.name();
      if (!isValidLabelName(name)) {
        throw new LabelsError("invalid_label_name", JSON.stringify(name), nameAt + 1);
      }
      this.space();
      this.expect("=");
      this.space();
      out.push({ name, value: this.string() });
      this.space();
      if (this.peek() === ",") {
        this.pos++;
        this.space();
      } else if (this.peek() !== "}") {
        this.fail(`unexpected ${this.describe()} in label set, expected "," or "}"`);
      }
    }
    this.pos++;
    this.space();
    if (this.pos < this.s.length) this.fail(`unexpected ${this.describe()} after label set`);
    return out;
  }

  private name(): string {
    const c = this.peek();
    if (c === '"' || c === "'" || c === "`") return this.string();
    const start = this.pos;
    while (this.pos < this.s.length && /[a-zA-Z0-9_]/.test(this.s[this.pos]!)) this.pos++;
    if (this.pos === start) this.fail(`unexpected ${this.describe()}, expected a label name`);
    return this.s.slice(start, this.pos);
  }

  private string(): string {
    const quote = this.peek();
    const start = this.pos;
    if (quote !== '"' && quote !== "'" && quote !== "`") {
      this.fail(`unexpected ${this.describe()}, expected a quoted string`);
    }
    this.pos++;
    if (quote === "`") {
      const end = this.s.indexOf("`", this.pos);
      if (end < 0) this.failAt(start, "unterminated raw string");
      const raw = this.s.slice(this.pos, end);
      this.pos = end + 1;
      return raw;
    }
    // Fast path: no escapes before the closing quote.
    const end = this.s.indexOf(quote, this.pos);
    const slash = this.s.indexOf("\\", this.pos);
    if (end >= 0 && (slash < 0 || slash > end)) {
      const value = this.s.slice(this.pos, end);
      if (value.includes("\n")) this.failAt(start, "unterminated quoted string");
      this.pos = end + 1;
      return value;
    }
    let out = "";
    for (;;) {
      if (this.pos >= this.s.length) this.failAt(start, "unterminated quoted string");
      const c = this.s[this.pos]!;
      if (c === quote) {
        this.pos++;
        return out;
      }
      if (c === "\n") this.failAt(start, "unterminated quoted string");
      if (c !== "\\") {
        out += c;
        this.pos++;
        continue;
      }
      out += this.escape(quote);
    }
  }

  /** One escape sequence at `pos` (a backslash), with Go's rules for quoted strings. */
  private escape(quote: string): string {
    const at = this.pos;
    const c = this.s[this.pos + 1];
    this.pos += 2;
    switch (c) {
      case "a":
        return "\x07";
      case "b":
        return "\b";
      case "f":
        return "\f";
      case "n":
        return "\n";
      case "r":
        return "\r";
      case "t":
        return "\t";
      case "v":
        return "\v";
      case "\\":
        return "\\";
      case "x":
        return this.codePoint(at, 2, 16, 0xff);
      case "u":
        return this.codePoint(at, 4, 16, 0x10ffff);
      case "U":
        return this.codePoint(at, 8, 16, 0x10ffff);
      case undefined:
        return this.failAt(at, "unterminated quoted string");
      default:
        if (c === quote) return c;
        if (c >= "0" && c <= "7") {
          this.pos--;
          return this.codePoint(at, 3, 8, 0xff);
        }
        return this.failAt(at, `unknown escape sequence ${JSON.stringify(`\\${c}`)}`);
    }
  }

  private codePoint(at: number, digits: number, radix: number, max: number): string {
    const text = this.s.slice(this.pos, this.pos + digits);
    const ok = radix === 16 ? /^[0-9a-fA-F]+$/ : /^[0-7]+$/;
    if (text.length !== digits || !ok.test(text)) {
      this.failAt(
        at,
        `invalid escape sequence ${JSON.stringify(this.s.slice(at, this.pos + digits))}`,
      );
    }
    const cp = parseInt(text, radix);
    if (cp > max || (cp >= 0xd800 && cp <= 0xdfff)) {
      this.failAt(at, `escape sequence is an invalid Unicode code point`);
    }
    this.pos += digits;
    return String.fromCodePoint(cp);
  }

  private space(): void {
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      this.pos++;
    }
  }

  private peek(): string | undefined {
    return this.s[this.pos];
  }

  private expect(c: string): void {
    if (this.peek() !== c) this.fail(`unexpected ${this.describe()}, expected "${c}"`);
    this.pos++;
  }

  private describe(): string {
    const c = this.peek();
    return c === undefined ? "end of input" : JSON.stringify(c);
  }

  private fail(detail: string): never {
    return this.failAt(this.pos, detail);
  }

  private failAt(at: number, detail: string): never {
    throw new LabelsError("parse_error", detail, at + 1);
  }
}
