/**
 * Label records: parsed from the series' canonical strings (cached), built from an entry's
 * structured metadata, and keyed canonically for ordering and deduplication. And the read
 * side's report of what it left out or kept untested ({@link ReadReport}): one unreadable
 * series or segment is skipped, logged and counted, never a failed query.
 */
import type { MetadataPair } from "@sieve/chunk";
import { parseLabels } from "@sieve/labels";
import { countedUpTo } from "@sieve/kit";
import { LRUCache } from "lru-cache";
import { pino, type Logger } from "pino";
import { Counter, type Registry } from "prom-client";

/** The shared empty record (metadata of an entry that has none). */
export const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

/** The record of an entry's structured metadata ({@link EMPTY} when it has none). */
export function metadataRecord(pairs: readonly MetadataPair[]): Readonly<Record<string, string>> {
  if (pairs.length === 0) return EMPTY;
  const out: Record<string, string> = {};
  for (const p of pairs) out[p.name] = p.value;
  return out;
}

const labelKeys = new WeakMap<object, string>();

/** A canonical key of a label set (sorted names), memoised per object. */
export function labelsKey(labels: Readonly<Record<string, string>>): string {
  let key = labelKeys.get(labels);
  if (key === undefined) {
    const names = Object.keys(labels).sort();
    key = JSON.stringify(names.map((n) => [n, labels[n]]));
    labelKeys.set(labels, key);
  }
  return key;
}

/** The numbers a {@link ReadReport} has counted, as plain data (they cross threads). */
export interface ReadReportCounts {
  unreadableSeries: number;
  unreadableSegments: number;
  /** Fail-open reason → chunk refs kept untested. */
  failedOpenChunks: Record<string, number>;
}

// How many distinct series and segment keys are remembered as already logged: enough for
// a damaged day of a large tenant, bounded so that damage cannot grow memory.
const LOGGED_ONCE_MAX = 10_000;

/**
 * Where the read side says what it left out of an answer or kept untested, so that nobody
 * has to guess: a series whose labels do not parse (written before the distributor refused
 * such labels), a segment that cannot be read, chunk refs kept because the bloom step
 * failed. Each is counted (Prometheus, when a registry is given, and {@link counts}) and
 * logged with what it concerns: a series or segment once, a fail-open each time.
 */
export class ReadReport {
  private readonly logger: Logger;
  private readonly seriesCounter: Counter;
  private readonly segmentCounter: Counter;
  private readonly failedOpenCounter: Counter<"reason">;
  private readonly logged = new LRUCache<string, true>(countedUpTo(LOGGED_ONCE_MAX));
  private readonly totals: ReadReportCounts = {
    unreadableSeries: 0,
    unreadableSegments: 0,
    failedOpenChunks: {},
  };

  /** `logger`: default a pino logger on stdout; `registry`: where the counters register. */
  constructor(options: { logger?: Logger; registry?: Registry } = {}) {
    this.logger = options.logger ?? pino({ name: "sieve-querier" });
    const registers = options.registry === undefined ? [] : [options.registry];
    this.seriesCounter = new Counter({
      name: "sieve_querier_unreadable_series_total",
      help: "Series left out of answers because their stored labels do not parse.",
      registers,
    });
    this.segmentCounter = new Counter({
      name: "sieve_querier_unreadable_segments_total",
      help: "Index segment reads left out of answers because the segment is damaged or gone.",
      registers,
    });
    this.failedOpenCounter = new Counter({
      name: "sieve_querier_bloom_failed_open_chunks_total",
      help: "Chunk refs queries read untested because their blooms could not be tested, by reason.",
      labelNames: ["reason"],
      registers,
    });
  }

  /** A series left out because its canonical labels do not parse; `where` names its source. */
  unreadableSeries(labels: string, where: string, error: unknown): void {
    this.totals.unreadableSeries++;
    this.seriesCounter.inc();
    if (this.once(`series\u0000${labels}`)) {
      this.logger.warn(
        { err: error, labels, where },
        "left out a series whose labels do not parse (logged once per series)",
      );
    }
  }

  /** A segment left out because it cannot be decoded or vanished between list and get. */
  unreadableSegment(key: string, error: unknown): void {
    this.totals.unreadableSegments++;
    this.segmentCounter.inc();
    if (this.once(`segment\u0000${key}`)) {
      this.logger.error({ err: error, key }, "left out an unreadable index segment (logged once)");
    }
  }

  /**
   * `chunks` refs kept untested with `reason`: logged with `error` when the querier caught
   * one (the gateway and its client log the failures they report in their answers).
   */
  failedOpen(reason: string, chunks: number, tenant: string, error?: unknown): void {
    if (chunks <= 0) return;
    const by = this.totals.failedOpenChunks;
    by[reason] = (by[reason] ?? 0) + chunks;
    this.failedOpenCounter.inc({ reason }, chunks);
    if (error !== undefined) {
      this.logger.warn(
        { err: error, reason, chunks, tenant },
        "bloom gateway call failed: kept every chunk ref untested",
      );
    }
  }

  /**
   * Counts what another thread's report counted (a query worker's `delta`), without
   * logging: the worker logged it already.
   */
  add(delta: ReadReportCounts): void {
    this.totals.unreadableSeries += delta.unreadableSeries;
    this.seriesCounter.inc(delta.unreadableSeries);
    this.totals.unreadableSegments += delta.unreadableSegments;
    this.segmentCounter.inc(delta.unreadableSegments);
    for (const [reason, chunks] of Object.entries(delta.failedOpenChunks)) {
      const by = this.totals.failedOpenChunks;
      by[reason] = (by[reason] ?? 0) + chunks;
      this.failedOpenCounter.inc({ reason }, chunks);
    }
  }

  /** What has been counted since `before` (a {@link counts} taken earlier). */
  since(before: ReadReportCounts): ReadReportCounts {
    const failedOpenChunks: Record<string, number> = {};
    for (const [reason, chunks] of Object.entries(this.totals.failedOpenChunks)) {
      const d = chunks - (before.failedOpenChunks[reason] ?? 0);
      if (d > 0) failedOpenChunks[reason] = d;
    }
    return {
      unreadableSeries: this.totals.unreadableSeries - before.unreadableSeries,
      unreadableSegments: this.totals.unreadableSegments - before.unreadableSegments,
      failedOpenChunks,
    };
  }

  /** What has been counted so far. */
  counts(): ReadReportCounts {
    return {
      ...this.totals,
      failedOpenChunks: { ...this.totals.failedOpenChunks },
    };
  }

  private once(key: string): boolean {
    if (this.logged.has(key)) return false;
    this.logged.set(key, true);
    return true;
  }
}

// Remembers a label string that does not parse, so that it is not parsed on every lookup.
const UNREADABLE: Readonly<Record<string, string>> = Object.freeze({});

/** Label records of canonical label strings (`{a="b"}`), parsed once into a bounded LRU. */
export class ParsedLabels {
  private readonly parsed = new LRUCache<string, Readonly<Record<string, string>>>(
    countedUpTo(100_000),
  );

  /** `report` hears of every label string that does not parse ({@link tryOf}). */
  constructor(readonly report: ReadReport = new ReadReport()) {}

  /**
   * The record of `canonical`. Treat it as read-only: it is shared. Throws when it does
   * not parse: read-side callers use {@link tryOf}.
   */
  of(canonical: string): Readonly<Record<string, string>> {
    const labels = this.parsed.get(canonical);
    if (labels !== undefined && labels !== UNREADABLE) return labels;
    return this.parse(canonical);
  }

  /**
   * The record of `canonical`, or undefined when it does not parse: the series is left
   * out, and the report counts it and logs it (once) with `where` it came from.
   */
  tryOf(canonical: string, where: string): Readonly<Record<string, string>> | undefined {
    const labels = this.parsed.get(canonical);
    if (labels !== undefined) {
      if (labels !== UNREADABLE) return labels;
      this.report.unreadableSeries(canonical, where, undefined);
      return undefined;
    }
    try {
      return this.parse(canonical);
    } catch (error) {
      this.parsed.set(canonical, UNREADABLE);
      this.report.unreadableSeries(canonical, where, error);
      return undefined;
    }
  }

  private parse(canonical: string): Readonly<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const l of parseLabels(canonical)) out[l.name] = l.value;
    this.parsed.set(canonical, out);
    return out;
  }
}
