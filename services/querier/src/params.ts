/**
 * Query parameters parsed as Loki parses them (`pkg/loghttp/params.go`, `query.go`,
 * `series.go`), with Loki's error texts, so a client sees the same 400 from Sieve as from
 * Loki. Times are Unix nanoseconds as bigint; durations nanoseconds as bigint.
 *
 * Written by hand: the formats are Go's (`strconv.ParseInt`, `strconv.ParseFloat`,
 * `time.RFC3339Nano`, Prometheus' `model.ParseDuration`) and their error texts are part of
 * the API; no npm parser reproduces both.
 */

/** A parameter Loki would refuse with 400; `message` is Loki's text. */
export class ParamError extends Error {
  override readonly name = "ParamError";
  readonly status = 400;
}

/** Loki's default `limit`. */
const DEFAULT_LIMIT = 100;
/** Loki's default lookback when `start` and `since` are absent: 1h. */
export const DEFAULT_SINCE_NS = 3_600_000_000_000n;
/** Loki's cap on points per series of a range query. */
export const MAX_POINTS = 11_000n;

const NS_PER_S = 1_000_000_000n;
const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);

const ERR_END_BEFORE_START = "end timestamp must not be before or equal to start time";
const ERR_ZERO_OR_NEGATIVE_STEP =
  "zero or negative query resolution step widths are not accepted. Try a positive integer";
const ERR_STEP_TOO_SMALL =
  "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter";
const ERR_NEGATIVE_INTERVAL = "interval must be >= 0";

/** Log query direction. */
export type Direction = "forward" | "backward";

/** Query string values, as Go's `url.Values`: every value of a repeated key. */
export type Form = URLSearchParams;

function get(form: Form, key: string): string {
  return form.get(key) ?? "";
}

const goQuote = (s: string): string => JSON.stringify(s);

/** Go's `strconv.ParseInt(value, 10, 64)`; `fn` names the function in the error. */
export function goParseInt(value: string, fn = "ParseInt"): bigint {
  if (!/^[+-]?\d+$/.test(value)) {
    throw new ParamError(`strconv.${fn}: parsing ${goQuote(value)}: invalid syntax`);
  }
  const n = BigInt(value);
  if (n > MAX_INT64 || n < MIN_INT64) {
    throw new ParamError(`strconv.${fn}: parsing ${goQuote(value)}: value out of range`);
  }
  return n;
}

/**
 * Go's `strconv.ParseFloat(value, 64)` for decimal and special forms: the value, or the
 * error's reason (`invalid syntax`, or `value out of range` past float64).
 */
function goParseFloat(value: string): number | "invalid syntax" | "value out of range" {
  if (/^[+-]?(inf|infinity)$/i.test(value)) return value.startsWith("-") ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(value)) return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) return "invalid syntax";
  const n = Number(value);
  return Number.isFinite(n) ? n : "value out of range";
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Go's `time.Parse(time.RFC3339Nano, value)`, as Unix ns; undefined when it does not parse. */
function parseRfc3339(value: string): bigint | undefined {
  const m = RFC3339.exec(value);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, frac = "", , sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetS = 0;
  if (sign !== undefined) {
    if (Number(oh) > 23 || Number(om) > 59) return undefined;
    offsetS = (Number(oh) * 3600 + Number(om) * 60) * (sign === "-" ? -1 : 1);
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const seconds = BigInt(date.getTime() / 1000 - offsetS);
  return seconds * NS_PER_S + BigInt(frac.padEnd(9, "0") || "0");
}

/**
 * Loki's `parseTimestamp`: RFC 3339 (nanoseconds kept); a number with a dot as float
 * seconds (milliseconds kept) or, above 1e10, as nanoseconds; an integer as seconds up to
 * 1e10, nanoseconds above.
 */
export function parseTimestamp(value: string, def: bigint): bigint {
  if (value === "") return def;
  const rfc = parseRfc3339(value);
  if (rfc !== undefined) return rfc;
  if (value.includes(".")) {
    const t = goParseFloat(value);
    if (typeof t === "string")
      throw new ParamError(`strconv.ParseFloat: parsing ${goQuote(value)}: ${t}`);
    if (!Number.isFinite(t)) throw new ParamError("floating point timestamp is NaN or Inf");
    const high = Math.trunc(t);
    if (high > 2 ** 63 || high < -(2 ** 63)) {
      throw new ParamError("floating point timestamp exceeds integer range");
    }
    if (high <= 1e10) {
      const low = Math.round((t - high) * 1000) / 1000;
      return BigInt(high) * NS_PER_S + BigInt(Math.trunc(low * 1e9));
    }
    return BigInt(high);
  }
  const n = goParseInt(value);
  return n <= 10_000_000_000n ? n * NS_PER_S : n;
}

const PROM_DURATION =
  /^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$/;
const PROM_UNITS_MS = [
  365n * 86_400_000n,
  7n * 86_400_000n,
  86_400_000n,
  3_600_000n,
  60_000n,
  1000n,
  1n,
];

/** Prometheus' `model.ParseDuration` (`1h30m`, `7d`, `0`), in ns; Prometheus' error texts. */
export function parsePromDuration(value: string): bigint {
  if (value === "") throw new ParamError("empty duration string");
  if (value === "0") return 0n;
  const m = PROM_DURATION.exec(value);
  if (m === null) throw new ParamError(`not a valid duration string: ${goQuote(value)}`);
  let ms = 0n;
  for (let i = 0; i < PROM_UNITS_MS.length; i++) {
    const part = m[i + 1];
    if (part !== undefined) ms += BigInt(part) * PROM_UNITS_MS[i]!;
  }
  if (ms * 1_000_000n > MAX_INT64) throw new ParamError("duration out of range");
  return ms * 1_000_000n;
}

/** Loki's `parseSecondsOrDuration` for `step` and `interval`: float seconds, or a duration. */
export function parseSecondsOrDuration(value: string): bigint {
  const f = goParseFloat(value);
  if (typeof f === "number" && !Number.isNaN(f)) {
    const ns = f * 1e9;
    if (ns > 2 ** 63 || ns < -(2 ** 63)) {
      throw new ParamError(
        `cannot parse ${goQuote(value)} to a valid duration. It overflows int64`,
      );
    }
    return BigInt(Math.trunc(ns));
  }
  try {
    return parsePromDuration(value);
  } catch {
    throw new ParamError(`cannot parse ${goQuote(value)} to a valid duration`);
  }
}

/** Loki's `limit`: default 100, a positive integer. */
export function parseLimit(form: Form): number {
  const raw = get(form, "limit");
  if (raw === "") return DEFAULT_LIMIT;
  const n = goParseInt(raw, "Atoi");
  if (n <= 0n) throw new ParamError("limit must be a positive value");
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

/** Loki's `direction`: `forward` or `backward` in any case, backward by default. */
function parseDirection(form: Form): Direction {
  const raw = get(form, "direction");
  if (raw === "") return "backward";
  const upper = raw.toUpperCase();
  if (upper === "FORWARD") return "forward";
  if (upper === "BACKWARD") return "backward";
  throw new ParamError(`invalid direction '${raw}'`);
}

/**
 * Loki's `determineBounds`: `end` defaults to now; `start` to `min(end, now) - since`
 * (`since` defaults to 1h). Errors name the parameter as Loki does.
 */
export function parseBounds(form: Form, nowNs: bigint): { start: bigint; end: bigint } {
  let since = DEFAULT_SINCE_NS;
  const sinceRaw = get(form, "since");
  if (sinceRaw !== "") {
    try {
      since = parsePromDuration(sinceRaw);
    } catch (error) {
      throw new ParamError(`could not parse 'since' parameter: ${(error as Error).message}`);
    }
  }
  let end: bigint;
  try {
    end = parseTimestamp(get(form, "end"), nowNs);
  } catch (error) {
    throw new ParamError(`could not parse 'end' parameter: ${(error as Error).message}`);
  }
  const endOrNow = end > nowNs ? nowNs : end;
  let start: bigint;
  try {
    start = parseTimestamp(get(form, "start"), endOrNow - since);
  } catch (error) {
    throw new ParamError(`could not parse 'start' parameter: ${(error as Error).message}`);
  }
  return { start, end };
}

/** Loki's default step of a range query: range / 250 in whole seconds, at least 1 s. */
export function defaultStep(start: bigint, end: bigint): bigint {
  const seconds = Math.max(Math.floor(Number(end - start) / 1e9 / 250), 1);
  return BigInt(seconds) * NS_PER_S;
}

/** A parsed `query_range` request. */
export interface RangeQuery {
  query: string;
  start: bigint;
  end: bigint;
  step: bigint;
  interval: bigint;
  limit: number;
  direction: Direction;
}

/** Loki's `ParseRangeQuery`, in Loki's order of checks. */
export function parseRangeQuery(form: Form, nowNs: bigint): RangeQuery {
  const query = get(form, "query");
  const { start, end } = parseBounds(form, nowNs);
  if (end < start) throw new ParamError(ERR_END_BEFORE_START);
  const limit = parseLimit(form);
  const direction = parseDirection(form);
  const stepRaw = get(form, "step");
  const step = stepRaw === "" ? defaultStep(start, end) : parseSecondsOrDuration(stepRaw);
  if (step <= 0n) throw new ParamError(ERR_ZERO_OR_NEGATIVE_STEP);
  if ((end - start) / step > MAX_POINTS) throw new ParamError(ERR_STEP_TOO_SMALL);
  const intervalRaw = get(form, "interval");
  const interval = intervalRaw === "" ? 0n : parseSecondsOrDuration(intervalRaw);
  if (interval < 0n) throw new ParamError(ERR_NEGATIVE_INTERVAL);
  return { query, start, end, step, interval, limit, direction };
}

/** A parsed instant `query` request. */
export interface InstantQuery {
  query: string;
  time: bigint;
  limit: number;
  direction: Direction;
}

/** Loki's `ParseInstantQuery`: `time` defaults to now. */
export function parseInstantQuery(form: Form, nowNs: bigint): InstantQuery {
  const query = get(form, "query");
  const limit = parseLimit(form);
  let time: bigint;
  try {
    time = parseTimestamp(get(form, "time"), nowNs);
  } catch (error) {
    throw new ParamError((error as Error).message);
  }
  const direction = parseDirection(form);
  return { query, time, limit, direction };
}

const GO_TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const GO_FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/**
 * Sieve's own `explain` parameter of `query_range` and `query` (see explain.ts), read as Go's
 * `strconv.ParseBool`; absent or empty is false.
 */
export function parseExplain(form: Form): boolean {
  const raw = get(form, "explain");
  if (raw === "" || GO_FALSE.has(raw)) return false;
  if (GO_TRUE.has(raw)) return true;
  throw new ParamError(`strconv.ParseBool: parsing ${goQuote(raw)}: invalid syntax`);
}

/**
 * The selectors of a series request: `match[]` (Prometheus) and `match` (logcli), deduped
 * and sorted; a lone `{}` means every series, as Loki's `ParseSeriesQuery`.
 */
export function seriesMatchers(form: Form): string[] {
  const all = [...new Set([...form.getAll("match"), ...form.getAll("match[]")])].sort();
  if (all.length === 1 && all[0]!.replaceAll(" ", "") === "{}") return [];
  return all;
}

/** Unix ns of now. */
export function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

/** A parsed `patterns` request. */
export interface PatternsQuery {
  query: string;
  start: bigint;
  end: bigint;
  step: bigint;
}

/**
 * Loki's `ParsePatternsQuery`: `query`, the bounds, and `step` (default as a range query's),
 * refused when not positive or past 11,000 points.
 */
export function parsePatternsQuery(form: Form, nowNs: bigint): PatternsQuery {
  const query = get(form, "query");
  const { start, end } = parseBounds(form, nowNs);
  if (end < start) throw new ParamError(ERR_END_BEFORE_START);
  const stepRaw = get(form, "step");
  const step = stepRaw === "" ? defaultStep(start, end) : parseSecondsOrDuration(stepRaw);
  if (step <= 0n) throw new ParamError(ERR_ZERO_OR_NEGATIVE_STEP);
  if ((end - start) / step > MAX_POINTS) throw new ParamError(ERR_STEP_TOO_SMALL);
  return { query, start, end, step };
}
