import { hashKey, lastHash, ribbonLookup, type AnyFilter } from "@sieve/bloom";
import {
  ALL_METADATA_TOKENS,
  CHUNK_PREFIX_BYTES,
  chunkKeyHigh,
  chunkKeyLow,
  literalNgrams,
  writeChunkPrefix,
} from "@sieve/index";
import { isDeadlineReason, mapLimit, waitAtMost } from "@sieve/kit";
import type {
  BloomBlockStore,
  BloomRecord,
  BloomRecordLocation,
  MetadataTokens,
  SegmentChunk,
} from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import { evaluateMetadataTest, kvToken, withoutLineTests } from "@sieve/logql";
import type { BloomTest, MetadataOracle } from "@sieve/logql";
import type {
  ChunkFilter,
  FilterRequest,
  FilterResponse,
  FilterSeries,
  FilterStats,
} from "@sieve/proto";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { BloomCache, BloomReadError } from "./cache.js";
import type { BloomCacheStats } from "./cache.js";
import type { LoadedBlock } from "./block.js";
import type { BloomGatewayConfig } from "./config.js";
import { GatewayError } from "./errors.js";
import { Verdicts, failedLeaf } from "./explain.js";
import { BloomGatewayMetrics } from "./metrics.js";
import type { FailOpenReason } from "./reasons.js";
import { BY_CHUNK, BY_RECORD, BY_SERIES, GroupTable } from "./table.js";

/** Stats of nothing filtered yet. */
export function emptyStats(): FilterStats {
  return {
    series: 0,
    seriesSkipped: 0,
    chunks: 0,
    chunksPruned: 0,
    chunksPrunedByLine: 0,
    blocksRead: 0,
    cacheHits: 0,
    failedOpen: {},
  };
}

/** Adds `from` into `into`. */
export function addStats(into: FilterStats, from: FilterStats): void {
  into.series += from.series;
  into.seriesSkipped += from.seriesSkipped;
  into.chunks += from.chunks;
  into.chunksPruned += from.chunksPruned;
  into.chunksPrunedByLine += from.chunksPrunedByLine;
  into.blocksRead += from.blocksRead;
  into.cacheHits += from.cacheHits;
  for (const [reason, n] of Object.entries(from.failedOpen)) {
    into.failedOpen[reason] = (into.failedOpen[reason] ?? 0) + n;
  }
}

/**
 * Keeps every chunk of `series` untested, counts why and gives each its verdict: what both
 * the gateway and its client do when a series cannot be tested.
 */
export function failOpen(
  series: FilterSeries,
  reason: FailOpenReason,
  stats: FilterStats,
  verdicts: Verdicts,
): SegmentChunk[] {
  stats.failedOpen[reason] = (stats.failedOpen[reason] ?? 0) + series.chunks.length;
  verdicts.failedOpen(series, reason);
  return [...series.chunks];
}

const encoder = new TextEncoder();

/**
 * A token's xxhash64 (the filters' hash) as two 32-bit halves, and its UTF-8 bytes behind a
 * slot for a chunk's prefix: a request's series and chunk tests all look up the same
 * tokens, hashed once here instead of once a series or chunk (the bytes serve blooms written
 * before chunk tokens were keyed by checksum, which hash each chunk's prefixed key).
 */
interface TokenKey {
  readonly prefixed: Uint8Array;
  readonly lo: number;
  readonly hi: number;
}

function tokenKey(token: string): TokenKey {
  const bytes = encoder.encode(token);
  const prefixed = new Uint8Array(CHUNK_PREFIX_BYTES + bytes.length);
  prefixed.set(bytes, CHUNK_PREFIX_BYTES);
  hashKey(bytes);
  return { prefixed, lo: lastHash[0]!, hi: lastHash[1]! };
}

/** A test's literals' n-grams for one n-gram setting, and every key among them. */
interface LiteralGrams {
  /** Literal → its n-gram lists (null: the literal cannot be tested). */
  readonly lists: Map<string, TokenKey[][] | null>;
  readonly keys: TokenKey[];
}

/** What a bloom without n-grams offers a line literal: nothing to test. */
const NO_GRAMS: LiteralGrams = { lists: new Map(), keys: [] };

/**
 * A bloom test ready to run: each token it may look up (a name, a name and value, a line
 * literal's n-grams) UTF-8 encoded once, behind a slot each chunk's prefix is written
 * into, so testing a series or a chunk encodes and allocates nothing. A literal's n-grams
 * depend on the settings of the bloom it is tested on (each record says which), and are
 * made once per settings a request meets.
 */
class CompiledTest {
  /** The same test with its line leaves read as "may match": who pruned, for the stats. */
  readonly metadataOnly: BloomTest;
  private readonly names = new Map<string, TokenKey>();
  private readonly pairs = new Map<string, Map<string, TokenKey>>();
  /** Every name and pair key above. */
  private readonly metadataKeys: TokenKey[] = [];
  private readonly literals: string[] = [];
  /** `length/skip` → the literals' n-grams for those settings. */
  private readonly grams = new Map<string, LiteralGrams>();
  /** The words {@link chunk} keys tokens with (tokens.ts), for the chunk it tests. */
  private chunkLow = 0;
  private chunkHigh = 0;
  /** The chunk prefix {@link chunk} writes for an older bloom, before it is copied into each key. */
  private readonly prefix = new Uint8Array(CHUNK_PREFIX_BYTES);
  /** The filter and settings the oracles below ask, set by each call. */
  private filter: AnyFilter | undefined;
  private lines: LiteralGrams = NO_GRAMS;
  /** The metadata tokens the bloom holds: a kind it lacks answers "may match". */
  private tokens: MetadataTokens = ALL_METADATA_TOKENS;
  private readonly plain: MetadataOracle = {
    key: (name) => this.hasKey(this.name(name), false),
    // The pair first: for a needle it is the token that is absent (its name rarely is).
    pair: (name, value) =>
      this.hasValue(this.pair(name, value), false) && this.hasKey(this.name(name), false),
    line: (literal) => this.line(literal, false),
  };
  private readonly prefixed: MetadataOracle = {
    key: (name) => this.hasKey(this.name(name), true),
    pair: (name, value) =>
      this.hasValue(this.pair(name, value), true) && this.hasKey(this.name(name), true),
    line: (literal) => this.line(literal, true),
  };

  constructor(readonly test: BloomTest) {
    this.metadataOnly = withoutLineTests(test);
    const walk = (t: BloomTest): void => {
      if (t.kind === "key" || t.kind === "kv") {
        if (!this.names.has(t.name)) this.names.set(t.name, tokenKey(t.name));
      }
      if (t.kind === "kv") {
        let values = this.pairs.get(t.name);
        if (values === undefined) this.pairs.set(t.name, (values = new Map<string, TokenKey>()));
        if (!values.has(t.value)) values.set(t.value, tokenKey(kvToken(t.name, t.value)));
      }
      if (t.kind === "line" && !this.literals.includes(t.literal)) this.literals.push(t.literal);
      if (t.kind === "and" || t.kind === "or") t.children.forEach(walk);
    };
    walk(test);
    for (const key of this.names.values()) this.metadataKeys.push(key);
    for (const values of this.pairs.values()) this.metadataKeys.push(...values.values());
  }

  /** The series test: unprefixed tokens. */
  series(bloom: BloomRecord, labels: Record<string, string>, test = this.test): boolean {
    this.use(bloom);
    return evaluateMetadataTest(test, this.plain, labels);
  }

  /**
   * The series and chunk tests ({@link series}, {@link chunk}) of the groups of `table`:
   * group `i`'s series test with `low` and `high` 0, the test of its chunk keyed by
   * `chunkKeyLow`/`chunkKeyHigh` with those words (blooms whose chunk tokens are keyed by
   * checksum). The same answers, with each leaf's tokens and the groups' filters and flags
   * found once, not once a group. Undefined for a test with line leaves (their n-grams
   * depend on each bloom's settings).
   */
  testerOf(table: GroupTable): GroupTest | undefined {
    if (this.metadataOnly !== this.test) return undefined;
    const { records, keys, values, ribbon, views, offset, slots, bits, seed } = table;
    let low = 0;
    let high = 0;
    const has = (key: TokenKey, i: number): boolean => {
      const lo = (key.lo ^ low) >>> 0;
      const hi = (key.hi ^ high) >>> 0;
      const view = ribbon[i]!;
      if (view < 0) return records[i]!.filter.testHashed(lo, hi);
      return ribbonLookup(views[view]!, offset[i]!, slots[i]!, bits[i]!, seed[i]!, lo, hi);
    };
    const compile = (t: BloomTest): ((i: number) => boolean) => {
      switch (t.kind) {
        case "all":
        case "line":
          return () => true;
        case "key": {
          const label = table.streamLabel(t.name);
          const name = this.names.get(t.name)!;
          return (i) => label[i] === 1 || keys[i] === 0 || has(name, i);
        }
        case "kv": {
          const label = table.streamLabel(t.name);
          const name = this.names.get(t.name)!;
          const pair = this.pairs.get(t.name)!.get(t.value)!;
          // The pair first, as the oracle asks it.
          return (i) =>
            label[i] === 1 ||
            ((values[i] === 0 || has(pair, i)) && (keys[i] === 0 || has(name, i)));
        }
        case "and": {
          const children = t.children.map(compile);
          return (i) => children.every((c) => c(i));
        }
        case "or": {
          const children = t.children.map(compile);
          return (i) => children.some((c) => c(i));
        }
      }
    };
    const tree = compile(this.test);
    return (i, chunkLow, chunkHigh) => {
      low = chunkLow;
      high = chunkHigh;
      return tree(i);
    };
  }

  /** The chunk test: the same tree on the chunk's prefixed tokens. */
  chunk(
    bloom: BloomRecord,
    chunk: SegmentChunk,
    labels: Record<string, string>,
    test = this.test,
  ): boolean {
    this.use(bloom);
    if (this.tokens.checksumKeys === true) {
      this.chunkLow = chunkKeyLow(chunk.checksum);
      this.chunkHigh = chunkKeyHigh(chunk.checksum);
    } else {
      // An older bloom: the prefix made once a chunk and copied into each key, through
      // arrays, not the maps' iterators (three iterator objects a chunk were most of what
      // testing 2,500 chunks allocated).
      const prefix = this.prefix;
      writeChunkPrefix(chunk, prefix);
      for (const key of this.metadataKeys) key.prefixed.set(prefix);
      for (const key of this.lines.keys) key.prefixed.set(prefix);
    }
    return evaluateMetadataTest(test, this.prefixed, labels);
  }

  private use(bloom: BloomRecord): void {
    this.filter = bloom.filter;
    this.tokens = bloom.metadataTokens;
    const { ngrams } = bloom;
    this.lines = NO_GRAMS;
    if (ngrams === undefined || this.literals.length === 0) return;
    const settings = `${ngrams.length}/${ngrams.skip}`;
    let lines = this.grams.get(settings);
    if (lines === undefined) {
      lines = { lists: new Map(), keys: [] };
      for (const literal of this.literals) {
        const lists = literalNgrams(literal, ngrams)?.map((list) => list.map(tokenKey));
        lines.lists.set(literal, lists ?? null);
        for (const list of lists ?? []) lines.keys.push(...list);
      }
      this.grams.set(settings, lines);
    }
    this.lines = lines;
  }

  /** Whether some offset's n-grams of `literal` are all in the bloom; true when untestable. */
  private line(literal: string, prefixed: boolean): boolean {
    const lists = this.lines.lists.get(literal);
    if (lists === undefined || lists === null) return true;
    return lists.some((list) => list.every((key) => this.has(key, prefixed)));
  }

  private name(name: string): TokenKey | undefined {
    return this.names.get(name);
  }

  private pair(name: string, value: string): TokenKey | undefined {
    return this.pairs.get(name)?.get(value);
  }

  private hasKey(key: TokenKey | undefined, prefixed: boolean): boolean {
    return !this.tokens.keys || this.has(key, prefixed);
  }

  private hasValue(key: TokenKey | undefined, prefixed: boolean): boolean {
    return !this.tokens.values || this.has(key, prefixed);
  }

  /** Every token the tree looks up was compiled; an unknown one cannot prune. */
  private has(key: TokenKey | undefined, prefixed: boolean): boolean {
    const filter = this.filter;
    if (key === undefined || filter === undefined) return true;
    if (!prefixed) return filter.testHashed(key.lo, key.hi);
    if (this.tokens.checksumKeys !== true) return filter.test(key.prefixed);
    return filter.testHashed((key.lo ^ this.chunkLow) >>> 0, (key.hi ^ this.chunkHigh) >>> 0);
  }
}

function labelsRecord(labels: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const { name, value } of parseLabels(labels)) out[name] = value;
  return out;
}

/** Where the bloom of a series {@link BloomGateway.testable} passed is: in a block. */
function locationOf(s: FilterSeries): BloomRecordLocation {
  return s.bloom as BloomRecordLocation;
}

/** The refs a series keeps when it keeps none: one array, never written. */
const NONE: SegmentChunk[] = [];

/** The test of group `i`'s series (words 0) or of one of its chunks (its key words). */
type GroupTest = (i: number, chunkLow: number, chunkHigh: number) => boolean;

/** A series array sent once, not yet given a table. */
const SEEN = Symbol("seen");

/** Label strings parsed (or refused, as null) by a gateway, bounded. */
const MAX_PARSED_LABELS = 65_536;

/**
 * The bloom gateway, in process (Loki's `bloomgateway.New(cfg, store, logger, registry)`):
 * prunes a query's chunk refs with the series' blooms. Each series is tested on its
 * unprefixed tokens first and skipped whole when that fails; then each chunk with
 * prefixed tokens is tested on them. A series whose chunks are all prefixed is tested
 * chunk by chunk alone: such a bloom holds only prefixed tokens (blooms written before
 * that hold both, and answer the same). Anything unexpected (no bloom, a missing, damaged or
 * oversized record, a slow read, an error) keeps the series' refs: never a false negative.
 * The answer's verdicts (explain.ts) name the chunks kept untested and, when the request asks
 * `explain`, every chunk pruned with the test leaf that pruned it.
 */
export class BloomGateway implements ChunkFilter {
  /** Its answers' chunks are the request's own records (it filters, never copies). */
  readonly answersWithSentRecords = true;
  /** The bloom-block cache (exposed for stats and tests). */
  readonly cache: BloomCache;
  private readonly metrics: BloomGatewayMetrics;
  /**
   * Series' labels as records: every query names the same series, and parsing their
   * strings was 0.8 ms of a 578-series query's 10. Cleared when full, not evicted.
   */
  private readonly parsedLabels = new Map<string, Record<string, string> | null>();
  /**
   * By a request's series array: its {@link GroupTable}, or SEEN once it has been sent once
   * (a table is made when it comes again with every bloom held: most arrays, a remote
   * querier's, come once).
   */
  private tables = new WeakMap<readonly FilterSeries[], GroupTable | typeof SEEN>();

  constructor(
    private readonly config: BloomGatewayConfig,
    store: BloomBlockStore,
    private readonly logger: Logger,
    registry: Registry,
  ) {
    this.cache = new BloomCache(store, {
      maxBytes: config.cacheMaxBytes,
      maxBlockBytes: config.maxBlockBytes,
      onRead: (seconds, outcome) => {
        this.metrics.storeReadDuration.observe({ outcome }, seconds);
      },
      onFallback: (key, reason, detail) => {
        this.logger.warn({ key, reason, detail }, "reading a bloom block record by record");
      },
      onEvict: () => {
        this.tables = new WeakMap();
      },
    });
    this.metrics = new BloomGatewayMetrics(registry, () => this.cache.stats());
  }

  /** The gateway's metrics (the HTTP layer records request latency on them). */
  get metricSet(): BloomGatewayMetrics {
    return this.metrics;
  }

  /** The cache's counters. */
  cacheStats(): BloomCacheStats {
    return this.cache.stats();
  }

  /**
   * Reads the bloom blocks at `keys` into the cache ahead of queries, in order, until they
   * hold `maxBytes` (the last may pass it); answers how many of them it holds. A block that cannot
   * be read is left to the queries that need it.
   */
  async loadBlocks(keys: readonly string[], maxBytes: number): Promise<number> {
    let loaded = 0;
    let room = maxBytes;
    for (const key of keys) {
      try {
        if (!(await this.cache.load(key))) continue;
      } catch {
        continue;
      }
      loaded++;
      room -= this.cache.heldBytes(key);
      if (room <= 0) break;
    }
    return loaded;
  }

  /** Prunes `req`'s refs; see the class comment. Throws a {@link GatewayError} on a bad request. */
  async filterChunkRefs(req: FilterRequest): Promise<FilterResponse> {
    const started = performance.now();
    if (req.series.length > this.config.maxSeriesPerRequest) {
      throw new GatewayError(
        "too_many_series",
        `${req.series.length} series, the limit is ${this.config.maxSeriesPerRequest}`,
      );
    }
    const stats = emptyStats();
    const verdicts = new Verdicts(req.explain === true);
    const kept = new Array<SegmentChunk[] | undefined>(req.series.length);
    if (req.test.kind === "all") {
      // Nothing to test: every ref may match, and no bloom needs reading.
      req.series.forEach((s, i) => (kept[i] = [...s.chunks]));
    } else {
      const compiled = new CompiledTest(req.test);
      const sources = { hit: 0, miss: 0, inflight: 0 };
      const table = this.tables.get(req.series);
      if (table instanceof GroupTable && table.stillHeld((key) => this.cache.held(key))) {
        this.judgeTable(table, compiled, kept, stats, verdicts);
        const n = req.series.length;
        stats.cacheHits += n;
        this.cache.countHits(n);
        this.metrics.cacheRequests.inc({ result: "hit" }, n);
        return this.answer(req, kept, stats, verdicts, started, table);
      }
      // What a table is made of, when every group's bloom is cut from a held block.
      let cut = 0;
      const records: BloomRecord[] = [];
      const labelsOf: Record<string, string>[] = [];
      // Series whose block is in memory are tested here and now (no promise, no timer:
      // a 250-series needle spent a third of its bloom stage on them); the rest wait for
      // their reads, `maxConcurrentReads` at a time.
      // Blocks are looked up once per request (a flush writes one block for all its
      // series: a 250-series needle asked the LRU 500 times for a dozen blocks).
      const waiting: { s: FilterSeries; i: number; labels: Record<string, string> }[] = [];
      const held = new Map<string, LoadedBlock | undefined>();
      req.series.forEach((s, i) => {
        const labels = this.testable(s, stats, verdicts);
        if (Array.isArray(labels)) {
          kept[i] = labels;
          return;
        }
        const location = locationOf(s);
        let block = held.get(location.key);
        if (block === undefined && !held.has(location.key)) {
          block = this.cache.held(location.key);
          held.set(location.key, block);
        }
        let record: BloomRecord | undefined;
        try {
          record =
            block === undefined ? undefined : this.cache.cutHeld(block, location, s.fingerprint);
        } catch (error) {
          kept[i] = this.readFailed(s, location, error, stats, verdicts);
          return;
        }
        if (record === undefined) {
          waiting.push({ s, i, labels });
          return;
        }
        sources.hit++;
        stats.cacheHits++;
        records[i] = record;
        labelsOf[i] = labels;
        cut++;
        kept[i] = this.judge(s, location, record, labels, compiled, stats, verdicts);
      });
      if (table === undefined) this.tables.set(req.series, SEEN);
      else if (cut === req.series.length) {
        this.tables.set(req.series, new GroupTable(req.series, records, labelsOf, held));
      }
      await mapLimit(waiting, this.config.maxConcurrentReads, async ({ s, i, labels }) => {
        const location = locationOf(s);
        let record: BloomRecord;
        try {
          // The cache's load is shared by every caller of the block, so one caller's
          // deadline does not cancel it (its store read has its own S3 deadline): this only
          // stops waiting.
          const got = await waitAtMost(
            this.cache.get(location, s.fingerprint),
            this.config.readTimeoutMs,
          );
          record = got.bloom;
          sources[got.source]++;
          if (got.source === "miss") stats.blocksRead++;
          else stats.cacheHits++;
        } catch (error) {
          kept[i] = this.readFailed(s, location, error, stats, verdicts);
          return;
        }
        kept[i] = this.judge(s, location, record, labels, compiled, stats, verdicts);
      });
      for (const [result, n] of Object.entries(sources)) {
        if (n > 0) this.metrics.cacheRequests.inc({ result }, n);
      }
    }
    return this.answer(req, kept, stats, verdicts, started);
  }

  /**
   * {@link judge} for each group of a request that has a good table; without explain, a
   * group whose series test fails, or each of whose chunks fails its test, is skipped here
   * without finding its bloom or walking its test (judge answers the others).
   */
  private judgeTable(
    table: GroupTable,
    compiled: CompiledTest,
    kept: (SegmentChunk[] | undefined)[],
    stats: FilterStats,
    verdicts: Verdicts,
  ): void {
    const { series, mode, records, labels, firstChunk, chunkLow, chunkHigh } = table;
    const test = verdicts.explain ? undefined : compiled.testerOf(table);
    for (let i = 0; i < series.length; i++) {
      const s = series[i]!;
      if (test !== undefined && mode[i] !== BY_RECORD) {
        let may = mode[i] === BY_SERIES && test(i, 0, 0);
        for (let c = firstChunk[i]!; mode[i] === BY_CHUNK && !may && c < firstChunk[i + 1]!; c++) {
          may = test(i, chunkLow[c]!, chunkHigh[c]!);
        }
        if (!may) {
          stats.seriesSkipped++;
          kept[i] = NONE;
          continue;
        }
      }
      kept[i] = this.judge(s, locationOf(s), records[i]!, labels[i]!, compiled, stats, verdicts);
    }
  }

  /** The answer to `req` once each series' kept refs are known (`table`: its table, if used). */
  private answer(
    req: FilterRequest,
    kept: readonly (SegmentChunk[] | undefined)[],
    stats: FilterStats,
    verdicts: Verdicts,
    started: number,
    table?: GroupTable,
  ): FilterResponse {
    const series: FilterResponse["series"] = [];
    let sent = table?.chunks ?? 0;
    let left = 0;
    for (let i = 0; i < kept.length; i++) {
      const chunks = kept[i]!;
      if (table === undefined) sent += req.series[i]!.chunks.length;
      left += chunks.length;
      if (chunks.length > 0) series.push({ fingerprint: req.series[i]!.fingerprint, chunks });
    }
    stats.series += kept.length;
    stats.chunks += sent;
    stats.chunksPruned += sent - left;
    this.record(req.tenant, stats, started);
    return { series, stats, ...verdicts.field() };
  }

  /**
   * The series' labels when its bloom (at `s.bloom`) can be asked for; else the refs it
   * keeps untested (no chunk, a missing, damaged or oversized bloom location, labels that
   * do not parse). Nothing made for a testable series: this runs for every series of a
   * request, thousands for a wide needle.
   */
  private testable(
    s: FilterSeries,
    stats: FilterStats,
    verdicts: Verdicts,
  ): Record<string, string> | SegmentChunk[] {
    if (s.chunks.length === 0) return NONE;
    const { bloom } = s;
    if (bloom.kind === "missing") return failOpen(s, "missing_bloom", stats, verdicts);
    if (
      !(Number.isSafeInteger(bloom.offset) && bloom.offset >= 0) ||
      !(Number.isSafeInteger(bloom.length) && bloom.length > 0)
    ) {
      return failOpen(s, "corrupt_bloom", stats, verdicts);
    }
    if (bloom.length > this.config.maxBloomRecordBytes) {
      return failOpen(s, "oversized_bloom", stats, verdicts);
    }
    let labels = this.parsedLabels.get(s.labels);
    if (labels === undefined) {
      try {
        labels = labelsRecord(s.labels);
      } catch {
        labels = null;
      }
      if (this.parsedLabels.size >= MAX_PARSED_LABELS) this.parsedLabels.clear();
      this.parsedLabels.set(s.labels, labels);
    }
    return labels ?? failOpen(s, "invalid_labels", stats, verdicts);
  }

  /** The refs a series whose bloom could not be read keeps (all), with the reason. */
  private readFailed(
    s: FilterSeries,
    location: BloomRecordLocation,
    error: unknown,
    stats: FilterStats,
    verdicts: Verdicts,
  ): SegmentChunk[] {
    const reason: FailOpenReason =
      error instanceof BloomReadError
        ? error.reason
        : isDeadlineReason(error)
          ? "timeout"
          : "internal_error";
    if (reason === "internal_error") {
      this.logger.error({ err: error, key: location.key }, "bloom read failed unexpectedly");
    }
    return failOpen(s, reason, stats, verdicts);
  }

  /**
   * The refs of `s` its bloom cannot rule out: the series first, then each chunk. A plain
   * loop that makes nothing per chunk unless asked to explain: a closure per pruned chunk
   * was a quarter of what a needle over 2,500 chunks allocated.
   */
  private judge(
    s: FilterSeries,
    location: BloomRecordLocation,
    bloomRecord: BloomRecord,
    labels: Record<string, string>,
    compiled: CompiledTest,
    stats: FilterStats,
    verdicts: Verdicts,
  ): SegmentChunk[] {
    try {
      // Where the test has line leaves, what its metadata part alone would have let through
      // was pruned by them (the stats count it apart).
      const { metadataOnly } = compiled;
      const lineLeaves = metadataOnly !== compiled.test;
      let byChunk = s.chunks.length > 0;
      for (const c of s.chunks) byChunk &&= c.prefixed;
      if (!byChunk && !compiled.series(bloomRecord, labels)) {
        stats.seriesSkipped++;
        if (lineLeaves && compiled.series(bloomRecord, labels, metadataOnly)) {
          stats.chunksPrunedByLine += s.chunks.length;
        }
        if (verdicts.explain) {
          const series = (t: BloomTest) => compiled.series(bloomRecord, labels, t);
          verdicts.pruned(s, s.chunks, "series", () => failedLeaf(compiled.test, series));
        }
        return NONE;
      }
      let kept: SegmentChunk[] | undefined;
      let pruned: SegmentChunk[] | undefined;
      for (const c of s.chunks) {
        if (!c.prefixed || compiled.chunk(bloomRecord, c, labels)) {
          (kept ??= []).push(c);
          continue;
        }
        if (lineLeaves && compiled.chunk(bloomRecord, c, labels, metadataOnly)) {
          stats.chunksPrunedByLine++;
        }
        if (verdicts.explain) (pruned ??= []).push(c);
      }
      if (byChunk && kept === undefined) stats.seriesSkipped++;
      // Given once the series is done: a series that fails open midway has no pruned chunk.
      for (const c of pruned ?? []) {
        const chunk = (t: BloomTest) => compiled.chunk(bloomRecord, c, labels, t);
        verdicts.pruned(s, [c], "chunk", () => failedLeaf(compiled.test, chunk));
      }
      return kept ?? NONE;
    } catch (error) {
      this.logger.error({ err: error, key: location.key }, "bloom test failed unexpectedly");
      return failOpen(s, "internal_error", stats, verdicts);
    }
  }

  private record(tenant: string, stats: FilterStats, started: number): void {
    const m = this.metrics;
    m.filterDuration.observe((performance.now() - started) / 1000);
    const failed = Object.values(stats.failedOpen).reduce((a, b) => a + b, 0);
    m.series.inc({ outcome: "skipped" }, stats.seriesSkipped);
    m.series.inc({ outcome: "kept" }, stats.series - stats.seriesSkipped);
    m.chunks.inc({ outcome: "kept" }, stats.chunks - stats.chunksPruned);
    m.chunks.inc({ outcome: "pruned" }, stats.chunksPruned);
    for (const [reason, n] of Object.entries(stats.failedOpen)) {
      m.failedOpenChunks.inc({ reason }, n);
    }
    if (failed > 0) {
      this.logger.warn(
        { tenant, failedOpen: stats.failedOpen },
        "kept chunk refs whose blooms could not be tested",
      );
    }
  }
}
