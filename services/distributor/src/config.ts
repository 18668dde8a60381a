import { availableParallelism } from "node:os";
import {
  ConfigError,
  checkRange,
  defineSchema,
  sectionLoader,
  tenantIdError,
  tenantViews,
} from "@sieve/config";
import type { SectionLoader, SectionSources } from "@sieve/config";
import { DEFAULT_LIMITS } from "./limits.js";
import { otlpRuleError } from "./otlp.js";
import type { TenantLimits } from "./limits.js";

/** The distributor's configuration. Sizes in bytes, durations in milliseconds. */
export interface DistributorConfig {
  /**
   * Whether X-Scope-OrgID is required (multi-tenant). Off: every push is tenant `fake`.
   * The `sieve` command sets it from the top-level `authEnabled`; this section's own key
   * (older) still wins when given.
   */
  readonly authEnabled: boolean;
  /** Largest request body as received, before decompression (413 above). */
  readonly maxBodyBytes: number;
  /** Largest body after gzip/deflate/snappy decompression (413 above), enforced while inflating. */
  readonly maxDecompressedBytes: number;
  /**
   * Worker threads that decompress, decode and validate pushes (default: one per core);
   * 0 prepares every push on the main thread.
   */
  readonly decodeThreads: number;
  /** Old-generation heap of each decode worker, in MiB; a push needing more gets a 413. */
  readonly decodeWorkerHeapMb: number;
  /**
   * Uncompressed bodies up to this many bytes are prepared on the main thread, where a
   * worker hop (~0.1 ms) would cost more than decoding them.
   */
  readonly inlineDecodeMaxBytes: number;
  /**
   * A tenant's limiter state is forgotten after this long without an accepted push, once
   * it holds nothing a new one would not (a full rate bucket, no new streams counted in
   * the current hour and day), so forgetting never loosens a limit.
   */
  readonly tenantIdleMs: number;
  /** Limits of every tenant. */
  readonly limits: TenantLimits;
  /** Per-tenant changes to `limits`, by tenant ID. */
  readonly overrides: Readonly<Record<string, Partial<TenantLimits>>>;
}

/**
 * Defaults that work with no file: Loki's limits, auth off, 16 MiB bodies before and after
 * decompression. Loki allows 100 MB inflated; Sieve allows less because a decoded push costs
 * up to ~25 bytes of JavaScript heap per byte of protobuf (2-byte empty messages each become
 * an object), and real clients send batches of about 1 MiB (Promtail, Alloy).
 */
export const DEFAULT_CONFIG: DistributorConfig = {
  authEnabled: false,
  maxBodyBytes: 16 * 1024 * 1024,
  maxDecompressedBytes: 16 * 1024 * 1024,
  decodeThreads: availableParallelism(),
  decodeWorkerHeapMb: 512,
  inlineDecodeMaxBytes: 16 * 1024,
  tenantIdleMs: 3_600_000,
  limits: DEFAULT_LIMITS,
  overrides: {},
};

// The shared configuration errors: re-exported so importers of this package keep working.
export { CONFIG_ERRORS, ConfigError } from "@sieve/config";
export type { ConfigErrorCode } from "@sieve/config";

/**
 * Where configuration comes from: the file (read here, or already read by the `sieve`
 * command), values inherited from the top level, and the environment (default `process.env`).
 */
export type ConfigSources = SectionSources;

/** Every option is an integer ≥ 0 or a boolean; overrides are for tenants a push could name. */
const SCHEMA = defineSchema({
  section: "distributor",
  defaults: DEFAULT_CONFIG,
  group: "limits",
  tenantError: tenantIdError,
  min: 0,
  shownDefaults: {
    decodeThreads: "one per core",
    "limits.otlpResourceIndexLabels": "Loki's 17: `service.name`, `k8s.pod.name`, ...",
    "limits.discoverServiceName": "Loki's 13: `service`, `app`, `application`, ...",
  },
  docs: {
    authEnabled:
      "require `X-Scope-OrgID` (off: every push is tenant `fake`); older than the top-level `authEnabled`, which it overrides here",
    maxBodyBytes: "largest request body as received, before decompression (413 above)",
    maxDecompressedBytes: "largest body after gzip, deflate or snappy (413 above)",
    decodeThreads: "worker threads that inflate, decode and validate pushes; 0: inline",
    decodeWorkerHeapMb: "heap cap of each decode worker, MiB (a push needing more gets a 413)",
    inlineDecodeMaxBytes: "uncompressed bodies up to this size are decoded on the main thread",
    tenantIdleMs: "idle tenant limiter state is forgotten once it equals a new one's",
    limits: {
      maxLineBytes: "longest line (`max_line_size`); 0 = no limit",
      maxLabelNamesPerSeries: "label names per stream, `service_name` not counted",
      maxLabelNameLength: "longest label name, bytes",
      maxLabelValueLength: "longest label value, bytes",
      rejectOldSamples: "refuse entries older than `rejectOldSamplesMaxAgeMs`",
      rejectOldSamplesMaxAgeMs:
        "oldest entry accepted, back from now (`reject_old_samples_max_age`)",
      creationGracePeriodMs: "how far in the future an entry may be (`creation_grace_period`)",
      allowStructuredMetadata: "whether entries may carry structured metadata",
      maxStructuredMetadataBytes: "names plus values of one entry's metadata; 0 = no limit",
      maxStructuredMetadataCount: "metadata pairs on one entry; 0 = no limit",
      ingestionRateBytes: "tenant rate, token bucket refill per second (`ingestion_rate_mb`: 4)",
      ingestionBurstBytes: "tenant burst, bucket size (`ingestion_burst_size_mb`: 6)",
      perStreamRateBytes: "one stream's rate per second (`per_stream_rate_limit`: 3MB)",
      perStreamBurstBytes: "one stream's burst (`per_stream_rate_limit_burst`: 15MB)",
      maxNewStreamsPerHour: "new streams admitted per hour (series limiter)",
      maxNewStreamsPerDay: "new streams admitted per day (series limiter)",
      otlpResourceIndexLabels:
        "OTLP resource attributes stored as stream labels, names or `/regex/` (the default is Loki's list, in `otlp.ts`)",
      otlpResourceDrop:
        "OTLP resource attributes dropped, names or `/regex/` (win over the index list)",
      otlpScopeDrop: "OTLP scope attributes dropped, names or `/regex/`",
      otlpLogDrop: "OTLP log record attributes dropped, names or `/regex/`",
      discoverLogLevels:
        "add `detected_level` structured metadata to each entry without one (Loki's `discover_log_levels`): a level label or field, an OTLP severity, the line's JSON or logfmt level, keywords; else `unknown`",
      discoverServiceName:
        "a stream without `service_name` gets the first of these labels it has (an OTLP resource: without `service.name`), as Loki's `discover_service_name`; none: `unknown_service`; empty list: off",
    },
  },
});

/**
 * Environment variables override the file: `SIEVE_DISTRIBUTOR_` + the option's path in
 * UPPER_SNAKE_CASE (`SIEVE_DISTRIBUTOR_MAX_BODY_BYTES=1048576`,
 * `SIEVE_DISTRIBUTOR_LIMITS_INGESTION_RATE_BYTES=8388608`).
 */
export const ENV_PREFIX = SCHEMA.envPrefix;

/**
 * Reads the configuration: defaults, then the file's `distributor` section, then the
 * environment; validates it and throws a {@link ConfigError} naming the first bad option.
 * Carries its schema (`loadConfig.schema`) for the `sieve` command.
 */
export const loadConfig: SectionLoader<DistributorConfig> = sectionLoader(SCHEMA, validate);

/**
 * Sizes, rates, bursts and label limits must be > 0 (0 would refuse every push); a worker
 * needs some heap.
 */
function validate(config: DistributorConfig): void {
  checkRange("maxBodyBytes", config.maxBodyBytes, 1);
  checkRange("maxDecompressedBytes", config.maxDecompressedBytes, 1);
  checkRange("decodeWorkerHeapMb", config.decodeWorkerHeapMb, 16);
  checkRange("tenantIdleMs", config.tenantIdleMs, 1);
  for (const [path, l] of tenantViews("limits", config.limits, config.overrides)) {
    checkRange(`${path}.ingestionRateBytes`, l.ingestionRateBytes, 1);
    checkRange(`${path}.ingestionBurstBytes`, l.ingestionBurstBytes, 1);
    checkRange(`${path}.perStreamRateBytes`, l.perStreamRateBytes, 1);
    checkRange(`${path}.perStreamBurstBytes`, l.perStreamBurstBytes, 1);
    checkRange(`${path}.maxLabelNamesPerSeries`, l.maxLabelNamesPerSeries, 1);
    checkRange(`${path}.maxLabelNameLength`, l.maxLabelNameLength, 1);
    checkRange(`${path}.maxLabelValueLength`, l.maxLabelValueLength, 1);
    for (const key of [
      "otlpResourceIndexLabels",
      "otlpResourceDrop",
      "otlpScopeDrop",
      "otlpLogDrop",
    ] as const) {
      const error = otlpRuleError(l[key]);
      if (error !== undefined) throw new ConfigError("invalid_value", `${path}.${key}`, error);
    }
  }
}
