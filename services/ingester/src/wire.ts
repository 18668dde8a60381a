/**
 * The JSON of the internal HTTP API between queriers and ingesters: the contract's
 * requests and answers with bigints as decimal strings. Parsing is strict: a bad field is
 * an `invalid_request` naming it.
 */
import { IngesterError } from "./errors.js";
import type { IngesterQueryRequest, IngesterSeriesRequest, IngesterStream } from "./query.js";

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

function field(body: Record<string, unknown>, name: string): unknown {
  return body[name];
}

function bigintField(body: Record<string, unknown>, name: string, unsigned = false): bigint {
  const v = field(body, name);
  if (typeof v !== "string" || !/^-?[0-9]{1,20}$/.test(v)) {
    throw new IngesterError("invalid_request", `${name} must be a decimal string`);
  }
  const n = BigInt(v);
  const [min, max] = unsigned ? [0n, (1n << 64n) - 1n] : [INT64_MIN, INT64_MAX];
  if (n < min || n > max) throw new IngesterError("invalid_request", `${name} out of range`);
  return n;
}

function stringField(body: Record<string, unknown>, name: string, maxLength: number): string {
  const v = field(body, name);
  if (typeof v !== "string" || v.length === 0 || v.length > maxLength) {
    throw new IngesterError("invalid_request", `${name} must be a string of 1..${maxLength}`);
  }
  return v;
}

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new IngesterError("invalid_request", "body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

function checkRange(start: bigint, end: bigint): void {
  if (end < start) throw new IngesterError("invalid_request", "end before start");
}

/** Parses a query request body. */
export function parseQueryRequest(body: unknown): IngesterQueryRequest {
  const b = object(body);
  const direction = field(b, "direction");
  if (direction !== "forward" && direction !== "backward") {
    throw new IngesterError("invalid_request", "direction must be forward or backward");
  }
  const limit = field(b, "limit");
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
    throw new IngesterError("invalid_request", "limit must be an integer ≥ 0");
  }
  const query = field(b, "query");
  if (query !== undefined && (typeof query !== "string" || query.length > 65536)) {
    throw new IngesterError("invalid_request", "query must be a string");
  }
  const req = {
    tenant: stringField(b, "tenant", 256),
    selector: stringField(b, "selector", 65536),
    start: bigintField(b, "start"),
    end: bigintField(b, "end"),
    direction,
    limit,
    ...(query !== undefined && { query }),
  } as const;
  checkRange(req.start, req.end);
  return req;
}

/** Parses a series request body. */
export function parseSeriesRequest(body: unknown): IngesterSeriesRequest {
  const b = object(body);
  const selector = field(b, "selector");
  if (selector !== undefined && (typeof selector !== "string" || selector.length > 65536)) {
    throw new IngesterError("invalid_request", "selector must be a string");
  }
  const req = {
    tenant: stringField(b, "tenant", 256),
    start: bigintField(b, "start"),
    end: bigintField(b, "end"),
    ...(selector !== undefined && selector !== "" && { selector }),
  };
  checkRange(req.start, req.end);
  return req;
}

/** A query request as JSON. */
export function queryRequestJson(req: IngesterQueryRequest): string {
  return JSON.stringify({
    tenant: req.tenant,
    selector: req.selector,
    start: String(req.start),
    end: String(req.end),
    direction: req.direction,
    limit: req.limit,
    ...(req.query !== undefined && { query: req.query }),
  });
}

/** A series request as JSON. */
export function seriesRequestJson(req: IngesterSeriesRequest): string {
  return JSON.stringify({
    tenant: req.tenant,
    ...(req.selector !== undefined && { selector: req.selector }),
    start: String(req.start),
    end: String(req.end),
  });
}

/** A query answer as JSON: `{"streams":[{"labels","fingerprint","entries":[…]}]}`. */
export function streamsJson(streams: readonly IngesterStream[]): string {
  return JSON.stringify({
    streams: streams.map((s) => ({
      labels: s.labels,
      fingerprint: String(s.fingerprint),
      entries: s.entries.map((e) => ({
        timestamp: String(e.timestamp),
        line: e.line,
        structuredMetadata: e.structuredMetadata,
      })),
    })),
  });
}

/** A series answer as JSON: `{"series":[{"labels","fingerprint"}]}`. */
export function seriesJson(series: readonly { labels: string; fingerprint: bigint }[]): string {
  return JSON.stringify({
    series: series.map((s) => ({ labels: s.labels, fingerprint: String(s.fingerprint) })),
  });
}

/** Parses a query answer (what {@link streamsJson} wrote). */
export function parseStreams(body: unknown): IngesterStream[] {
  const b = object(body);
  if (!Array.isArray(b.streams)) throw new IngesterError("upstream", "no streams array");
  return (b.streams as unknown[]).map((raw) => {
    const s = object(raw);
    if (typeof s.labels !== "string" || !Array.isArray(s.entries)) {
      throw new IngesterError("upstream", "malformed stream");
    }
    return {
      labels: s.labels,
      fingerprint: bigintField(s, "fingerprint", true),
      entries: (s.entries as unknown[]).map((rawEntry) => {
        const e = object(rawEntry);
        const md = object(e.structuredMetadata);
        if (typeof e.line !== "string") throw new IngesterError("upstream", "malformed entry");
        const structuredMetadata: Record<string, string> = {};
        for (const [k, v] of Object.entries(md)) structuredMetadata[k] = String(v);
        return { timestamp: bigintField(e, "timestamp"), line: e.line, structuredMetadata };
      }),
    };
  });
}

/** Parses a series answer (what {@link seriesJson} wrote). */
export function parseSeries(body: unknown): { labels: string; fingerprint: bigint }[] {
  const b = object(body);
  if (!Array.isArray(b.series)) throw new IngesterError("upstream", "no series array");
  return (b.series as unknown[]).map((raw) => {
    const s = object(raw);
    if (typeof s.labels !== "string") throw new IngesterError("upstream", "malformed series");
    return { labels: s.labels, fingerprint: bigintField(s, "fingerprint", true) };
  });
}
