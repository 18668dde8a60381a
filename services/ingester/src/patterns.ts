/**
 * Log patterns learned at ingest (Loki's pattern ingester, `pkg/pattern/instance.go` and
 * `stream.go`, run inside the ingester instead of beside it): each stream of a tenant with
 * `patternsEnabled` gets a Drain instance (`@sieve/drain`) when its first line arrives, its
 * format guessed from that line; every entry appended to the stream's head (duplicates
 * and refused entries are not) is learned with its `detected_level`, counted in 10 s
 * buckets. Answers `IngesterQuerier.patterns`.
 *
 * Memory. A stream's Drain holds at most `patternMaxClusters` patterns of at most 80 tokens
 * (lines of at most 3000 code units) and `patternRetentionMs / 10 s` buckets each; the
 * periodic sweep drops buckets older than `patternRetentionMs`, patterns left empty and
 * streams left without patterns, then, past `patternMemoryBytes` (each worker has its share),
 * the streams that learned least recently until three quarters of it remain. Streams live
 * here apart from their heads, which are released once flushed, and go with their
 * partition when it is revoked. Nothing is persisted: a restart starts learning again
 * (from what the queue replays), as Loki's in-memory pattern ingester does.
 */
import { Drain, detectFormat, samplesInRange } from "@sieve/drain";
import type { DrainOptions, SkipReason } from "@sieve/drain";
import type { Label } from "@sieve/labels";
import { matchesLabels } from "@sieve/logql";
import type { Matcher } from "@sieve/logql";
import type { IngesterPatternsRequest, PatternSeries } from "@sieve/proto";
import { IngesterError } from "./errors.js";

/** A line without `detected_level` metadata counts as this level (Loki's `unknown`). */
export const UNKNOWN_LEVEL = "unknown";

/** The structured-metadata name of a line's level (the distributor sets it, as Loki does). */
const LEVEL_KEY = "detected_level";

/** One stream's patterns. */
export class StreamPatterns {
  /** Made with the stream's first line, whose format it guesses. */
  drain: Drain | undefined = undefined;
  /** When it last learned a line (the clock of the ingester), for eviction. */
  lastTrainMs = 0;
  /**
   * Set when the store dropped it (nothing left in retention, or evicted for memory) while
   * its stream lives on: its next line puts it back, so the store sees all it holds.
   */
  dropped = false;

  constructor(
    readonly tenant: string,
    readonly key: string,
    readonly labels: string,
    readonly labelMap: Readonly<Record<string, string>>,
    private readonly store: PatternStore,
  ) {}

  /** Learns one appended entry. The hot path: no allocation beyond Drain's own. */
  train(line: string, timestampNs: bigint, metadata: readonly Label[], nowMs: number): void {
    let level = UNKNOWN_LEVEL;
    for (let i = 0; i < metadata.length; i++) {
      const m = metadata[i]!;
      if (m.name === LEVEL_KEY) {
        level = m.value;
        break;
      }
    }
    if (this.dropped) this.store.restore(this);
    const drain = (this.drain ??= new Drain(detectFormat(line), this.store.drainOptions));
    // ns to ms through a double: off by less than a microsecond, well inside a 10 s bucket.
    const r = drain.train(line, Math.floor(Number(timestampNs) / 1e6), level, nowMs);
    if (typeof r === "string") this.store.skipped[r]++;
    this.lastTrainMs = nowMs;
  }
}

/** What {@link PatternStore.sweep} found, for metrics. */
export interface PatternSweep {
  readonly streams: number;
  readonly bytes: number;
  /** Streams dropped to keep within `patternMemoryBytes`. */
  readonly evictedStreams: number;
}

/** The patterns of one partition's streams, by tenant and stream key. */
export class PatternStore {
  private readonly tenants = new Map<string, Map<string, StreamPatterns>>();
  /** Lines learned nothing from, by reason, since the metrics last took them. */
  readonly skipped: Record<SkipReason, number> = {
    line_too_long: 0,
    too_few_tokens: 0,
    too_many_tokens: 0,
    unparsable: 0,
    paused: 0,
  };

  constructor(readonly drainOptions: Partial<DrainOptions>) {}

  /** The patterns of a stream, made on first use: they outlive the stream's heads. */
  stream(
    tenant: string,
    key: string,
    labels: string,
    labelMap: Readonly<Record<string, string>>,
  ): StreamPatterns {
    let streams = this.tenants.get(tenant);
    if (streams === undefined) {
      streams = new Map();
      this.tenants.set(tenant, streams);
    }
    let s = streams.get(key);
    if (s === undefined) {
      s = new StreamPatterns(tenant, key, labels, labelMap, this);
      streams.set(key, s);
    }
    return s;
  }

  /** The tenant's streams with patterns. */
  tenantStreams(tenant: string): Iterable<StreamPatterns> {
    return this.tenants.get(tenant)?.values() ?? [];
  }

  /** Every stream, with where it is kept. */
  *all(): Generator<{ tenant: string; key: string; s: StreamPatterns }> {
    for (const [tenant, streams] of this.tenants) {
      for (const [key, s] of streams) yield { tenant, key, s };
    }
  }

  /** Drops a stream's patterns (a later line of the stream starts them again). */
  delete(tenant: string, key: string): void {
    const streams = this.tenants.get(tenant);
    const s = streams?.get(key);
    if (streams === undefined || s === undefined) return;
    s.dropped = true;
    s.drain = undefined;
    streams.delete(key);
    if (streams.size === 0) this.tenants.delete(tenant);
  }

  /** Puts back patterns dropped while their stream lived on (see `StreamPatterns.dropped`). */
  restore(s: StreamPatterns): void {
    s.dropped = false;
    let streams = this.tenants.get(s.tenant);
    if (streams === undefined) {
      streams = new Map();
      this.tenants.set(s.tenant, streams);
    }
    if (!streams.has(s.key)) streams.set(s.key, s);
  }
}

/**
 * Prunes every store of buckets before `oldestMs`, drops empty streams, and evicts the
 * streams that learned least recently until the stores hold at most three quarters of
 * `budgetBytes` (when they held more).
 */
export function sweepPatterns(
  stores: Iterable<PatternStore>,
  oldestMs: number,
  budgetBytes: number,
): PatternSweep {
  const held: {
    store: PatternStore;
    tenant: string;
    key: string;
    s: StreamPatterns;
    bytes: number;
  }[] = [];
  let total = 0;
  for (const store of stores) {
    for (const { tenant, key, s } of [...store.all()]) {
      const drain = s.drain;
      if (drain === undefined || drain.prune(oldestMs)) {
        store.delete(tenant, key);
        continue;
      }
      const bytes = drain.bytes;
      held.push({ store, tenant, key, s, bytes });
      total += bytes;
    }
  }
  let evicted = 0;
  if (total > budgetBytes) {
    held.sort((a, b) => a.s.lastTrainMs - b.s.lastTrainMs);
    for (const h of held) {
      if (total <= budgetBytes * 0.75) break;
      h.store.delete(h.tenant, h.key);
      total -= h.bytes;
      evicted++;
    }
  }
  return { streams: held.length - evicted, bytes: total, evictedStreams: evicted };
}

/**
 * The patterns of `streams` (a tenant's, over its partitions) matching `matchers`, in
 * [start, end) by steps of `req.stepMs`, merged by pattern and level (the same pattern in
 * two streams is one series, counts added), patterns without a line in range left out.
 * More than `maxSeries` patterns of streams (before merging) is `too_many_series`.
 */
export function queryPatterns(
  streams: Iterable<StreamPatterns>,
  matchers: readonly Matcher[],
  req: Pick<IngesterPatternsRequest, "start" | "end" | "stepMs">,
  maxSeries = Infinity,
): PatternSeries[] {
  const fromMs = Number(req.start / 1_000_000n);
  const throughMs = Number((req.end + 999_999n) / 1_000_000n);
  const found: PatternSeries[] = [];
  for (const s of streams) {
    const drain = s.drain;
    if (drain === undefined || !matchesLabels(matchers, s.labelMap)) continue;
    for (const c of drain.clusters()) {
      const samples = samplesInRange(c, drain.options.bucketMs, fromMs, throughMs, req.stepMs);
      if (samples.length === 0) continue;
      if (found.length >= maxSeries) {
        throw new IngesterError(
          "too_many_series",
          `more than ${maxSeries} patterns: select fewer streams`,
        );
      }
      found.push({ pattern: drain.pattern(c), level: c.level, samples });
    }
  }
  return mergePatterns([found]);
}

/**
 * Answers of several ingesters (or workers) as one: series of the same pattern and level
 * merged, their counts added step by step; sorted by pattern, then level, for a stable answer.
 */
export function mergePatterns(answers: readonly (readonly PatternSeries[])[]): PatternSeries[] {
  const merged = new Map<string, { pattern: string; level: string; steps: Map<number, number> }>();
  for (const answer of answers) {
    for (const s of answer) {
      const key = `${s.level}\u0000${s.pattern}`;
      let m = merged.get(key);
      if (m === undefined) {
        m = { pattern: s.pattern, level: s.level, steps: new Map() };
        merged.set(key, m);
      }
      for (const [t, n] of s.samples) m.steps.set(t, (m.steps.get(t) ?? 0) + n);
    }
  }
  return [...merged.values()]
    .map((m) => ({
      pattern: m.pattern,
      level: m.level,
      samples: [...m.steps].sort((a, b) => a[0] - b[0]),
    }))
    .sort((a, b) =>
      a.pattern < b.pattern
        ? -1
        : a.pattern > b.pattern
          ? 1
          : a.level < b.level
            ? -1
            : a.level > b.level
              ? 1
              : 0,
    );
}
