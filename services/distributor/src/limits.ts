import { DEFAULT_DISCOVER_SERVICE_NAME, DEFAULT_OTLP_INDEX_LABELS } from "./otlp.js";

/**
 * Per-tenant limits with Loki's defaults (pkg/validation/limits.go). Every size is in bytes,
 * every duration in milliseconds, every rate in bytes per second. A tenant gets the defaults
 * with its entry of `overrides` laid over them.
 */
export interface TenantLimits {
  /** Longest line accepted (Loki `max_line_size`, 256 KB); 0 disables the check. */
  readonly maxLineBytes: number;
  /** Most label names per stream (Loki `max_label_names_per_series`, 15). */
  readonly maxLabelNamesPerSeries: number;
  /** Longest label name (Loki `max_label_name_length`, 1024). */
  readonly maxLabelNameLength: number;
  /** Longest label value (Loki `max_label_value_length`, 2048). */
  readonly maxLabelValueLength: number;
  /** Whether to refuse entries older than `rejectOldSamplesMaxAgeMs` (Loki: true). */
  readonly rejectOldSamples: boolean;
  /** Oldest entry accepted, back from now (Loki `reject_old_samples_max_age`, 7 days). */
  readonly rejectOldSamplesMaxAgeMs: number;
  /** How far ahead of now an entry may be (Loki `creation_grace_period`, 10 minutes). */
  readonly creationGracePeriodMs: number;
  /** Whether entries may carry structured metadata (Loki: true). */
  readonly allowStructuredMetadata: boolean;
  /** Largest structured metadata of an entry, names plus values (Loki: 64 KB); 0 disables. */
  readonly maxStructuredMetadataBytes: number;
  /** Most structured metadata pairs on an entry (Loki: 128); 0 disables. */
  readonly maxStructuredMetadataCount: number;
  /** Tenant ingestion rate (Loki `ingestion_rate_mb`, 4 MB/s), a token bucket refill. */
  readonly ingestionRateBytes: number;
  /** Tenant ingestion burst (Loki `ingestion_burst_size_mb`, 6 MB), the bucket's size. */
  readonly ingestionBurstBytes: number;
  /** Rate of one stream (Loki `per_stream_rate_limit`, 3 MB/s). */
  readonly perStreamRateBytes: number;
  /** Burst of one stream (Loki `per_stream_rate_limit_burst`, 15 MB). */
  readonly perStreamBurstBytes: number;
  /** New streams admitted per hour (Sieve's series limiter); 0 refuses every new stream. */
  readonly maxNewStreamsPerHour: number;
  /** New streams admitted per day (Sieve's series limiter). */
  readonly maxNewStreamsPerDay: number;
  /** OTLP resource attributes stored as stream labels (names or `/regex/`; Loki's list). */
  readonly otlpResourceIndexLabels: readonly string[];
  /** OTLP resource attributes dropped (names or `/regex/`); they win over the index list. */
  readonly otlpResourceDrop: readonly string[];
  /** OTLP scope attributes dropped. */
  readonly otlpScopeDrop: readonly string[];
  /** OTLP log record attributes dropped. */
  readonly otlpLogDrop: readonly string[];
  /**
   * Loki's `discover_service_name`: a stream without `service_name` gets the first of
   * these labels it has, or `unknown_service`; empty turns discovery off.
   */
  readonly discoverServiceName: readonly string[];
  /**
   * Loki's `discover_log_levels`: each entry gets `detected_level` structured metadata
   * (from a level label or field, an OTLP severity, the line), unless it has one.
   */
  readonly discoverLogLevels: boolean;
}

const MB = 1024 * 1024;

/** Loki's defaults, and Sieve's for the series limiter. */
export const DEFAULT_LIMITS: TenantLimits = {
  maxLineBytes: 256 * 1024,
  maxLabelNamesPerSeries: 15,
  maxLabelNameLength: 1024,
  maxLabelValueLength: 2048,
  rejectOldSamples: true,
  rejectOldSamplesMaxAgeMs: 7 * 24 * 3600 * 1000,
  creationGracePeriodMs: 10 * 60 * 1000,
  allowStructuredMetadata: true,
  maxStructuredMetadataBytes: 64 * 1024,
  maxStructuredMetadataCount: 128,
  ingestionRateBytes: 4 * MB,
  ingestionBurstBytes: 6 * MB,
  perStreamRateBytes: 3 * MB,
  perStreamBurstBytes: 15 * MB,
  maxNewStreamsPerHour: 50_000,
  maxNewStreamsPerDay: 200_000,
  otlpResourceIndexLabels: DEFAULT_OTLP_INDEX_LABELS,
  otlpResourceDrop: [],
  otlpScopeDrop: [],
  otlpLogDrop: [],
  discoverServiceName: DEFAULT_DISCOVER_SERVICE_NAME,
  discoverLogLevels: true,
};

/** What the distributor asks of its limits: the effective limits of a tenant. */
export interface Limits {
  forTenant(tenant: string): TenantLimits;
}

/**
 * Defaults with per-tenant overrides, resolved once per overridden tenant. Other tenants
 * get the defaults object itself: a tenant ID costs nothing here.
 */
export class OverridableLimits implements Limits {
  private readonly resolved = new Map<string, TenantLimits>();

  constructor(
    private readonly defaults: TenantLimits,
    overrides: Readonly<Record<string, Partial<TenantLimits>>> = {},
  ) {
    for (const [tenant, override] of Object.entries(overrides)) {
      this.resolved.set(tenant, { ...defaults, ...override });
    }
  }

  forTenant(tenant: string): TenantLimits {
    return this.resolved.get(tenant) ?? this.defaults;
  }
}

/**
 * A token bucket: `rate` tokens per second up to `burst`, starting full, as Go's
 * `x/time/rate.Limiter` that Loki uses. `allow(n)` takes n tokens if there are n.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    readonly rate: number,
    readonly burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Takes `n` tokens at time `now` (ms) if the bucket holds them. */
  allow(n: number, now: number): boolean {
    this.refill(now);
    if (n > this.tokens) return false;
    this.tokens -= n;
    return true;
  }

  /** Whether the bucket would be full at `now`: then forgetting it changes nothing. */
  isFull(now: number): boolean {
    this.refill(now);
    return this.tokens >= this.burst;
  }

  private refill(now: number): void {
    if (now > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
      this.last = now;
    }
  }
}

/**
 * Per-stream token buckets of one tenant. Buckets that have refilled completely are
 * forgotten when the map grows past `sweepAt` and on every {@link sweep}, so memory follows
 * the streams active recently, not every stream ever seen.
 */
export class StreamRates {
  private readonly buckets = new Map<bigint, TokenBucket>();
  private sweepAt: number;

  constructor(private readonly initialSweepAt = 10_000) {
    this.sweepAt = initialSweepAt;
  }

  allow(fingerprint: bigint, bytes: number, limits: TenantLimits, now: number): boolean {
    let bucket = this.buckets.get(fingerprint);
    if (bucket === undefined) {
      if (this.buckets.size >= this.sweepAt) this.sweep(now);
      bucket = new TokenBucket(limits.perStreamRateBytes, limits.perStreamBurstBytes, now);
      this.buckets.set(fingerprint, bucket);
    }
    return bucket.allow(bytes, now);
  }

  /** Buckets held. */
  get size(): number {
    return this.buckets.size;
  }

  /** Forgets the buckets that have refilled: a full bucket is what a new one would be. */
  sweep(now: number): void {
    for (const [fp, bucket] of this.buckets) if (bucket.isFull(now)) this.buckets.delete(fp);
    this.sweepAt = Math.max(this.initialSweepAt, this.buckets.size * 2);
  }
}
