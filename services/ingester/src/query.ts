/**
 * Queries over the ingester's unflushed data: the contract with the querier (requests and
 * answers, in process or over HTTP) and the pure functions that answer a request from a
 * tenant's streams in memory (heads, chunks waiting for a flush, chunks being flushed).
 */
import type { Entry } from "@sieve/chunk";
import { compilePipeline, matchesLabels, parseExpr } from "@sieve/logql";
import type { Matcher } from "@sieve/logql";
import { IngesterError } from "./errors.js";
import type { CutChunk } from "./flush.js";
import { readEncoded, selectEntries } from "./head.js";
import type { EntryRange, Head } from "./head.js";

/** A query of the ingester's unflushed data (the contract with the querier). */
export interface IngesterQueryRequest {
  readonly tenant: string;
  /** A LogQL stream selector, e.g. `{app="api", env=~"p.*"}`. */
  readonly selector: string;
  /** [start, end), Unix ns. */
  readonly start: bigint;
  readonly end: bigint;
  readonly direction: "forward" | "backward";
  /** Most entries per stream in `direction`; 0 = no limit (bounded by maxEntriesPerQuery). */
  readonly limit: number;
  /**
   * The whole log query (`{…} | pipeline`). When present the ingester keeps only the
   * entries its pipeline keeps before applying `limit`, as Loki's ingesters do; otherwise a
   * needle beyond the first `limit` raw lines would be lost. Entries are still returned raw.
   */
  readonly query?: string;
}

/** One stream's matching entries, sorted in the request's direction. */
export interface IngesterStream {
  /** The canonical label string. */
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly entries: {
    readonly timestamp: bigint;
    readonly line: string;
    readonly structuredMetadata: Record<string, string>;
  }[];
}

/** A series request: streams with data in [start, end), optionally matching a selector. */
export interface IngesterSeriesRequest {
  readonly tenant: string;
  readonly selector?: string;
  readonly start: bigint;
  readonly end: bigint;
}

/** What the querier calls; in-process ({@link Ingester}) or over HTTP (`IngesterHttpClient`). */
export interface IngesterQuerier {
  query(req: IngesterQueryRequest): Promise<IngesterStream[]>;
  series(req: IngesterSeriesRequest): Promise<{ labels: string; fingerprint: bigint }[]>;
}

/** What a query reads of a stream in memory: the ingester's stream state, narrowed. */
export interface QueryableStream {
  /** The stream's key within the ingester (`streamKey`). */
  readonly key: string;
  /** The canonical label string. */
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly labelMap: Readonly<Record<string, string>>;
  readonly head: Head | undefined;
  /** Cut, waiting for the next flush job. */
  readonly pending: readonly CutChunk[];
  /** In the running flush job. */
  readonly flushing: readonly CutChunk[];
}

/** A stream's entries as the contract shapes them. */
function toContractEntry(e: Entry): IngesterStream["entries"][number] {
  const md: Record<string, string> = {};
  for (const p of e.structuredMetadata) md[p.name] = p.value;
  return { timestamp: e.timestamp, line: e.line, structuredMetadata: md };
}

/**
 * A predicate from a log query's pipeline: whether the pipeline keeps an entry. The
 * querier runs the pipeline again on what it gets, so only the decision matters here.
 */
function compileKeep(
  query: string,
): (e: Entry, labels: Readonly<Record<string, string>>) => boolean {
  let expr;
  try {
    expr = parseExpr(query);
  } catch (error) {
    throw new IngesterError("invalid_selector", (error as Error).message, { cause: error });
  }
  if (expr.kind !== "log") throw new IngesterError("invalid_selector", "not a log query");
  const pipeline = compilePipeline(expr.pipeline);
  return (e, labels) => {
    const structuredMetadata: Record<string, string> = {};
    for (const p of e.structuredMetadata) structuredMetadata[p.name] = p.value;
    return (
      pipeline.process({ timestamp: e.timestamp, line: e.line, labels, structuredMetadata }) !==
      null
    );
  };
}

function parseSelector(selector: string): Matcher[] {
  let expr;
  try {
    expr = parseExpr(selector);
  } catch (error) {
    throw new IngesterError("invalid_selector", (error as Error).message, { cause: error });
  }
  if (expr.kind !== "log") throw new IngesterError("invalid_selector", "not a log selector");
  return expr.matchers;
}

/**
 * Entries of the matching streams among `streams` (one tenant's) for `req`: heads and cut
 * chunks read in range, filtered by the query's pipeline when it has one, then limited per
 * stream in the request's direction. More than `maxEntriesPerQuery` in all is an error.
 */
export function queryStreams(
  streams: Iterable<QueryableStream>,
  req: IngesterQueryRequest,
  maxEntriesPerQuery: number,
): IngesterStream[] {
  const matchers = parseSelector(req.selector);
  const keep = req.query === undefined ? undefined : compileKeep(req.query);
  if (!(Number.isSafeInteger(req.limit) && req.limit >= 0)) {
    throw new IngesterError("invalid_request", `limit ${req.limit}`);
  }
  const max = maxEntriesPerQuery;
  const range: EntryRange = {
    from: req.start,
    through: req.end,
    direction: req.direction,
    // Reading one more than the cap tells "too many" from "exactly the cap".
    limit: req.limit === 0 || req.limit > max ? max + 1 : req.limit,
  };
  // With a pipeline, every entry in range is read and filtered before the limit.
  const read: EntryRange = keep === undefined ? range : { ...range, limit: 0 };
  const byKey = new Map<string, { s: QueryableStream; entries: Entry[] }>();
  let total = 0;
  for (const s of streams) {
    if (!matchesLabels(matchers, s.labelMap)) continue;
    let entries: Entry[] = [];
    for (const c of [...s.flushing, ...s.pending]) {
      if (c.encoded.through < req.start || c.encoded.from >= req.end) continue;
      entries = entries.concat(readEncoded(c.encoded.bytes, read));
    }
    if (s.head !== undefined) entries = entries.concat(s.head.read(read));
    if (keep !== undefined) entries = entries.filter((e) => keep(e, s.labelMap));
    if (entries.length === 0) continue;
    const seen = byKey.get(s.key);
    if (seen !== undefined) seen.entries = seen.entries.concat(entries);
    else byKey.set(s.key, { s, entries });
  }
  const out: IngesterStream[] = [];
  for (const { s, entries } of byKey.values()) {
    const selected = selectEntries(entries, range);
    total += selected.length;
    if (total > max) {
      throw new IngesterError("too_many_entries", `more than ${max} (maxEntriesPerQuery)`);
    }
    out.push({
      labels: s.labels,
      fingerprint: s.fingerprint,
      entries: selected.map(toContractEntry),
    });
  }
  return out;
}

/**
 * The matching streams among `streams` (one tenant's) with data in [start, end); all of
 * them when the request has no selector. More than `maxSeriesPerQuery` is an error.
 */
export function querySeries(
  streams: Iterable<QueryableStream>,
  req: IngesterSeriesRequest,
  maxSeriesPerQuery: number,
): { labels: string; fingerprint: bigint }[] {
  const matchers =
    req.selector === undefined || req.selector === "" ? [] : parseSelector(req.selector);
  const out = new Map<string, { labels: string; fingerprint: bigint }>();
  for (const s of streams) {
    if (out.has(s.key) || !matchesLabels(matchers, s.labelMap)) continue;
    const overlaps = (from: bigint, through: bigint): boolean =>
      through >= req.start && from < req.end;
    const head = s.head;
    const inRange =
      (head !== undefined &&
        head.entryCount > 0 &&
        overlaps(head.builder.from!, head.builder.through!)) ||
      [...s.flushing, ...s.pending].some((c) => overlaps(c.encoded.from, c.encoded.through));
    if (!inRange) continue;
    if (out.size >= maxSeriesPerQuery) {
      throw new IngesterError("too_many_series", `more than ${maxSeriesPerQuery}`);
    }
    out.set(s.key, { labels: s.labels, fingerprint: s.fingerprint });
  }
  return [...out.values()];
}
