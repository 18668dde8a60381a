/**
 * The parser stages: `json`, `logfmt` and `unpack`, writing labels into a
 * {@link LabelsBuilder}. The JSON and logfmt scanners are hand-written single passes over
 * the line: they keep numbers as written (`1.50` stays `1.50`, as Loki's jsonparser does),
 * flatten nested objects to `a_b`, skip arrays, and build no intermediate objects
 * (JSON.parse then a walk builds objects nobody needs).
 */
import type { ExtractionParam } from "./ast.js";
import { sanitizeLabelName, type LabelsBuilder } from "./builder.js";
import { parseJsonPath, type PathStep } from "./jsonpath.js";

/** Loki's `__error__` values. */
export const JSON_PARSER_ERR = "JSONParserErr";
export const LOGFMT_PARSER_ERR = "LogfmtParserErr";

const MAX_JSON_DEPTH = 64;

class JsonSyntax extends Error {}

function labelFor(b: LabelsBuilder, key: string): string {
  const name = sanitizeLabelName(key);
  return b.isStreamLabel(name) ? name + "_extracted" : name;
}

/** `| json`: every scalar field, nested keys joined with `_`. Sets JSONParserErr on bad JSON. */
export function parseJsonLine(line: string, b: LabelsBuilder): void {
  try {
    let i = ws(line, 0);
    if (line.charCodeAt(i) !== 123)
      throw new JsonSyntax("Value looks like object, but can't find opening '{' symbol");
    i = scanObject(line, i, "", b, 0);
    if (ws(line, i) !== line.length)
      throw new JsonSyntax(`unexpected data after the object at offset ${i}`);
  } catch (e) {
    if (!(e instanceof JsonSyntax)) throw e;
    b.setError(JSON_PARSER_ERR, e.message);
  }
}

function ws(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) break;
    i++;
  }
  return i;
}

function scanObject(s: string, i: number, prefix: string, b: LabelsBuilder, depth: number): number {
  if (depth > MAX_JSON_DEPTH) throw new JsonSyntax("JSON nested too deeply");
  i = ws(s, i + 1);
  if (s.charCodeAt(i) === 125) return i + 1;
  for (;;) {
    if (s.charCodeAt(i) !== 34) throw new JsonSyntax(`expected a key at offset ${i}`);
    const [key, afterKey] = scanString(s, i);
    i = ws(s, afterKey);
    if (s.charCodeAt(i) !== 58) throw new JsonSyntax(`expected ':' at offset ${i}`);
    i = ws(s, i + 1);
    const c = s.charCodeAt(i);
    if (c === 34) {
      const [v, end] = scanString(s, i);
      if (key !== "") b.set(labelFor(b, prefix + key), v);
      i = end;
    } else if (c === 123) {
      i = scanObject(s, i, prefix + key + "_", b, depth + 1);
    } else if (c === 91) {
      i = skipValue(s, i, depth + 1);
    } else {
      const end = scanScalar(s, i);
      const raw = s.slice(i, end);
      if (raw !== "null" && key !== "") b.set(labelFor(b, prefix + key), raw);
      i = end;
    }
    i = ws(s, i);
    const d = s.charCodeAt(i);
    if (d === 44) {
      i = ws(s, i + 1);
      continue;
    }
    if (d === 125) return i + 1;
    throw new JsonSyntax(`Value looks like object, but can't find closing '}' symbol`);
  }
}

function scanString(s: string, i: number): [string, number] {
  // Native indexOf finds the closing quote faster than a charCodeAt loop (0.51 -> 0.54 M
  // lines/s on the json bench); a quote preceded by an odd run of backslashes is escaped.
  let j = s.indexOf('"', i + 1);
  while (j >= 0) {
    let k = j - 1;
    while (s.charCodeAt(k) === 92) k--;
    if ((j - 1 - k) % 2 === 0) break;
    j = s.indexOf('"', j + 1);
  }
  if (j < 0) throw new JsonSyntax(`Value is string, but can't find closing '"' symbol`);
  // Look for a backslash inside this string only: `indexOf` from here to the end of the
  // line made a line of many short strings quadratic (30,000 keys: 0.7 s for one line).
  const raw = s.slice(i + 1, j);
  if (!raw.includes("\\")) return [raw, j + 1];
  try {
    return [JSON.parse(s.slice(i, j + 1)) as string, j + 1];
  } catch {
    throw new JsonSyntax(`invalid escape in string at offset ${i}`);
  }
}

const SCALAR = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)$/;

function scanScalar(s: string, i: number): number {
  let j = i;
  while (j < s.length) {
    const c = s.charCodeAt(j);
    if (c === 44 || c === 125 || c === 93 || c === 32 || c === 9 || c === 10 || c === 13) break;
    j++;
  }
  if (j === i || !SCALAR.test(s.slice(i, j)))
    throw new JsonSyntax(`Unknown value type at offset ${i}`);
  return j;
}

function skipValue(s: string, i: number, depth: number): number {
  if (depth > MAX_JSON_DEPTH) throw new JsonSyntax("JSON nested too deeply");
  const c = s.charCodeAt(i);
  if (c === 34) return scanString(s, i)[1];
  if (c !== 91 && c !== 123) return scanScalar(s, i);
  const close = c === 91 ? 93 : 125;
  i = ws(s, i + 1);
  if (s.charCodeAt(i) === close) return i + 1;
  for (;;) {
    if (close === 125) {
      if (s.charCodeAt(i) !== 34) throw new JsonSyntax(`expected a key at offset ${i}`);
      i = ws(s, scanString(s, i)[1]);
      if (s.charCodeAt(i) !== 58) throw new JsonSyntax(`expected ':' at offset ${i}`);
      i = ws(s, i + 1);
    }
    i = ws(s, skipValue(s, i, depth + 1));
    const d = s.charCodeAt(i);
    if (d === 44) {
      i = ws(s, i + 1);
      continue;
    }
    if (d === close) return i + 1;
    throw new JsonSyntax(`unterminated ${close === 93 ? "array" : "object"} at offset ${i}`);
  }
}

/** A compiled `| json a="path", ...`. Missing paths give empty labels. */
export function jsonExpressionParser(
  params: readonly ExtractionParam[],
): (line: string, b: LabelsBuilder) => void {
  const compiled = params.map((p) => ({
    label: sanitizeLabelName(p.label),
    path: parseJsonPath(p.path),
  }));
  return (line, b) => {
    let doc: unknown;
    try {
      doc = JSON.parse(line);
    } catch (e) {
      b.setError(JSON_PARSER_ERR, e instanceof Error ? e.message : String(e));
      return;
    }
    for (const { label, path } of compiled) {
      const name = b.isStreamLabel(label) ? label + "_extracted" : label;
      b.set(name, jsonValueText(walk(doc, path)));
    }
  };
}

function walk(doc: unknown, path: readonly PathStep[]): unknown {
  let cur = doc;
  for (const step of path) {
    if (typeof step === "number") {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[step];
    } else {
      if (cur === null || typeof cur !== "object" || Array.isArray(cur)) return undefined;
      const obj = cur as Record<string, unknown>;
      cur = Object.hasOwn(obj, step) ? obj[step] : undefined;
    }
  }
  return cur;
}

function jsonValueText(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

/** `| unpack`: a JSON object of strings; `_entry` replaces the line. Answers the new line. */
export function unpackLine(line: string, b: LabelsBuilder): string {
  let doc: unknown;
  try {
    doc = JSON.parse(line);
  } catch (e) {
    b.setError(JSON_PARSER_ERR, e instanceof Error ? e.message : String(e));
    return line;
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    b.setError(JSON_PARSER_ERR, "expecting json object");
    return line;
  }
  let out = line;
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (typeof v !== "string") continue;
    if (k === "_entry") out = v;
    else b.set(labelFor(b, k), v);
  }
  return out;
}

/**
 * A compiled `| logfmt [--strict] [--keep-empty] [params]`, following go-logfmt: `k=v`,
 * `k="quoted \" v"`, bare keys. Without `--strict` a malformed pair is skipped; with it the
 * scan stops and sets LogfmtParserErr. Empty values are dropped unless `--keep-empty`.
 */
export function logfmtParser(
  flags: readonly string[],
  params: readonly ExtractionParam[],
): (line: string, b: LabelsBuilder) => void {
  const strict = flags.includes("--strict");
  const keepEmpty = flags.includes("--keep-empty");
  const wanted =
    params.length === 0
      ? undefined
      : new Map(params.map((p) => [p.path, sanitizeLabelName(p.label)]));
  return (line, b) => {
    const n = line.length;
    let i = 0;
    while (i < n) {
      while (i < n && line.charCodeAt(i) <= 32) i++;
      if (i >= n) break;
      const keyStart = i;
      let bad = "";
      while (i < n) {
        const c = line.charCodeAt(i);
        if (c <= 32 || c === 61) break;
        if (c === 34) bad = `logfmt syntax error at pos ${i + 1} : unexpected '"'`;
        i++;
      }
      const key = line.slice(keyStart, i);
      let value = "";
      if (bad === "" && key === "") bad = `logfmt syntax error at pos ${i + 1} : unexpected '='`;
      if (i < n && line.charCodeAt(i) === 61) {
        i++;
        if (i < n && line.charCodeAt(i) === 34) {
          const start = i;
          let j = i + 1;
          let escaped = false;
          while (j < n && line.charCodeAt(j) !== 34) {
            if (line.charCodeAt(j) === 92) {
              escaped = true;
              j++;
            }
            j++;
          }
          if (j >= n) {
            if (bad === "") bad = `logfmt syntax error at pos ${n + 1} : unterminated quoted value`;
            i = n;
          } else {
            const raw = line.slice(start, j + 1);
            if (!escaped) value = raw.slice(1, -1);
            else {
              try {
                value = JSON.parse(raw) as string;
              } catch {
                value = raw.slice(1, -1);
              }
            }
            i = j + 1;
          }
        } else {
          const start = i;
          while (i < n && line.charCodeAt(i) > 32) {
            const c = line.charCodeAt(i);
            if ((c === 61 || c === 34) && bad === "") {
              bad = `logfmt syntax error at pos ${i + 1} : unexpected '${c === 61 ? "=" : '"'}'`;
            }
            i++;
          }
          value = line.slice(start, i);
        }
      }
      if (bad !== "") {
        if (strict) {
          b.setError(LOGFMT_PARSER_ERR, bad);
          return;
        }
        continue;
      }
      if (value === "" && !keepEmpty) continue;
      if (wanted !== undefined) {
        const label = wanted.get(key);
        if (label === undefined) continue;
        b.set(b.isStreamLabel(label) ? label + "_extracted" : label, value);
      } else {
        b.set(labelFor(b, key), value);
      }
    }
  };
}
