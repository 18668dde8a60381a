/**
 * Loki's JSON shapes of query answers (`pkg/util/marshal/query.go`): streams of
 * `["<ns>", "line"]` values, or, with the `categorize-labels` encoding flag, streams keyed
 * by their stream labels only and values `["<ns>", "line", {"structuredMetadata": {...},
 * "parsed": {...}}]` (each part present only when not empty).
 */
import type { Matrix, Vector } from "@sieve/logql";
import type { QueryExplain } from "./explain.js";
import type { ResultEntry } from "./querier.js";

/** Loki's response encoding flag that splits labels by origin. */
export const FLAG_CATEGORIZE_LABELS = "categorize-labels";

/** One entry of a Loki stream: `[ns, line]` or `[ns, line, categories]`. */
export type StreamValue =
  | [string, string]
  | [
      string,
      string,
      { structuredMetadata?: Record<string, string>; parsed?: Record<string, string> },
    ];

/** A Loki stream. */
export interface LokiStream {
  stream: Record<string, string>;
  values: StreamValue[];
}

function sortedRecord(labels: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(labels).sort()) out[k] = labels[k]!;
  return out;
}

/** Splits an entry's labels: unchanged stream labels, unchanged metadata, the rest parsed. */
export function categorize(e: ResultEntry): {
  stream: Record<string, string>;
  structuredMetadata: Record<string, string>;
  parsed: Record<string, string>;
} {
  const stream: Record<string, string> = {};
  const structuredMetadata: Record<string, string> = {};
  const parsed: Record<string, string> = {};
  for (const k of Object.keys(e.labels).sort()) {
    const v = e.labels[k]!;
    if (e.stream[k] === v && !Object.hasOwn(e.metadata, k)) stream[k] = v;
    else if (e.metadata[k] === v) structuredMetadata[k] = v;
    else parsed[k] = v;
  }
  return { stream, structuredMetadata, parsed };
}

/**
 * Groups entries (already in the answer's order) into Loki streams: by their full label
 * set, or, categorized, by their stream labels. Streams come out sorted by labels.
 */
export function toStreams(entries: readonly ResultEntry[], categorized: boolean): LokiStream[] {
  const streams = new Map<string, LokiStream>();
  for (const e of entries) {
    let labels: Record<string, string>;
    let value: StreamValue;
    const ts = e.timestamp.toString();
    if (categorized) {
      const c = categorize(e);
      labels = c.stream;
      const extra: {
        structuredMetadata?: Record<string, string>;
        parsed?: Record<string, string>;
      } = {};
      if (Object.keys(c.structuredMetadata).length > 0)
        extra.structuredMetadata = c.structuredMetadata;
      if (Object.keys(c.parsed).length > 0) extra.parsed = c.parsed;
      value = [ts, e.line, extra];
    } else {
      labels = sortedRecord(e.labels);
      value = [ts, e.line];
    }
    const key = JSON.stringify(labels);
    let s = streams.get(key);
    if (s === undefined) streams.set(key, (s = { stream: labels, values: [] }));
    s.values.push(value);
  }
  return [...streams.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s);
}

/** The body of a successful query answer; `explain` (Sieve's) when the query asked. */
export function queryResponse(
  resultType: "streams" | "matrix" | "vector",
  result: LokiStream[] | Matrix | Vector,
  stats: Record<string, unknown>,
  flags: readonly string[],
  explain?: QueryExplain,
): Record<string, unknown> {
  return {
    status: "success",
    data: {
      resultType,
      ...(flags.length > 0 && { encodingFlags: flags }),
      result,
      stats,
      ...(explain !== undefined && { explain }),
    },
  };
}

/**
 * Loki's `interval` of a log query: within each stream, keep only entries at least
 * `interval` apart in the answer's direction.
 */
export function applyInterval(entries: readonly ResultEntry[], intervalNs: bigint): ResultEntry[] {
  if (intervalNs <= 0n) return [...entries];
  const last = new Map<string, bigint>();
  const out: ResultEntry[] = [];
  for (const e of entries) {
    const key = JSON.stringify(sortedRecord(e.labels));
    const prev = last.get(key);
    if (prev !== undefined) {
      const gap = e.timestamp > prev ? e.timestamp - prev : prev - e.timestamp;
      if (gap < intervalNs) continue;
    }
    last.set(key, e.timestamp);
    out.push(e);
  }
  return out;
}
