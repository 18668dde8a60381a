import { availableParallelism } from "node:os";
import {
  checkRange,
  ConfigError,
  defineSchema,
  forTenant,
  sectionLoader,
  tenantIdError,
  tenantViews,
} from "@sieve/config";
import type { SectionLoader, SectionSources } from "@sieve/config";
import { DEFAULT_BLOCK_TARGET_BYTES } from "@sieve/chunk";
import type { BloomLayout } from "@sieve/index";

/** Per-tenant bloom options; `overrides` may change them for one tenant. */
export interface TenantBloomConfig {
  /** Whether the tenant's series get blooms at all (off: recorded as missing, `disabled`). */
  readonly bloomsEnabled: boolean;
  /**
   * Line n-gram length in code points; 0 turns line n-grams off (Loki's default: off). Each
   * bloom records the settings it was built with, and queries test it with those.
   */
  readonly ngramLength: number;
  /** Code points skipped between n-grams (Loki's `bloom_ngram_skip`). */
  readonly ngramSkip: number;
  /**
   * False-positive rate of each series' bloom (Loki's 0.01): lower keeps fewer chunks that
   * do not hold the needle, for more bits per token.
   */
  readonly falsePositiveRate: number;
  /**
   * `ribbon` (default): each bloom is built at flush as one ribbon filter of its tokens
   * (Sieve's); `exact`: one Bloom filter sized for its tokens (a quarter bigger); `scalable`:
   * the filter grown as lines arrive is written as is (Loki's; bigger still).
   */
  readonly filterLayout: BloomLayout;
  /** `name` tokens of structured metadata (a `| name=~".+"` test needs them). */
  readonly keyTokens: boolean;
  /** `name=value` tokens (a `| name="value"` test needs them). */
  readonly keyValueTokens: boolean;
  /** Chunk-prefixed tokens, so a series' chunks are tested one by one. */
  readonly prefixedTokens: boolean;
  /**
   * Whether the tenant's lines are learned into patterns (`GET /loki/api/v1/patterns`,
   * patterns.ts): Loki's `pattern_ingester.enabled`, per tenant here.
   */
  readonly patternsEnabled: boolean;
}

/** The ingester's configuration. Sizes in bytes, durations in milliseconds. */
export interface IngesterConfig {
  /** This ingester's name in index segment ids; `[A-Za-z0-9_.-]{1,64}`, unique per ingester. */
  readonly instanceId: string;
  /**
   * Worker threads that consume the queue, each owning some of the partitions (their heads,
   * blooms and flushes); 0 runs the ingester on the main thread.
   */
  readonly workers: number;
  /**
   * What the heads of the whole process may hold (chunk blocks, symbols, bloom tokens):
   * past it, the largest heads are cut and flushed early (reason `memory`).
   */
  readonly memoryBudgetBytes: number;
  /** A head chunk is cut and flushed once its compressed size reaches this (reason `full`). */
  readonly chunkTargetBytes: number;
  /** A head chunk is also cut once it holds this many uncompressed bytes (reason `full`). */
  readonly chunkMaxUncompressedBytes: number;
  /** Uncompressed bytes at which the chunk builder cuts a block. */
  readonly chunkBlockBytes: number;
  /** A head with no new entry for this long is flushed (reason `idle`). */
  readonly chunkIdleMs: number;
  /** A head older than this is flushed (reason `max_age`). */
  readonly chunkMaxAgeMs: number;
  /** How often heads are checked for idle and max age, and idle partitions committed. */
  readonly flushCheckIntervalMs: number;
  /** Partitions flushed at the same time. */
  readonly flushConcurrency: number;
  /** Object writes (chunks, blooms, segments) in flight within one partition's flush. */
  readonly flushWriteConcurrency: number;
  /** Longest pause between retries of a failed flush. */
  readonly flushRetryMaxBackoffMs: number;
  /** Cut chunks of one partition waiting for their flush past which consumption pauses. */
  readonly maxPendingFlushBytes: number;
  /**
   * `POST /flush` first waits until every record acknowledged before it was asked for has
   * been consumed: at most this long, then it answers 503.
   */
  readonly flushAllWaitMs: number;
  /** A series bloom whose bit arrays would pass this is dropped and recorded as `too_large`. */
  readonly maxBloomBytes: number;
  /** Entries one query may return when its limit is 0 (or above this): more is `too_many_entries`. */
  readonly maxEntriesPerQuery: number;
  /** Series one series request may return: more is `too_many_series`. */
  readonly maxSeriesPerQuery: number;
  /** Patterns kept per stream; past it the least recently matched goes (Loki's 300). */
  readonly patternMaxClusters: number;
  /** Pattern counts older than this are dropped (Loki's 3 h), in 10 s buckets. */
  readonly patternRetentionMs: number;
  /**
   * What the patterns of the process may hold: past it, the streams that learned least
   * recently lose theirs (checked every `flushCheckIntervalMs`).
   */
  readonly patternMemoryBytes: number;
  /** Bloom options of every tenant. */
  readonly blooms: TenantBloomConfig;
  /** Per-tenant changes to `blooms`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<TenantBloomConfig>>>;
}

/** Defaults that work with no file: Loki's chunk sizes and ages. */
export const DEFAULT_CONFIG: IngesterConfig = {
  instanceId: "ingester",
  // One a core, beside the main thread (HTTP, the log: mostly idle) and the distributor's
  // decoding pool. On two cores, bench:peers (300 MB, 500 streams, trace and span ids)
  // took everything from first push to end of flush at 24.2-24.6 MB/s with two workers,
  // 17.9-20.0 with one, 16.6 with none, at 13.3-13.5, 12.0-13.7 and 11.7 MB per CPU-second.
  workers: availableParallelism(),
  memoryBudgetBytes: 512 * 1024 * 1024,
  chunkTargetBytes: 1_572_864,
  chunkMaxUncompressedBytes: 8 * 1024 * 1024,
  chunkBlockBytes: DEFAULT_BLOCK_TARGET_BYTES,
  chunkIdleMs: 30 * 60_000,
  chunkMaxAgeMs: 2 * 3_600_000,
  flushCheckIntervalMs: 10_000,
  flushConcurrency: 4,
  flushWriteConcurrency: 8,
  flushRetryMaxBackoffMs: 30_000,
  maxPendingFlushBytes: 64 * 1024 * 1024,
  flushAllWaitMs: 300_000,
  maxBloomBytes: 4 * 1024 * 1024,
  maxEntriesPerQuery: 100_000,
  maxSeriesPerQuery: 10_000,
  patternMaxClusters: 300,
  patternRetentionMs: 3 * 3_600_000,
  patternMemoryBytes: 64 * 1024 * 1024,
  blooms: {
    bloomsEnabled: true,
    ngramLength: 0,
    ngramSkip: 0,
    falsePositiveRate: 0.01,
    filterLayout: "ribbon",
    keyTokens: true,
    keyValueTokens: true,
    prefixedTokens: true,
    // Off, as Loki's pattern_ingester.enabled: learning nearly doubles the ingest path's time
    // (pnpm bench:ingest, metadata blooms then patterns too: +85 % on lines of 8 templates,
    // BENCH_TEMPLATES=1, +52 % on lines without templates; +134-185 % and +35-60 % on a
    // busier machine), for one tab of Logs Drilldown.
    patternsEnabled: false,
  },
  overrides: {},
};

// The shared configuration errors: re-exported so importers of this package keep working.
export { CONFIG_ERRORS, ConfigError } from "@sieve/config";
export type { ConfigErrorCode } from "@sieve/config";

/**
 * Where configuration comes from: the file (read here, or already read by the `sieve`
 * command), `values` (applied after the file and before the environment, e.g. command-line
 * flags), and the environment (default `process.env`).
 */
export type ConfigSources = SectionSources;

/** Inclusive bounds of the numeric options. */
const RANGES: Record<string, readonly [number, number]> = {
  workers: [0, 64],
  memoryBudgetBytes: [1024 * 1024, 2 ** 40],
  chunkTargetBytes: [1024, 256 * 1024 * 1024],
  chunkMaxUncompressedBytes: [1024, 1024 * 1024 * 1024],
  chunkBlockBytes: [1, 4 * 1024 * 1024],
  chunkIdleMs: [1, 7 * 86_400_000],
  chunkMaxAgeMs: [1, 7 * 86_400_000],
  flushCheckIntervalMs: [10, 3_600_000],
  flushConcurrency: [1, 256],
  flushWriteConcurrency: [1, 256],
  flushRetryMaxBackoffMs: [1, 3_600_000],
  maxPendingFlushBytes: [1024, 2 ** 40],
  flushAllWaitMs: [0, 3_600_000],
  maxBloomBytes: [64, 1024 * 1024 * 1024],
  maxEntriesPerQuery: [1, 100_000_000],
  maxSeriesPerQuery: [1, 100_000_000],
  patternMaxClusters: [1, 100_000],
  patternRetentionMs: [10_000, 7 * 86_400_000],
  patternMemoryBytes: [1024 * 1024, 2 ** 40],
  ngramLength: [0, 64],
  ngramSkip: [0, 64],
  falsePositiveRate: [0.000001, 0.5],
};

const FILTER_LAYOUTS: readonly string[] = ["ribbon", "exact", "scalable"] satisfies BloomLayout[];

const INSTANCE_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** Numbers are checked against {@link RANGES} after every source, so none has a minimum when read. */
const SCHEMA = defineSchema({
  section: "ingester",
  defaults: DEFAULT_CONFIG,
  group: "blooms",
  shownDefaults: { workers: "one per core" },
  tenantError: tenantIdError,
  docs: {
    instanceId:
      "this ingester's name in index segment and bloom block ids, `[A-Za-z0-9_.-]{1,64}`; unique per ingester (`sieve ingester` defaults it to the host name, as Loki does)",
    workers:
      "worker threads consuming the queue, each owning some partitions (heads, blooms, flushes); 0: on the main thread",
    memoryBudgetBytes:
      "what the heads of the process may hold (blocks, symbols, bloom tokens): past it the largest are cut and flushed (reason `memory`)",
    chunkMaxUncompressedBytes:
      "a head is also cut once it holds this many uncompressed bytes (reason `full`)",
    chunkTargetBytes:
      "a head is cut and flushed once its compressed size reaches this (reason `full`; Loki's 1.5 MB)",
    chunkBlockBytes: "uncompressed bytes at which a chunk block is cut",
    chunkIdleMs: "a head with no new entry this long is flushed (reason `idle`; Loki's 30m)",
    chunkMaxAgeMs: "a head older than this is flushed (reason `max_age`; Loki's 2h)",
    flushCheckIntervalMs:
      "how often heads are checked for idle and age, and idle partitions committed",
    flushConcurrency: "partitions flushed at the same time",
    flushWriteConcurrency: "object writes in flight within one partition's flush",
    flushRetryMaxBackoffMs:
      "longest pause between retries of a failed flush (from 100 ms, doubling)",
    maxPendingFlushBytes:
      "cut chunks of one partition waiting for their flush past which its consumption waits",
    flushAllWaitMs:
      "`POST /flush` first waits until the records acknowledged before it are consumed: at most this long, then it answers 503",
    maxBloomBytes: "a series bloom past this is dropped and recorded as missing (`too_large`)",
    maxEntriesPerQuery:
      "entries one ingester query may return (`limit` 0 included): more is `too_many_entries`",
    maxSeriesPerQuery: "series one series request may return: more is `too_many_series`",
    patternMaxClusters:
      "patterns kept per stream (`/loki/api/v1/patterns`); past it the least recently matched is evicted (Loki's 300)",
    patternRetentionMs:
      "pattern counts (10 s buckets) older than this are dropped, and patterns left without one (Loki's 3h)",
    patternMemoryBytes:
      "what the patterns of the process may hold: past it, the streams that learned least recently lose theirs (checked every `flushCheckIntervalMs`)",
    blooms: {
      bloomsEnabled:
        'off: the tenant\'s chunks are indexed with a missing bloom (`disabled`, "may match")',
      ngramLength:
        'line n-grams of this many code points go into the bloom, so `|= "literal"` prunes chunks (literals of at least length + skip code points); 0 = off (Loki\'s default). Recorded with each bloom: a change never hides older data',
      ngramSkip:
        "code points skipped between n-grams (Loki's `bloom_ngram_skip`): fewer bloom bytes, longer literals needed",
      falsePositiveRate:
        "false-positive rate of each series' bloom (Loki's 0.01); lower keeps fewer chunks without the needle, for more bloom bytes",
      filterLayout:
        "`ribbon`: each bloom built at flush as one ribbon filter of its tokens (7.4 bits a token at 0.01, rate 2^-ceil(log2(1/rate))); `exact`: one Bloom filter sized for its tokens (9.6 bits a token at 0.01); `scalable`: the filter grown as lines arrive, written as is (Loki's layout: bigger blooms, for experiments)",
      keyTokens:
        'structured-metadata `name` tokens go into the bloom (off: a `| name=~".+"` test cannot prune; recorded with each bloom)',
      keyValueTokens:
        '`name=value` tokens go into the bloom (off: `| name="value"` cannot prune, as in Loki 3.0\'s n-gram-only blooms; recorded with each bloom)',
      prefixedTokens:
        "chunk-prefixed tokens go into a bloom covering two chunks or more, so each chunk is tested on its own (off: a chunk passes when its series does)",
      patternsEnabled:
        "the tenant's lines are learned into patterns with Drain as they are appended (`/loki/api/v1/patterns`, Logs Drilldown's Patterns tab; Loki's `pattern_ingester.enabled`, off by default as there: it costs more ingest CPU than chunks and blooms together); in memory, lost on restart",
    },
  },
});

/**
 * Environment variables override the file: `SIEVE_INGESTER_` + the option's path in
 * UPPER_SNAKE_CASE (`SIEVE_INGESTER_CHUNK_TARGET_BYTES=1048576`,
 * `SIEVE_INGESTER_BLOOMS_NGRAM_LENGTH=4`).
 */
export const ENV_PREFIX = SCHEMA.envPrefix;

/**
 * Reads the configuration: defaults, then the file's `ingester` section, then `values`,
 * then the environment; validates it and throws a {@link ConfigError} naming the first bad
 * option. Carries its schema (`loadConfig.schema`) for the `sieve` command.
 */
export const loadConfig: SectionLoader<IngesterConfig> = sectionLoader(SCHEMA, validateConfig);

/** Checks ranges and relations; throws a {@link ConfigError} naming the first bad option. */
export function validateConfig(config: IngesterConfig): void {
  if (!INSTANCE_ID.test(config.instanceId)) {
    throw new ConfigError(
      "out_of_range",
      "instanceId",
      `${JSON.stringify(config.instanceId)} is not [A-Za-z0-9_.-]{1,64}`,
    );
  }
  const check = (path: string, key: string, n: number): void => {
    const range = RANGES[key];
    if (range !== undefined) checkRange(path, n, range[0], range[1]);
  };
  for (const key of SCHEMA.scalars) {
    const value = config[key as keyof IngesterConfig];
    if (typeof value === "number") check(key, key, value);
  }
  for (const [path, b] of tenantViews("blooms", config.blooms, config.overrides)) {
    check(`${path}.ngramLength`, "ngramLength", b.ngramLength);
    check(`${path}.ngramSkip`, "ngramSkip", b.ngramSkip);
    check(`${path}.falsePositiveRate`, "falsePositiveRate", b.falsePositiveRate);
    if (!FILTER_LAYOUTS.includes(b.filterLayout)) {
      throw new ConfigError("invalid_value", `${path}.filterLayout`, "ribbon, exact or scalable");
    }
  }
  if (config.chunkMaxAgeMs < config.flushCheckIntervalMs) {
    throw new ConfigError(
      "out_of_range",
      "chunkMaxAgeMs",
      `must be at least flushCheckIntervalMs (${config.flushCheckIntervalMs})`,
    );
  }
}

/** The bloom options of `tenant`: the defaults with the tenant's overrides. */
export function tenantBlooms(config: IngesterConfig, tenant: string): TenantBloomConfig {
  return forTenant(config.blooms, config.overrides, tenant);
}
