/**
 * Loki's log level discovery (`discover_log_levels`, `pkg/distributor/field_detection.go`):
 * the level of an entry as `detected_level` structured metadata, which Grafana's Logs
 * Drilldown and the log volume panel group by. In order: a level label of the stream, a
 * level field of the entry's metadata, an OTLP `severity_number`, a level field of the
 * line read as JSON or logfmt, keywords in the line; `unknown` when nothing says. Values
 * are normalised to Loki's words (`warn`, `error`, ...); anything else is kept as written.
 */
import type { Label } from "@sieve/labels";

/** The metadata name Loki writes the level under. */
export const LEVEL_LABEL = "detected_level";

/** Loki's default `log_level_fields`: where a level may already be, in this order. */
export const LEVEL_FIELDS: readonly string[] = [
  "level",
  "LEVEL",
  "Level",
  "log.level",
  "severity",
  "SEVERITY",
  "Severity",
  "SeverityText",
  "lvl",
  "LVL",
  "Lvl",
  "severity_text",
  "Severity_Text",
  "SEVERITY_TEXT",
];
const FIELD_SET = new Set(LEVEL_FIELDS);

/** Loki's `logLevelFromJSONMaxDepth` default: levels nested deeper are not looked for. */
const JSON_MAX_DEPTH = 2;

/**
 * Known level words, lower case, and the level each means. A Map, not an object literal:
 * `constructor` or `__proto__` are words a line may hold, not levels.
 */
const WORDS: ReadonlyMap<string, string> = new Map([
  ["trace", "trace"],
  ["trc", "trace"],
  ["debug", "debug"],
  ["dbg", "debug"],
  ["info", "info"],
  ["inf", "info"],
  ["information", "info"],
  ["warn", "warn"],
  ["wrn", "warn"],
  ["warning", "warn"],
  ["error", "error"],
  ["err", "error"],
  ["critical", "critical"],
  ["fatal", "fatal"],
]);

/** A level as Loki writes it (case-insensitive known words), or the value as it is. */
export function normalizeLevel(level: string): string {
  return WORDS.get(level.toLowerCase()) ?? level;
}

/** An entry's metadata as the detector reads it: a name's value, or undefined. */
export type MetadataLookup = (name: string) => string | undefined;

/** The metadata names the detector reads: a source need only look these up. */
export const LEVEL_METADATA: ReadonlySet<string> = new Set([
  LEVEL_LABEL,
  "severity_number",
  ...LEVEL_FIELDS,
]);

/** Those names as bytes, by length (all are ASCII). */
const METADATA_BY_LENGTH: readonly (readonly string[])[] = Array.from(
  { length: Math.max(...[...LEVEL_METADATA].map((name) => name.length)) + 1 },
  (_, length) => [...LEVEL_METADATA].filter((name) => name.length === length),
);

/**
 * The name of `LEVEL_METADATA` that `bytes[start, end)` spell, or undefined: a source
 * holding names as bytes passes over every other pair (trace_id, user, ...) without
 * decoding its name.
 */
export function levelMetadataName(
  bytes: Uint8Array,
  start: number,
  end: number,
): string | undefined {
  const names = METADATA_BY_LENGTH[end - start];
  if (names === undefined) return undefined;
  for (const name of names) {
    let i = 0;
    while (i < name.length && bytes[start + i] === name.charCodeAt(i)) i++;
    if (i === name.length) return name;
  }
  return undefined;
}

/**
 * The `detected_level` to add to an entry, or undefined when it already has one (Loki then
 * keeps it).
 */
export function detectLevel(
  labels: readonly Label[],
  metadata: MetadataLookup | undefined,
  line: string,
): string | undefined {
  const found = new Map<string, string>();
  for (const name of LEVEL_METADATA) {
    const value = metadata?.(name);
    if (value !== undefined) found.set(name, value);
  }
  const source: LevelSource = {
    levelMetadata: () => (found.size > 0 ? found : undefined),
    line: () => line,
  };
  return sourceLevel(labelLevel(labels), source, 0);
}

/** The level a stream's labels give every one of its entries, or undefined. */
export function labelLevel(labels: readonly Label[]): string | undefined {
  for (const field of LEVEL_FIELDS) {
    const label = labels.find((l) => l.name === field);
    if (label !== undefined) return normalizeLevel(label.value);
  }
  return undefined;
}

/** An entry source as the detector reads it, by entry index: no closure an entry. */
export interface LevelSource {
  /** The entry's metadata pairs the detector reads, or undefined when it has none. */
  levelMetadata(i: number): ReadonlyMap<string, string> | undefined;
  line(i: number): string;
  leadingLevel?(i: number): string | undefined;
}

/** The `detected_level` of entry `i` of `source`, the stream's part done once. */
export function sourceLevel(
  fromLabels: string | undefined,
  source: LevelSource,
  i: number,
): string | undefined {
  const metadata = source.levelMetadata(i);
  if (metadata !== undefined) {
    if (metadata.has(LEVEL_LABEL)) return undefined;
    if (fromLabels !== undefined) return fromLabels;
    for (const field of LEVEL_FIELDS) {
      const value = metadata.get(field);
      if (value !== undefined) return normalizeLevel(value);
    }
    const severity = metadata.get("severity_number");
    if (severity !== undefined) return otlpLevel(severity);
  } else if (fromLabels !== undefined) {
    return fromLabels;
  }
  return source.leadingLevel?.(i) ?? levelOfLine(source.line(i));
}

const LEVEL_PREFIX = "level=";

/** The known words by length, as `leadingLevel` compares them. */
const WORDS_BY_LENGTH: readonly (readonly [string, string][])[] = Array.from(
  { length: Math.max(...[...WORDS.keys()].map((word) => word.length)) + 1 },
  (_, length) => [...WORDS].filter(([word]) => word.length === length),
);

/**
 * The level of a line held as bytes that starts with `level=` and a known word (the
 * common logfmt case), read without decoding it (a string of the word and `Buffer#compare`
 * were two fifths of a push worker's level detection); undefined for every other line.
 */
export function leadingLevel(bytes: Uint8Array, start: number, end: number): string | undefined {
  if (end - start < LEVEL_PREFIX.length + 3) return undefined;
  for (let i = 0; i < LEVEL_PREFIX.length; i++) {
    if (bytes[start + i] !== LEVEL_PREFIX.charCodeAt(i)) return undefined;
  }
  const from = start + LEVEL_PREFIX.length;
  let to = from;
  while (to < end && to - from < WORDS_BY_LENGTH.length && bytes[to] !== 0x20) to++;
  const words = WORDS_BY_LENGTH[to - from];
  if (words === undefined) return undefined;
  for (const [word, level] of words) {
    let i = 0;
    // ASCII letters compared without case, as the word lower-cased would be.
    while (i < word.length && asciiLower(bytes[from + i]!) === word.charCodeAt(i)) i++;
    if (i === word.length) return level;
  }
  return undefined;
}

function asciiLower(byte: number): number {
  return byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte;
}

/** The OpenTelemetry severity number's range, as Loki reads it. */
function otlpLevel(text: string): string {
  if (!/^-?\d+$/.test(text)) return "info";
  const n = Number(text);
  if (n === 0) return "unknown";
  if (n <= 4) return "trace";
  if (n <= 8) return "debug";
  if (n <= 12) return "info";
  if (n <= 16) return "warn";
  if (n <= 20) return "error";
  if (n <= 24) return "fatal";
  return "unknown";
}

/** A logfmt key that may be a level field: lines without one skip the logfmt scan. */
const LOGFMT_LEVEL_KEY =
  /(?:^|[\s"])(?:level|log\.level|severity|severitytext|lvl|severity_text)=/i;

function levelOfLine(line: string): string {
  let value: string | undefined;
  const trimmed = line.trim();
  if (trimmed.startsWith("{") && trimmed.endsWith("}")) value = jsonLevel(trimmed);
  else if (line.includes("=")) {
    if (!LOGFMT_LEVEL_KEY.test(line)) return keywordLevel(line);
    value = logfmtLevel(line);
  } else return keywordLevel(line);
  const known = value === undefined ? undefined : WORDS.get(value.toLowerCase());
  return known ?? keywordLevel(line);
}

/** The first string under a level field, objects searched to {@link JSON_MAX_DEPTH}. */
function jsonLevel(text: string): string | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  const walk = (v: unknown, depth: number): string | undefined => {
    if (depth >= JSON_MAX_DEPTH || typeof v !== "object" || v === null || Array.isArray(v))
      return undefined;
    for (const [key, x] of Object.entries(v)) {
      if (typeof x === "string" && FIELD_SET.has(key)) return x;
      if (typeof x === "object" && x !== null && !Array.isArray(x)) {
        const found = walk(x, depth + 1);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  };
  return walk(doc, 0);
}

/**
 * The value of the best-ranked level field of a logfmt line (keys compared without case,
 * as Loki's decoder does): `key=value`, `key="quoted value"`.
 */
function logfmtLevel(line: string): string | undefined {
  let best = LEVEL_FIELDS.length;
  let result: string | undefined;
  const re = /([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) {
    const key = m[1]!.toLowerCase();
    for (let x = 0; x < best; x++) {
      if (LEVEL_FIELDS[x]!.toLowerCase() !== key) continue;
      const raw = m[2]!;
      result = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, "$1") : raw;
      best = x;
      if (x === 0) return result;
      break;
    }
  }
  return result;
}

/** Every keyword below: a line without one is `unknown` after one scan. */
const ANY_KEYWORD =
  /info|INFO|err:|ERR:|\[err|\[ERR|warn|WARN|critical:|CRITICAL:|\[critical\]|\[CRITICAL\]|debug|DEBUG/;

/** Loki's `detectLevelFromLogLine`: keywords, in its order. */
function keywordLevel(line: string): string {
  if (!ANY_KEYWORD.test(line)) return "unknown";
  const has = (...words: string[]) => words.some((w) => line.includes(w));
  if (has("info:", "INFO:", "[info]", "[INFO]", "info", "INFO")) return "info";
  if (has("err:", "ERR:", "[err]", "[ERR]", "[error]", "[ERROR]")) return "error";
  if (has("warn:", "WARN:", "[warn]", "[WARN]", "[warning]", "[WARNING]", "warning", "WARNING"))
    return "warn";
  if (has("critical:", "CRITICAL:", "[critical]", "[CRITICAL]")) return "critical";
  if (has("debug:", "DEBUG:", "[debug]", "[DEBUG]", "debug", "DEBUG")) return "debug";
  return "unknown";
}
