import {
  ConfigError,
  checkRange,
  defineSchema,
  sectionLoader,
  tenantIdError,
  tenantViews,
} from "@sieve/config";
import type { SectionLoader, SectionSources } from "@sieve/config";
import {
  DEFAULT_RETENTION_LIMITS,
  MIN_RETENTION_PERIOD_MS,
  parseStreamRetention,
  type RetentionConfig,
  type RetentionLimits,
} from "@sieve/logql";

/** The compactor's configuration (Loki's `compactor` block and its retention limits). */
export interface CompactorConfig {
  /**
   * Who holds the lock, in the lock object and logs; empty: `<host>-<pid>`. Two compactors
   * must not share one.
   */
  readonly instanceId: string;
  /** Loki's `compaction_interval` (10m): time between the starts of two runs. */
  readonly compactionIntervalMs: number;
  /**
   * How long the lock is held without renewal: a compactor that dies is replaced after at
   * most this. It renews at a third of it; a run that cannot renew stops before deleting.
   */
  readonly lockTtlMs: number;
  /** How often a compactor without the lock tries to take it. */
  readonly lockRetryMs: number;
  /** A tenant's day is compacted once it has this many segments or more. */
  readonly minSegmentsToCompact: number;
  /** A merged segment holds at most this many chunk listings; more are split by series. */
  readonly maxSegmentChunks: number;
  /**
   * An unreferenced chunk or bloom block is deleted only once older than this: a flush in
   * progress writes its chunks and blooms before the index that references them.
   */
  readonly garbageGracePeriodMs: number;
  /** Loki's `retention_enabled`: apply `limits` (off: nothing expires, queries unclamped). */
  readonly retentionEnabled: boolean;
  /**
   * Loki's `delete_request_cancel_period` (24h): a delete request can be cancelled for
   * this long after it is made, and is processed only after it.
   */
  readonly deleteRequestCancelPeriodMs: number;
  /**
   * Loki's `retention_delete_delay` (2h): chunks whose index entries a delete request
   * replaced are deleted this long after, so a query planned just before still reads them.
   */
  readonly retentionDeleteDelayMs: number;
  /** Retention of every tenant. */
  readonly limits: RetentionLimits;
  /** Per-tenant changes to `limits`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<RetentionLimits>>>;
}

/** Loki's defaults where Loki has one. */
export const DEFAULT_CONFIG: CompactorConfig = {
  instanceId: "",
  compactionIntervalMs: 600_000,
  lockTtlMs: 60_000,
  lockRetryMs: 10_000,
  minSegmentsToCompact: 2,
  maxSegmentChunks: 200_000,
  garbageGracePeriodMs: 2 * 3_600_000,
  retentionEnabled: false,
  deleteRequestCancelPeriodMs: 24 * 3_600_000,
  retentionDeleteDelayMs: 2 * 3_600_000,
  limits: DEFAULT_RETENTION_LIMITS,
  overrides: {},
};

const SCHEMA = defineSchema({
  section: "compactor",
  defaults: DEFAULT_CONFIG,
  group: "limits",
  min: 0,
  tenantError: tenantIdError,
  shownDefaults: { instanceId: "`<host>-<pid>`" },
  docs: {
    instanceId: "who holds the lock (in the lock object and logs); two compactors must differ",
    compactionIntervalMs: "time between the starts of two runs (`compaction_interval`)",
    lockTtlMs:
      "the lock expires this long after its last renewal: a dead compactor is replaced after at most this",
    lockRetryMs: "how often a compactor without the lock tries to take it",
    minSegmentsToCompact: "a tenant's day is merged once it has this many index segments",
    maxSegmentChunks: "chunk listings per merged segment; past it the day is split by series",
    garbageGracePeriodMs:
      "an unreferenced chunk or bloom block is deleted only once this old (a flush in progress writes them before its index)",
    retentionEnabled:
      "apply `limits` (`retention_enabled`): expired data is deleted and hidden from queries",
    deleteRequestCancelPeriodMs:
      "a delete request can be cancelled this long after it is made, and is processed only after it (`delete_request_cancel_period`)",
    retentionDeleteDelayMs:
      "chunks whose index entries a delete request replaced are deleted this long after (`retention_delete_delay`)",
    limits: {
      retentionPeriodMs:
        "lines older are deleted and never returned (`retention_period`, at least 24h); 0 = forever",
      retentionStream:
        'per-stream rules (`retention_stream`): `period=<duration> [priority=<n>] <selector>`, e.g. `period=24h priority=1 {env="dev"}` (the variable splits at commas: a selector with a comma goes in the file)',
    },
  },
});

/** `SIEVE_COMPACTOR_` + the option's path in UPPER_SNAKE_CASE. */
export const ENV_PREFIX = SCHEMA.envPrefix;

function validate(config: CompactorConfig): void {
  checkRange("compactionIntervalMs", config.compactionIntervalMs, 1);
  checkRange("lockTtlMs", config.lockTtlMs, 1000);
  checkRange("lockRetryMs", config.lockRetryMs, 1);
  checkRange("minSegmentsToCompact", config.minSegmentsToCompact, 2);
  checkRange("maxSegmentChunks", config.maxSegmentChunks, 1);
  if (config.instanceId !== "" && !/^[A-Za-z0-9_.-]{1,64}$/.test(config.instanceId)) {
    throw new ConfigError("invalid_value", "compactor.instanceId", "1-64 of A-Z a-z 0-9 _ . -");
  }
  for (const [path, limits] of tenantViews("limits", config.limits, config.overrides)) {
    const period = limits.retentionPeriodMs;
    if (period !== 0 && period < MIN_RETENTION_PERIOD_MS) {
      throw new ConfigError(
        "out_of_range",
        `compactor.${path}.retentionPeriodMs`,
        `retention period must be >= 24h was ${period}ms`,
      );
    }
    limits.retentionStream.forEach((rule, i) => {
      try {
        parseStreamRetention(rule);
      } catch (error) {
        throw new ConfigError(
          "invalid_value",
          `compactor.${path}.retentionStream[${i}]`,
          (error as Error).message,
        );
      }
    });
  }
}

/**
 * Reads the configuration: defaults, the file's `compactor` section, the environment;
 * validates it (every retention rule parses) and throws a ConfigError naming the option.
 */
export const loadConfig: SectionLoader<CompactorConfig> = sectionLoader(SCHEMA, validate);

/** Where configuration comes from. */
export type ConfigSources = SectionSources;

/** The retention part of the configuration, as the querier takes it. */
export function retentionConfig(config: CompactorConfig): RetentionConfig {
  return { enabled: config.retentionEnabled, limits: config.limits, overrides: config.overrides };
}
