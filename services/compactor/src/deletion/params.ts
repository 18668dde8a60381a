/**
 * The delete API's parameters, parsed as Loki's `deletion/request_handler.go` parses them,
 * with its defaults and its words: `query` (a log selector, optionally with line filters),
 * `start` (required) and `end` (default now), each unix seconds (exactly 10 characters,
 * as Loki's `timeFromInt`) or RFC3339; `max_interval` (a Go duration, checked only when
 * the query has a line filter).
 */
import { parseDeleteQuery } from "@sieve/logql";

/** A refusal of the delete API: its status and Loki's words. */
export class DeleteApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 500,
    message: string,
  ) {
    super(message);
    this.name = "DeleteApiError";
  }
}

const bad = (message: string): DeleteApiError => new DeleteApiError(400, message);

/** Loki's `delete_max_interval` (24h): the largest `max_interval`. */
export const DELETE_MAX_INTERVAL_MS = 24 * 3_600_000;

/** A request to add, parsed. Times in Unix ms. */
export interface AddParams {
  readonly query: string;
  readonly startMs: number;
  readonly endMs: number;
}

/** Loki's `parseTime`: "" is now; RFC3339; else exactly 10 characters of unix seconds. */
export function parseDeleteTime(text: string, nowMs: number): number | undefined {
  if (text === "") return nowMs;
  if (RFC3339.test(text)) {
    const ms = Date.parse(text);
    if (Number.isFinite(ms)) return ms;
  }
  if (text.length !== 10) return undefined;
  // util.ParseTime: float seconds, the fraction rounded to milliseconds.
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
    const seconds = Number(text);
    const whole = Math.trunc(seconds);
    return whole * 1000 + Math.round((seconds - whole) * 1000);
  }
  return undefined;
}

/** Go's `time.RFC3339` layout, which also takes a fraction of a second. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** The parameters of `POST /loki/api/v1/delete`, checked in Loki's order. */
export function parseAddParams(params: URLSearchParams, nowMs: number): AddParams {
  const query = params.get("query") ?? "";
  if (query === "") throw bad("query not set");
  let hasFilter: boolean;
  try {
    hasFilter = parseDeleteQuery(query).pipeline.length > 0;
  } catch {
    throw bad("invalid query expression");
  }
  const startText = params.get("start") ?? "";
  if (startText === "") throw bad("start time not set");
  const startMs = parseDeleteTime(startText, nowMs);
  if (startMs === undefined)
    throw bad("invalid start time: require unix seconds or RFC3339 format");
  const endMs = parseDeleteTime(params.get("end") ?? "", nowMs);
  if (endMs === undefined) throw bad("invalid end time: require unix seconds or RFC3339 format");
  if (endMs > nowMs) throw bad("deletes in the future are not allowed");
  if (startMs >= endMs) throw bad("start time can't be greater than or equal to end time");
  // Loki shards a request with line filters by max_interval; Sieve processes a request
  // whole, but checks the parameter as Loki does so a client gets the same answers.
  const maxInterval = params.get("max_interval") ?? "";
  if (hasFilter && maxInterval !== "") {
    const ms = parseGoDurationMs(maxInterval);
    if (ms === undefined || ms < 1000) {
      throw bad("invalid max_interval: valid time units are 's', 'm', 'h'");
    }
    if (ms > DELETE_MAX_INTERVAL_MS) {
      throw bad(`max_interval can't be greater than ${goDuration(DELETE_MAX_INTERVAL_MS)}`);
    }
    if (ms > endMs - startMs) {
      throw bad(
        `max_interval can't be greater than the interval to be deleted (${goDuration(endMs - startMs)})`,
      );
    }
  }
  return { query, startMs, endMs };
}

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's `time.ParseDuration`, in ms; undefined when it does not parse. */
export function parseGoDurationMs(text: string): number | undefined {
  if (text === "0") return 0;
  const m = /^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$/.exec(text);
  if (m === null) return undefined;
  let ms = 0;
  for (const part of text
    .slice(m[1]!.length)
    .matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) {
    ms += Number(part[1]) * UNIT_MS[part[2]!]!;
  }
  return m[1] === "-" ? -ms : ms;
}

/** Go's `time.Duration.String` of a whole number of ms: `24h0m0s`, `1m30s`, `1.5s`, `500ms`. */
export function goDuration(ms: number): string {
  if (ms === 0) return "0s";
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = rest / 1000;
  const sec = `${s}s`;
  if (h > 0) return `${sign}${h}h${m}m${sec}`;
  if (m > 0) return `${sign}${m}m${sec}`;
  return `${sign}${sec}`;
}
