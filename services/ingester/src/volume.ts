/**
 * Volume and stats over the ingester's unflushed data (Loki's ingester `GetVolume` and
 * `GetStats`, `pkg/ingester/instance.go`): from each matching stream's open head and the
 * chunks cut from it and not yet flushed, by their bounds, entry counts and line bytes
 * (the chunk builder counts them exactly as entries arrive), without reading an entry.
 * The index records the same line bytes for each chunk it lists (format version 3), so a
 * series' volume does not change when its head is flushed. A chunk still in the running
 * flush after its index segment is written counts on both sides until the flush is
 * committed (a short window; Loki's ingesters keep flushed chunks out of their count the
 * same way once marked flushed).
 */
import { VolumeAccumulator, VolumeCellsError, VolumeLimitError } from "@sieve/index";
import { matchesLabels, parseExpr, type Matcher } from "@sieve/logql";
import type {
  IngesterCallOptions,
  IngesterStats,
  IngesterStatsRequest,
  IngesterVolume,
  IngesterVolumeRequest,
} from "@sieve/proto";
import { IngesterError } from "./errors.js";
import { abortError, type QueryableStream } from "./query.js";

/** One unflushed chunk of a stream, as volume and stats read it. */
interface UnflushedChunk {
  readonly from: bigint;
  readonly through: bigint;
  readonly entries: number;
  readonly lineBytes: number;
}

/** The stream's head (when it holds entries) and its cut, unflushed chunks. */
function* unflushed(s: QueryableStream): Generator<UnflushedChunk> {
  const b = s.head?.builder;
  if (b !== undefined && b.entryCount > 0) {
    yield { from: b.from!, through: b.through!, entries: b.entryCount, lineBytes: b.lineBytes };
  }
  for (const c of [...s.pending, ...s.flushing]) {
    const e = c.encoded;
    yield { from: e.from, through: e.through, entries: e.entryCount, lineBytes: e.lineBytes };
  }
}

/** The matchers of a request's stream selector (none: every stream). */
function selectorMatchers(selector: string | undefined): Matcher[] {
  if (selector === undefined || selector === "") return [];
  let expr;
  try {
    expr = parseExpr(selector);
  } catch (error) {
    throw new IngesterError("invalid_selector", (error as Error).message, { cause: error });
  }
  if (expr.kind !== "log" || expr.pipeline.length > 0) {
    throw new IngesterError("invalid_selector", "not a stream selector");
  }
  return expr.matchers;
}

/**
 * Bytes of the matching streams' unflushed chunks over [start, end], by name and bucket
 * (see `@sieve/index`'s VolumeAccumulator); past `maxSeries` names, a `too_many_series`
 * refusal in Loki's words; past `maxEntries` (name, bucket) values, `too_many_entries`.
 */
export function queryVolume(
  streams: Iterable<QueryableStream>,
  req: IngesterVolumeRequest,
  maxEntries: number,
  options: IngesterCallOptions = {},
): IngesterVolume[] {
  if (options.signal?.aborted === true) throw abortError(options.signal);
  const matchers = selectorMatchers(req.selector);
  const acc = new VolumeAccumulator({
    start: req.start,
    end: req.end,
    step: req.step,
    aggregateBy: req.aggregateBy,
    targetLabels: req.targetLabels,
    matcherNames: matchers.map((m) => m.name),
    maxSeries: req.maxSeries,
    // Each (name, bucket) value is an entry of the answer: the ingester's answer bound.
    maxCells: maxEntries,
  });
  const seen = new Set<string>();
  try {
    for (const s of streams) {
      if (seen.has(s.key) || !matchesLabels(matchers, s.labelMap)) continue;
      seen.add(s.key);
      let names: string[] | undefined;
      for (const c of unflushed(s)) {
        if (c.through < req.start || c.from > req.end) continue;
        names ??= acc.namesOf(Object.entries(s.labelMap).map(([name, value]) => ({ name, value })));
        if (names === undefined) break;
        acc.addChunk(names, c.from, c.through, c.lineBytes);
      }
    }
  } catch (error) {
    if (error instanceof VolumeLimitError) {
      throw new IngesterError("too_many_series", error.message, { cause: error });
    }
    if (error instanceof VolumeCellsError) {
      throw new IngesterError("too_many_entries", error.message, { cause: error });
    }
    throw error;
  }
  return acc.entries();
}

/**
 * Streams, chunks, line bytes and entries of the matching streams' unflushed chunks that
 * overlap [start, end] (whole chunks, as the querier counts the index's).
 */
export function queryStats(
  streams: Iterable<QueryableStream>,
  req: IngesterStatsRequest,
  options: IngesterCallOptions = {},
): IngesterStats {
  if (options.signal?.aborted === true) throw abortError(options.signal);
  const matchers = selectorMatchers(req.selector);
  const out = { streams: 0, chunks: 0, bytes: 0, entries: 0 };
  const seen = new Set<string>();
  for (const s of streams) {
    if (seen.has(s.key) || !matchesLabels(matchers, s.labelMap)) continue;
    seen.add(s.key);
    let counted = false;
    for (const c of unflushed(s)) {
      if (c.through < req.start || c.from > req.end) continue;
      counted = true;
      out.chunks++;
      out.bytes += c.lineBytes;
      out.entries += c.entries;
    }
    if (counted) out.streams++;
  }
  return out;
}

/** Stats of several ingesters (or workers) added: each owns different partitions, so streams. */
export function sumStats(each: readonly IngesterStats[]): IngesterStats {
  return each.reduce(
    (a, b) => ({
      streams: a.streams + b.streams,
      chunks: a.chunks + b.chunks,
      bytes: a.bytes + b.bytes,
      entries: a.entries + b.entries,
    }),
    { streams: 0, chunks: 0, bytes: 0, entries: 0 },
  );
}
