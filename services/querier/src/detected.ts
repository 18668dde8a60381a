/**
 * Grafana's discovery endpoints, as Loki 3.x answers them:
 *
 * - `detected_labels`: the stream labels of the selected series with their number of
 *   distinct values, leaving out what Logs Drilldown cannot group by (Loki's
 *   `SingleTenantQuerier.DetectedLabels` and `shouldRejectLabel` in `pkg/querier/querier.go`).
 * - `detected_fields` and `detected_field/<name>/values`: the fields of a sample of lines
 *   (the newest `line_limit` lines of the query): structured metadata, the labels the
 *   query's own parsers extract, and what parsing each line as JSON, else logfmt, finds;
 *   each with its type, parsers and cardinality (`pkg/querier/queryrange/detected_fields.go`).
 *
 * Both are built on the querier's own reads (`series`, `selectLogs`), so they see the store
 * and the ingesters and obey the tenant's limits. Memory is bounded by the sample: at most
 * `line_limit` lines (itself at most `maxEntriesLimitPerQuery`), `field_limit` fields,
 * and each field's values are those of the sampled lines.
 *
 * Cardinality is an exact count of distinct values where Loki estimates one with a
 * HyperLogLog sketch: on the sizes a sample holds Loki's sparse sketch is exact too.
 */
import { compilePipeline, parseSyntax, type Pipeline } from "@sieve/logql";
import { detectType, displayValue, isGoFloat, type DetectedFieldType } from "./detected-types.js";
import { categorize } from "./marshal.js";
import {
  MAX_POINTS,
  ParamError,
  defaultStep,
  goParseInt,
  parseBounds,
  parseSecondsOrDuration,
  type Form,
} from "./params.js";
import type { Querier, ResultEntry } from "./querier.js";

/** Loki's default `line_limit` of `detected_fields` (its `defaultQueryLimit`). */
export const DEFAULT_LINE_LIMIT = 100;
/** Loki's default `limit` (or `field_limit`) of `detected_fields` (its `defaultLimit`). */
export const DEFAULT_FIELD_LIMIT = 1000;

/** Labels Loki keeps in `detected_labels` whatever their values (`staticLabels`). */
const STATIC_LABELS = new Set(["cluster", "namespace", "instance", "pod"]);

/** Labels a parser sets that are not fields (Loki's error labels). */
const NOT_FIELDS = new Set(["__error__", "__error_details__", "__preserve_error__"]);

/** A parsed `detected_fields` or `detected_field/<name>/values` request. */
export interface DetectedFieldsQuery {
  readonly query: string;
  readonly start: bigint;
  readonly end: bigint;
  /** Lines sampled, newest first. */
  readonly lineLimit: number;
  /** Fields (or values) answered at most. */
  readonly fieldLimit: number;
  /** Parsed and checked as Loki does, though a sample has no steps. */
  readonly step: bigint;
}

/** Loki's `parseInt` of a positive limit (`strconv.Atoi`), with its words. */
function positiveInt(raw: string, def: number): number {
  if (raw === "") return def;
  const n = goParseInt(raw, "Atoi");
  if (n <= 0n) throw new ParamError("limit must be a positive value");
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

/**
 * Loki's `ParseDetectedFieldsQuery` (`pkg/loghttp/params.go`), in its order of checks:
 * bounds, `end` before `start`, `line_limit`, `limit` (else `field_limit`), `step`.
 */
export function parseDetectedFieldsQuery(form: Form, nowNs: bigint): DetectedFieldsQuery {
  const query = form.get("query") ?? "";
  const { start, end } = parseBounds(form, nowNs);
  if (end < start) throw new ParamError("end timestamp must not be before or equal to start time");
  const lineLimit = positiveInt(form.get("line_limit") ?? "", DEFAULT_LINE_LIMIT);
  const limitRaw = form.get("limit") ?? "";
  const fieldLimit = positiveInt(
    limitRaw !== "" ? limitRaw : (form.get("field_limit") ?? ""),
    DEFAULT_FIELD_LIMIT,
  );
  const stepRaw = form.get("step") ?? "";
  const step = stepRaw === "" ? defaultStep(start, end) : parseSecondsOrDuration(stepRaw);
  if (step <= 0n) {
    throw new ParamError(
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    );
  }
  if ((end - start) / step > MAX_POINTS) {
    throw new ParamError(
      "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter",
    );
  }
  return { query, start, end, lineLimit, fieldLimit, step };
}

/** One field of `detected_fields`, in Loki's JSON. */
export interface DetectedField {
  label: string;
  type: DetectedFieldType;
  cardinality: number;
  /** `json` or `logfmt` for fields found by parsing lines; null for structured metadata. */
  parsers: string[] | null;
}

/** What a field collects while the sample is read. */
interface FieldState {
  type: DetectedFieldType;
  parsers: string[];
  values: Set<string>;
}

const UUID_FORMS = [
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  /^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$/i,
  /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  /^[0-9a-f]{32}$/i,
];

/** google/uuid's `Parse` accepts it (the four forms it reads). */
function isUuid(v: string): boolean {
  return UUID_FORMS.some((re) => re.test(v));
}

/**
 * Loki's `shouldRejectLabel`: a label is left out when it has no value, or when every value
 * is an ID (a number or a UUID), except a label of at most two values all `0` or `1` (a flag).
 */
export function rejectLabel(values: readonly string[]): boolean {
  if (values.length === 0) return true;
  if (values.length <= 2 && values.every((v) => v === "0" || v === "1")) return false;
  return values.every((v) => isGoFloat(v) || isUuid(v));
}

/** `detected_labels` of label sets: kept labels and their distinct values, sorted by name. */
export function detectLabels(
  series: readonly Readonly<Record<string, string>>[],
): { label: string; cardinality: number }[] {
  const byName = new Map<string, Set<string>>();
  for (const labels of series) {
    for (const [name, value] of Object.entries(labels)) {
      let values = byName.get(name);
      if (values === undefined) byName.set(name, (values = new Set()));
      values.add(value);
    }
  }
  const out: { label: string; cardinality: number }[] = [];
  for (const [label, set] of byName) {
    const values = [...set];
    const keep = STATIC_LABELS.has(label) ? values.length > 0 : !rejectLabel(values);
    if (keep) out.push({ label, cardinality: set.size });
  }
  return out.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
}

/** The line parsers field detection tries, in Loki's order: JSON, then logfmt. */
class LineParsers {
  private readonly json: Pipeline = compilePipeline(stagesOf("json"));
  private readonly logfmt: Pipeline = compilePipeline(stagesOf("logfmt"));

  /**
   * The fields one line holds, beside its stream labels (a field named as a stream label
   * becomes `<name>_extracted`, as Loki's parsers write it), and the parser that read it;
   * undefined when neither parser reads the line.
   */
  parse(
    line: string,
    stream: Readonly<Record<string, string>>,
  ): { fields: Record<string, string>; parser: string } | undefined {
    for (const [parser, pipeline] of [
      ["json", this.json],
      ["logfmt", this.logfmt],
    ] as const) {
      const out = pipeline.process({ timestamp: 0n, line, labels: stream, structuredMetadata: {} });
      if (out === null || Object.hasOwn(out.labels, "__error__")) continue;
      const fields: Record<string, string> = {};
      for (const [k, v] of Object.entries(out.labels)) {
        if (!Object.hasOwn(stream, k) && !NOT_FIELDS.has(k)) fields[k] = v;
      }
      return { fields, parser };
    }
    return undefined;
  }
}

function stagesOf(parser: "json" | "logfmt") {
  const e = parseSyntax(`{__name__="logs"} | ${parser}`);
  if (e.kind !== "log") throw new Error("unreachable: a log query");
  return e.pipeline;
}

/**
 * The fields of one sampled entry, as Loki's `parseDetectedFields` sees them: its
 * structured metadata (no parser), then what the query's own parsers extracted together
 * with what parsing the line finds (the line's parser).
 */
function* entryFields(
  e: ResultEntry,
  parsers: LineParsers,
): Generator<{ name: string; value: string; parser?: string }> {
  const { stream, structuredMetadata, parsed } = categorize(e);
  for (const [name, value] of Object.entries(structuredMetadata)) yield { name, value };
  const line = parsers.parse(e.line, stream);
  for (const [name, value] of Object.entries(parsed)) {
    if (NOT_FIELDS.has(name) || (line !== undefined && Object.hasOwn(line.fields, name))) continue;
    yield line === undefined ? { name, value } : { name, value, parser: line.parser };
  }
  if (line !== undefined) {
    for (const [name, value] of Object.entries(line.fields)) {
      yield { name, value, parser: line.parser };
    }
  }
}

/** `detected_fields` of a sample: at most `fieldLimit` fields, first found first kept. */
export function detectFields(entries: readonly ResultEntry[], fieldLimit: number): DetectedField[] {
  const fields = new Map<string, FieldState>();
  const parsers = new LineParsers();
  for (const e of entries) {
    for (const { name, value, parser } of entryFields(e, parsers)) {
      let f = fields.get(name);
      if (f === undefined) {
        if (fields.size >= fieldLimit) continue;
        fields.set(name, (f = { type: "string", parsers: [], values: new Set() }));
      }
      if (parser !== undefined && !f.parsers.includes(parser)) f.parsers.push(parser);
      // As Loki: the type is that of the latest value read (values of a field rarely change type).
      f.type = detectType(value);
      f.values.add(value);
    }
  }
  const out: DetectedField[] = [];
  for (const [label, f] of fields) {
    out.push({
      label,
      type: f.type,
      cardinality: f.values.size,
      parsers: f.parsers.length === 0 ? null : f.parsers,
    });
  }
  return out.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
}

/** `detected_field/<name>/values` of a sample: at most `limit` distinct values, sorted. */
export function detectFieldValues(
  entries: readonly ResultEntry[],
  name: string,
  limit: number,
): string[] {
  const values = new Set<string>();
  const parsers = new LineParsers();
  for (const e of entries) {
    if (values.size >= limit) break;
    for (const f of entryFields(e, parsers)) {
      if (f.name !== name) continue;
      // Parsed sizes are listed as Loki lists them; metadata as it is.
      values.add(f.parser === undefined ? f.value : displayValue(f.value));
      if (values.size >= limit) break;
    }
  }
  return [...values].sort();
}

/** Reads the sample of a `detected_fields` request: its newest `lineLimit` lines. */
export async function sampleLines(
  querier: Querier,
  tenant: string,
  q: DetectedFieldsQuery,
): Promise<ResultEntry[]> {
  const answer = await querier.selectLogs({
    tenant,
    query: q.query,
    start: q.start,
    end: q.end,
    limit: q.lineLimit,
    direction: "backward",
  });
  return answer.entries;
}

/**
 * Loki's `detected_labels` body: `detectedLabels` only when there is one (Loki's JSON of
 * the response message omits an empty list, as every repeated field without a `jsontag`).
 */
export function detectedLabelsBody(labels: { label: string; cardinality: number }[]): object {
  return labels.length === 0 ? {} : { detectedLabels: labels };
}

/** Loki's `detected_fields` body: `fields` and `limit` only when there are fields. */
export function detectedFieldsBody(fields: DetectedField[], fieldLimit: number): object {
  return fields.length === 0 ? {} : { fields, limit: fieldLimit };
}

/** Loki's `detected_field/<name>/values` body: `values` and `limit` only when there are values. */
export function detectedValuesBody(values: string[], fieldLimit: number): object {
  return values.length === 0 ? {} : { values, limit: fieldLimit };
}
