/**
 * OTLP logs as Loki streams, the way Loki 3.x maps them (`pkg/loghttp/push/otlp.go`): one
 * more decoder in front of the one validation path. Per resource, the attributes the
 * tenant's rules make index labels become the stream's labels (Loki's default list:
 * service.name, k8s.*, ...), every other resource, scope and log attribute becomes
 * structured metadata, names normalised as Prometheus does (`service.name` →
 * `service_name`), maps flattened with their key as prefix. A record adds `trace_id` and
 * `span_id` (hex), `severity_number`, `severity_text`, `flags`, `observed_timestamp` and
 * the dropped counts as structured metadata when set; its body is the line (a string as is,
 * anything else as Go's pdata prints it). A resource without `service.name` gets
 * `service_name` from the first index label on the tenant's discovery list, or
 * `unknown_service`.
 */
import type { LabelPair, OtlpAttribute, OtlpLogs, OtlpValue } from "@sieve/proto";
import type { Label } from "@sieve/labels";
import { labelsString } from "@sieve/labels";
import type { IncomingEntry, IncomingStream } from "./decode.js";

/** The OTLP part of a tenant's limits: which attributes go where. */
export interface OtlpLimits {
  /**
   * Resource attributes stored as stream labels: names, or `/regex/` (anchored, as Loki's
   * relabel regexes). Loki's default list unless the tenant sets its own.
   */
  readonly otlpResourceIndexLabels: readonly string[];
  /** Resource attributes dropped (names or `/regex/`); they win over the index list. */
  readonly otlpResourceDrop: readonly string[];
  /** Scope attributes dropped. */
  readonly otlpScopeDrop: readonly string[];
  /** Log record attributes dropped. */
  readonly otlpLogDrop: readonly string[];
  /**
   * Loki's `discover_service_name`: stream labels that name the service when there is no
   * `service.name`, in order; empty turns discovery (and `unknown_service`) off.
   */
  readonly discoverServiceName: readonly string[];
}

/** Loki's `blessedAttributes`: resource attributes indexed by default. */
export const DEFAULT_OTLP_INDEX_LABELS: readonly string[] = [
  "service.name",
  "service.namespace",
  "service.instance.id",
  "deployment.environment",
  "cloud.region",
  "cloud.availability_zone",
  "k8s.cluster.name",
  "k8s.namespace.name",
  "k8s.pod.name",
  "k8s.container.name",
  "container.name",
  "k8s.replicaset.name",
  "k8s.deployment.name",
  "k8s.statefulset.name",
  "k8s.daemonset.name",
  "k8s.cronjob.name",
  "k8s.job.name",
];

/** Loki's default `discover_service_name`. */
export const DEFAULT_DISCOVER_SERVICE_NAME: readonly string[] = [
  "service",
  "app",
  "application",
  "app_name",
  "name",
  "app_kubernetes_io_name",
  "container",
  "container_name",
  "k8s_container_name",
  "component",
  "workload",
  "job",
  "k8s_job_name",
];

/** What `service_name` is when nothing names the service (Loki's `ServiceUnknown`). */
export const UNKNOWN_SERVICE = "unknown_service";

/** A rule list as a test of attribute names: names match exactly, `/re/` anchored. */
type NameTest = (name: string) => boolean;

const compiled = new Map<string, RegExp>();

/** Whether `rule` is a regex rule, `/.../`. */
function isRegexRule(rule: string): boolean {
  return rule.length >= 2 && rule.startsWith("/") && rule.endsWith("/");
}

/** Checks a rule list; returns the first bad rule's error, or undefined. */
export function otlpRuleError(rules: readonly string[]): string | undefined {
  for (const rule of rules) {
    if (!isRegexRule(rule)) continue;
    try {
      new RegExp(`^(?:${rule.slice(1, -1)})$`, "u");
    } catch (error) {
      return `${JSON.stringify(rule)}: ${(error as Error).message}`;
    }
  }
  return undefined;
}

function nameTest(rules: readonly string[]): NameTest {
  if (rules.length === 0) return () => false;
  const names = new Set<string>();
  const regexes: RegExp[] = [];
  for (const rule of rules) {
    if (!isRegexRule(rule)) {
      names.add(rule);
      continue;
    }
    let re = compiled.get(rule);
    if (re === undefined) {
      // Checked at load (otlpRuleError): a rule that fails here matches nothing.
      try {
        re = new RegExp(`^(?:${rule.slice(1, -1)})$`, "u");
      } catch {
        re = /(?!)/;
      }
      if (compiled.size > 1024) compiled.clear();
      compiled.set(rule, re);
    }
    regexes.push(re);
  }
  return (name) => names.has(name) || regexes.some((re) => re.test(name));
}

/**
 * A label name as Prometheus' OTLP translator normalises it (`NormalizeLabel`): every
 * character but `[A-Za-z0-9_]` becomes `_`, a leading digit gets `key_` and a single
 * leading underscore `key`.
 */
export function normalizeLabelName(name: string): string {
  if (name === "") return name;
  const s = name.replace(/[^A-Za-z0-9_]/gu, "_");
  if (/^[0-9]/.test(s)) return `key_${s}`;
  if (s.startsWith("_") && !s.startsWith("__")) return `key${s}`;
  return s;
}

/** A double as Go's `strconv.FormatFloat(f, 'f', -1, 64)`: shortest digits, no exponent. */
export function goFloat(f: number): string {
  if (Number.isNaN(f)) return "NaN";
  if (f === Infinity) return "+Inf";
  if (f === -Infinity) return "-Inf";
  const s = String(f);
  const e = s.indexOf("e");
  if (e < 0) return s;
  const exponent = Number(s.slice(e + 1));
  const negative = s.startsWith("-");
  const mantissa = s.slice(negative ? 1 : 0, e);
  const [whole = "", fraction = ""] = mantissa.split(".");
  const digits = whole + fraction;
  const point = whole.length + exponent;
  let out: string;
  if (point <= 0) out = `0.${"0".repeat(-point)}${digits}`;
  else if (point >= digits.length) out = digits + "0".repeat(point - digits.length);
  else out = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return negative ? `-${out}` : out;
}

/** A value as JSON, as pdata's `AsRaw` marshals it (bytes as base64, empty as null). */
function valueJson(v: OtlpValue): string {
  switch (v.kind) {
    case "string":
      return JSON.stringify(v.value);
    case "bool":
      return String(v.value);
    case "int":
      return v.value.toString();
    case "double":
      return Number.isFinite(v.value) ? JSON.stringify(v.value) : JSON.stringify(goFloat(v.value));
    case "bytes":
      return JSON.stringify(Buffer.from(v.value).toString("base64"));
    case "array":
      return `[${v.values.map(valueJson).join(",")}]`;
    case "kvlist":
      return `{${v.values.map((kv) => `${JSON.stringify(kv.key)}:${valueJson(kv.value)}`).join(",")}}`;
    case "empty":
      return "null";
  }
}

/** A value as pdata's `AsString`: strings as they are, containers as JSON, empty as "". */
export function valueString(v: OtlpValue): string {
  switch (v.kind) {
    case "string":
      return v.value;
    case "bool":
      return String(v.value);
    case "int":
      return v.value.toString();
    case "double":
      return goFloat(v.value);
    case "bytes":
      return Buffer.from(v.value).toString("base64");
    case "array":
    case "kvlist":
      return valueJson(v);
    case "empty":
      return "";
  }
}

/**
 * An attribute as name-value pairs (Loki's `attributeToLabels`): a map is flattened, each
 * of its keys prefixed with the map's normalised name and `_`, nested maps in turn.
 */
export function attributePairs(key: string, value: OtlpValue, prefix = "", out: LabelPair[] = []) {
  const name = normalizeLabelName(prefix === "" ? key : `${prefix}_${key}`);
  if (value.kind === "kvlist") {
    for (const kv of value.values) attributePairs(kv.key, kv.value, name, out);
  } else if (name !== "") {
    // An empty key names nothing Loki could query: left out, as no label may be nameless.
    out.push({ name, value: valueString(value) });
  }
  return out;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("hex");
}

function isZero(bytes: Uint8Array): boolean {
  return bytes.every((b) => b === 0);
}

function metadataOf(attrs: readonly OtlpAttribute[], drop: NameTest, out: LabelPair[]): void {
  for (const { key, value } of attrs) if (!drop(key)) attributePairs(key, value, "", out);
}

/**
 * Maps an export request to streams, grouped by label set in the order they first appear.
 * `nowNs` stamps a record with neither a time nor an observed time. Label and metadata
 * validity is left to the one validation path the streams go through next.
 */
export function otlpStreams(logs: OtlpLogs, limits: OtlpLimits, nowNs: bigint): IncomingStream[] {
  const indexed = nameTest(limits.otlpResourceIndexLabels);
  const dropResource = nameTest(limits.otlpResourceDrop);
  const dropScope = nameTest(limits.otlpScopeDrop);
  const dropLog = nameTest(limits.otlpLogDrop);
  const discover = limits.discoverServiceName;
  const streams = new Map<string, { labels: Label[]; entries: IncomingEntry[] }>();
  for (const rl of logs.resourceLogs) {
    const labels = new Map<string, string>();
    const resourceMetadata: LabelPair[] = [];
    const serviceName = rl.resource.attributes.find((a) => a.key === "service.name");
    let named = serviceName !== undefined && valueString(serviceName.value) !== "";
    for (const { key, value } of rl.resource.attributes) {
      if (dropResource(key)) continue;
      const pairs = attributePairs(key, value);
      if (!indexed(key)) {
        resourceMetadata.push(...pairs);
        continue;
      }
      for (const pair of pairs) {
        labels.set(pair.name, pair.value);
        if (!named && discover.includes(pair.name)) {
          labels.set("service_name", pair.value);
          named = true;
        }
      }
    }
    if (!named && discover.length > 0) labels.set("service_name", UNKNOWN_SERVICE);
    const sorted: Label[] = [...labels]
      .filter(([, value]) => value !== "")
      .map(([name, value]) => ({ name, value }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const text = labelsString(sorted);
    let stream = streams.get(text);
    if (stream === undefined) streams.set(text, (stream = { labels: sorted, entries: [] }));
    for (const sl of rl.scopeLogs) {
      const scopeMetadata: LabelPair[] = [];
      metadataOf(sl.scope.attributes, dropScope, scopeMetadata);
      const { name, version, droppedAttributesCount } = sl.scope;
      if (name !== "") scopeMetadata.push({ name: "scope_name", value: name });
      if (version !== "") scopeMetadata.push({ name: "scope_version", value: version });
      if (droppedAttributesCount !== 0) {
        scopeMetadata.push({
          name: "scope_dropped_attributes_count",
          value: String(droppedAttributesCount),
        });
      }
      for (const r of sl.logRecords) {
        const metadata: LabelPair[] = [];
        metadataOf(r.attributes, dropLog, metadata);
        if (r.timeUnixNano !== 0n && r.observedTimeUnixNano !== 0n) {
          metadata.push({ name: "observed_timestamp", value: r.observedTimeUnixNano.toString() });
        }
        if (r.severityNumber !== 0) {
          metadata.push({ name: "severity_number", value: String(r.severityNumber) });
        }
        if (r.severityText !== "") metadata.push({ name: "severity_text", value: r.severityText });
        if (r.droppedAttributesCount !== 0) {
          metadata.push({
            name: "dropped_attributes_count",
            value: String(r.droppedAttributesCount),
          });
        }
        if (r.flags !== 0) metadata.push({ name: "flags", value: String(r.flags) });
        if (r.traceId.length > 0 && !isZero(r.traceId)) {
          metadata.push({ name: "trace_id", value: hex(r.traceId) });
        }
        if (r.spanId.length > 0 && !isZero(r.spanId)) {
          metadata.push({ name: "span_id", value: hex(r.spanId) });
        }
        metadata.push(...resourceMetadata, ...scopeMetadata);
        const timestampNs =
          r.timeUnixNano !== 0n
            ? r.timeUnixNano
            : r.observedTimeUnixNano !== 0n
              ? r.observedTimeUnixNano
              : nowNs;
        stream.entries.push({
          // As Loki's int64 conversion: past 2^63 wraps negative, and is refused as too old.
          timestampNs: BigInt.asIntN(64, timestampNs),
          line: valueString(r.body),
          structuredMetadata: metadata,
        });
      }
    }
  }
  return [...streams.entries()]
    .filter(([, s]) => s.entries.length > 0)
    .map(([text, s]) => ({ labelsText: text, labels: s.labels, entries: s.entries }));
}
