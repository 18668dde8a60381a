/**
 * Read requests for the fuzzers: LogQL from a small grammar (selectors, pipelines, range
 * and vector aggregations, binary operations), often mutated, sometimes random characters,
 * sent to every read endpoint with odd start/end/limit/step/direction values, on GET and
 * on POST forms.
 */
import type { FuzzRequest } from "./push.test-helper.js";
import { FUZZ_APPS, FUZZ_LABELS } from "./push.test-helper.js";
import { type Rng, mutateText, nastyString } from "./random.test-helper.js";

/** The read endpoints, each with its weight in the mix. */
const ENDPOINTS = {
  query_range: 30,
  query: 15,
  labels: 10,
  "label-values": 10,
  series: 15,
  "index-stats": 10,
} as const;

const VALUES = ["fz", "fz-a", "prod", "dev", "", "x", "ünï", 'a"b', "\\", "\ud800", ...FUZZ_APPS];
const REGEXES = [".*", "fz.*", ".+", "(a|b)+", "[", "(?i)FZ", "a{1000}", "(a*)*b", "\\", "fz|dev"];
const DURATIONS = ["1s", "1m", "5m", "1h", "0s", "1d", "100000h", "1ms", "-1m", "1.5h", "1y"];

function quoted(rng: Rng, value: string): string {
  if (rng.chance(0.1) && !value.includes("`")) return `\`${value}\``;
  return JSON.stringify(value);
}

/**
 * A stream selector: `{...}` with 0–3 matchers of every operator; usually the first is a
 * positive matcher of a pushed `app`, as Loki requires one, so most queries get past it.
 */
export function selector(rng: Rng): string {
  const n = rng.chance(0.05) ? 0 : rng.int(1, 3);
  const matchers = Array.from({ length: n }, (_, i) => {
    if (i === 0 && rng.chance(0.8)) {
      return rng.chance(0.8) ? `app=${quoted(rng, rng.pick(FUZZ_APPS))}` : 'app=~"fz.*"';
    }
    const name = rng.chance(0.9) ? rng.pick(FUZZ_LABELS) : rng.pick(["__name__", "a", "0", "x-y"]);
    const op = rng.pick(["=", "!=", "=~", "!~"] as const);
    const value = op.includes("~") ? rng.pick(REGEXES) : rng.pick(VALUES);
    return `${name}${op}${quoted(rng, value)}`;
  });
  return `{${matchers.join(", ")}}`;
}

function stage(rng: Rng): string {
  return rng.pick([
    () => `|= ${quoted(rng, rng.pick(["GET", "status", "", "ü", "x"]))}`,
    () => `!= "level=warn"`,
    () => `|~ ${quoted(rng, rng.pick(REGEXES))}`,
    () => `!~ ${quoted(rng, rng.pick(REGEXES))}`,
    () => `|= ip("10.0.0.0/8")`,
    () => "| json",
    () => "| logfmt",
    () => '| json a="b.c", d="[0]"',
    () => '| regexp "(?P<method>\\\\w+) (?P<path>\\\\S+)"',
    () => '| pattern "<method> <path> <_>"',
    () => "| unpack",
    () => '| line_format "{{.app}} {{__line__}}"',
    () => '| line_format "{{ repeat 3 \\"a\\" }}"',
    () => '| label_format n="{{.app}}"',
    () => "| drop k",
    () => "| keep app, level",
    () => "| decolorize",
    () => "| status >= 500",
    () => "| dur > 1s",
    () => '| level = "x" or level = "warn"',
    () => "| size > 20KB",
    () => `| trace_id=${quoted(rng, `t${rng.int(0, 60)}`)}`,
    () => '| __error__=""',
  ])();
}

/** A log query: a selector and 0–4 pipeline stages. */
export function logExpr(rng: Rng): string {
  const stages = Array.from({ length: rng.int(0, 4) }, () => stage(rng));
  return [selector(rng), ...stages].join(" ");
}

function rangeAgg(rng: Rng): string {
  const range = `[${rng.pick(DURATIONS)}]${rng.chance(0.1) ? ` offset ${rng.pick(DURATIONS)}` : ""}`;
  if (rng.chance(0.3)) {
    const fn = rng.pick(["sum_over_time", "avg_over_time", "max_over_time", "stddev_over_time"]);
    const unwrap = rng.pick(["dur", "status", "duration(dur)", "bytes(size)"]);
    if (rng.chance(0.2))
      return `quantile_over_time(0.9, ${logExpr(rng)} | logfmt | unwrap ${unwrap} ${range})`;
    return `${fn}(${logExpr(rng)} | logfmt | unwrap ${unwrap} ${range})`;
  }
  const fn = rng.pick([
    "count_over_time",
    "rate",
    "bytes_over_time",
    "bytes_rate",
    "absent_over_time",
  ]);
  return `${fn}(${logExpr(rng)} ${range})`;
}

/** A metric query up to `depth` levels of aggregation and binary operations deep. */
export function metricExpr(rng: Rng, depth = 3): string {
  if (depth <= 0 || rng.chance(0.35)) return rangeAgg(rng);
  switch (rng.pick(["agg", "binary", "scalar", "topk", "vector", "label_replace"] as const)) {
    case "agg": {
      const op = rng.pick(["sum", "avg", "min", "max", "count", "stddev", "sort", "sort_desc"]);
      const by = rng.chance(0.5)
        ? ` by (${rng.pick(FUZZ_LABELS)})`
        : rng.chance(0.2)
          ? " without (k)"
          : "";
      return `${op}${by} (${metricExpr(rng, depth - 1)})`;
    }
    case "binary": {
      const op = rng.pick([
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "==",
        "!=",
        ">",
        "<",
        ">=",
        "<=",
        "and",
        "or",
        "unless",
      ]);
      const bool = ["==", "!=", ">", "<"].includes(op) && rng.chance(0.3) ? " bool" : "";
      return `${metricExpr(rng, depth - 1)} ${op}${bool} ${rng.chance(0.3) ? String(rng.int(-2, 100)) : metricExpr(rng, depth - 1)}`;
    }
    case "scalar":
      return rng.pick(["1", "1 + 1", "-1.5e3", "0 / 0", "2 ^ 1024"]);
    case "topk":
      return `${rng.pick(["topk", "bottomk"])}(${rng.int(-1, 5)}, ${metricExpr(rng, depth - 1)})`;
    case "vector":
      return "vector(1)";
    case "label_replace":
      return `label_replace(${metricExpr(rng, depth - 1)}, "dst", "$1", "app", "(.*)")`;
  }
}

/** A query string: grammar-made, then 25% mutated; 5% random characters. */
export function queryText(rng: Rng, metricShare = 0.4): string {
  if (rng.chance(0.05)) return nastyString(rng, rng.int(0, 80));
  const text = rng.chance(metricShare) ? metricExpr(rng) : logExpr(rng);
  return rng.chance(0.25) ? mutateText(rng, text, rng.int(1, 3)) : text;
}

/** A time parameter: usually a window edge in nanoseconds, often something odd. */
function time(rng: Rng, ms: number): string {
  return rng.pick([
    () => String(BigInt(ms) * 1_000_000n),
    () => String(BigInt(ms) * 1_000_000n),
    () => String(ms / 1000),
    () => new Date(ms).toISOString(),
    () => "0",
    () => "-1",
    () => "9999999999999999999999",
    () => "1e400",
    () => "NaN",
    () => "abc",
    () => "",
    () => "2024-13-45T99:99:99Z",
    () => String(Number.MAX_SAFE_INTEGER),
  ])();
}

/** A window of query parameters around `nowMs`, sometimes inverted, sometimes absurd. */
function window(rng: Rng, nowMs: number): Record<string, string> {
  const startMs =
    nowMs - (rng.chance(0.05) ? 40 * 86_400_000 : rng.pick([60_000, 3_600_000, 86_400_000]));
  const endMs = rng.chance(0.1) ? startMs - 1000 : nowMs + 60_000;
  const out: Record<string, string> = {};
  if (rng.chance(0.95))
    out.start = rng.chance(0.9) ? String(BigInt(startMs) * 1_000_000n) : time(rng, startMs);
  if (rng.chance(0.95))
    out.end = rng.chance(0.9) ? String(BigInt(endMs) * 1_000_000n) : time(rng, endMs);
  return out;
}

/** Usually one of `usual`, one time in ten one of `odd`. */
function param(rng: Rng, usual: readonly string[], odd: readonly string[]): string {
  return rng.chance(0.9) ? rng.pick(usual) : rng.pick(odd);
}

const LIMITS = [
  ["100", "1", "1000", "5000"],
  ["0", "-1", "5001", "1e3", "abc", "99999999999", "1.5", ""],
] as const;
const STEPS = [
  ["60", "15s", "1m", "300"],
  ["1", "0", "-5", "1ms", "0.001", "1e-9", "abc", "100000000", ""],
] as const;
const DIRECTIONS = [
  ["forward", "backward"],
  ["FORWARD", "sideways", ""],
] as const;

/** The read request of case `rng` around `nowMs`. */
export function queryCase(rng: Rng, nowMs: number): FuzzRequest {
  const kind = rng.weighted(ENDPOINTS);
  const params: [string, string][] = [];
  const add = (name: string, value: string): void => {
    params.push([name, value]);
  };
  let path: string;
  switch (kind) {
    case "query_range": {
      path = "/loki/api/v1/query_range";
      add("query", queryText(rng));
      for (const [k, v] of Object.entries(window(rng, nowMs))) add(k, v);
      if (rng.chance(0.6)) add("limit", param(rng, ...LIMITS));
      if (rng.chance(0.5)) add("step", param(rng, ...STEPS));
      if (rng.chance(0.1)) add("interval", param(rng, ...STEPS));
      if (rng.chance(0.4)) add("direction", param(rng, ...DIRECTIONS));
      break;
    }
    case "query": {
      path = "/loki/api/v1/query";
      add("query", queryText(rng, 0.6));
      if (rng.chance(0.8)) add("time", time(rng, nowMs));
      if (rng.chance(0.4)) add("limit", param(rng, ...LIMITS));
      if (rng.chance(0.3)) add("direction", param(rng, ...DIRECTIONS));
      break;
    }
    case "labels": {
      path = "/loki/api/v1/labels";
      for (const [k, v] of Object.entries(window(rng, nowMs))) add(k, v);
      if (rng.chance(0.4)) add("query", rng.chance(0.7) ? selector(rng) : queryText(rng));
      break;
    }
    case "label-values": {
      // Lone surrogates cannot be percent-encoded: they become U+FFFD; raw escapes of
      // invalid UTF-8 and path tricks go in as they are.
      const name = rng.chance(0.8)
        ? rng.pick(FUZZ_LABELS)
        : rng.chance(0.7)
          ? encodeURIComponent(
              nastyString(rng, rng.int(1, 10)).replace(/[\ud800-\udfff]/g, "\ufffd"),
            )
          : rng.pick(["%ff%fe", "%00", "..%2f..", "%", "a%2Fb", "%c0%af"]);
      path = `/loki/api/v1/label/${name}/values`;
      for (const [k, v] of Object.entries(window(rng, nowMs))) add(k, v);
      if (rng.chance(0.4)) add("query", rng.chance(0.7) ? selector(rng) : queryText(rng));
      break;
    }
    case "series": {
      path = "/loki/api/v1/series";
      const name = rng.chance(0.8) ? "match[]" : "match";
      const n = rng.int(rng.chance(0.05) ? 0 : 1, 3);
      for (let i = 0; i < n; i++) add(name, rng.chance(0.7) ? selector(rng) : queryText(rng));
      for (const [k, v] of Object.entries(window(rng, nowMs))) add(k, v);
      break;
    }
    case "index-stats": {
      path = "/loki/api/v1/index/stats";
      add("query", rng.chance(0.7) ? selector(rng) : queryText(rng));
      for (const [k, v] of Object.entries(window(rng, nowMs))) add(k, v);
      break;
    }
  }
  const form = new URLSearchParams(params).toString();
  if (rng.chance(0.2)) {
    return {
      kind,
      method: "POST",
      path,
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: Buffer.from(form),
    };
  }
  return { kind, method: "GET", path: form === "" ? path : `${path}?${form}`, headers: {} };
}
