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

const WORDS: Readonly<Record<string, string>> = {
  trace: "trace",
  trc: "trace",
  debug: "debug",
  dbg: "debug",
  info: "info",
  inf: "info",
  information: "info",
  warn: "warn",
  wrn: "warn",
  warning: "warn",
  error: "error",
  err: "error",
  critical: "critical",
  fatal: "fatal",
};

/** A level as Loki writes it (case-insensitive known words), or the value as it is. */
export function normalizeLevel(level: string): string {
  return WORDS[level.toLowerCase()] ?? level;
}

/** An entry's metadata as the detector reads it: a name's value, or undefined. */
export type MetadataLookup = (name: string) => string | undefined;

/** The metadata names the detector reads: a source need only look these up. */
export const LEVEL_METADATA: ReadonlySet<string> = new Set([
  LEVEL_LABEL,
  "severity_number",
  ...LEVEL_FIELDS,
]);

/**
 * First bytes of those names: a source holding names as bytes passes over every other
 * pair (trace_id, user, ...) without decoding its name.
 */
export const LEVEL_FIRST_BYTES: ReadonlySet<number> = new Set(
  [...LEVEL_METADATA].map((name) => name.charCodeAt(0)),
);

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

const LEVEL_PREFIX = Buffer.from("level=");

/**
 * The level of a line held as bytes that starts with `level=` and a known word (the
 * common logfmt case), without decoding it; undefined for every other line.
 */
export function leadingLevel(bytes: Buffer, start: number, end: number): string | undefined {
  if (end - start < LEVEL_PREFIX.length + 3) return undefined;
  if (bytes.compare(LEVEL_PREFIX, 0, LEVEL_PREFIX.length, start, start + LEVEL_PREFIX.length) !== 0)
    return undefined;
  const from = start + LEVEL_PREFIX.length;
  let to = from;
  while (to < end && to - from <= 11 && bytes[to] !== 0x20) to++;
  if (to - from > 11) return undefined;
  return WORDS[bytes.toString("latin1", from, to).toLowerCase()];
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
  const known = value === undefined ? undefined : WORDS[value.toLowerCase()];
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
