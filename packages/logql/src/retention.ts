/**
 * Retention rules, as Loki's (`validation.Limits.RetentionPeriod`, `StreamRetention`, and
 * `pkg/compactor/retention/expiration.go`): a period per tenant, and per-stream rules by
 * selector with a priority. The compactor deletes what they expire; the querier hides it
 * before the compactor has run (both read this one module).
 */
import type { Matcher } from "./ast.js";
import { LogqlError } from "./errors.js";
import { parseExpr } from "./index.js";
import { matchesLabels } from "./matchers.js";
import { parseDuration } from "./units.js";

/** A tenant's retention options (a group of the compactor's configuration). */
export interface RetentionLimits {
  /** Loki's `retention_period`: lines older are deleted; 0 keeps them forever. */
  readonly retentionPeriodMs: number;
  /**
   * Loki's `retention_stream`, one rule a string: `period=<duration> [priority=<n>]
   * <selector>`, e.g. `period=24h priority=1 {namespace="dev"}`. A stream some rule
   * selects keeps the period of the highest-priority one (equal priority: the shortest).
   */
  readonly retentionStream: readonly string[];
}

/** Loki's defaults: retention off. */
export const DEFAULT_RETENTION_LIMITS: RetentionLimits = {
  retentionPeriodMs: 0,
  retentionStream: [],
};

/** Loki refuses shorter periods: the index is kept per day. */
export const MIN_RETENTION_PERIOD_MS = 24 * 3_600_000;

/** A parsed `retentionStream` rule. */
export interface StreamRetention {
  readonly selector: string;
  readonly matchers: readonly Matcher[];
  readonly priority: number;
  readonly periodMs: number;
}

/**
 * Parses one rule (see {@link RetentionLimits.retentionStream}); throws an Error whose
 * message says what is wrong (the config loader names the option).
 */
export function parseStreamRetention(text: string): StreamRetention {
  const brace = text.indexOf("{");
  if (brace < 0) throw new Error(`no selector in ${JSON.stringify(text)}`);
  const selector = text.slice(brace).trim();
  let periodMs: number | undefined;
  let priority = 0;
  for (const word of text.slice(0, brace).trim().split(/\s+/)) {
    if (word === "") continue;
    const [name, value = ""] = word.split("=", 2);
    if (name === "period") {
      const ns = parseDuration(value);
      if (ns === undefined) throw new Error(`period ${JSON.stringify(value)} is not a duration`);
      periodMs = Math.round(ns / 1e6);
    } else if (name === "priority" && /^-?[0-9]{1,9}$/.test(value)) {
      priority = Number(value);
    } else {
      throw new Error(`${JSON.stringify(word)}: expected period=<duration> or priority=<n>`);
    }
  }
  if (periodMs === undefined) throw new Error(`no period=<duration> in ${JSON.stringify(text)}`);
  if (periodMs < MIN_RETENTION_PERIOD_MS) {
    // Loki's words.
    throw new Error(`retention period must be >= 24h was ${periodMs / 3_600_000}h`);
  }
  let matchers: readonly Matcher[];
  try {
    const e = parseExpr(selector);
    if (e.kind !== "log" || e.pipeline.length > 0) throw new Error("only a stream selector");
    matchers = e.matchers;
  } catch (error) {
    const why = error instanceof LogqlError || error instanceof Error ? error.message : "";
    throw new Error(`selector ${selector}: ${why}`);
  }
  return { selector, matchers, priority, periodMs };
}

/** One tenant's rules, parsed once. */
export class TenantRetention {
  readonly periodMs: number;
  readonly streams: readonly StreamRetention[];

  constructor(limits: RetentionLimits) {
    this.periodMs = limits.retentionPeriodMs;
    this.streams = limits.retentionStream.map(parseStreamRetention);
  }

  /** Whether anything of the tenant ever expires. */
  get expires(): boolean {
    return this.periodMs > 0 || this.streams.length > 0;
  }

  /**
   * The period of a stream, ms (0: kept forever): the matching rule of highest priority,
   * of equal priority the shortest, else the tenant's period (Loki's
   * `RetentionPeriodFor`).
   */
  periodFor(labels: Readonly<Record<string, string>>): number {
    let best: StreamRetention | undefined;
    for (const rule of this.streams) {
      if (!matchesLabels(rule.matchers, labels)) continue;
      if (
        best === undefined ||
        rule.priority > best.priority ||
        (rule.priority === best.priority && rule.periodMs < best.periodMs)
      ) {
        best = rule;
      }
    }
    return best?.periodMs ?? this.periodMs;
  }

  /**
   * The oldest timestamp (ns) of a stream that is still kept at `nowMs`: lines before it
   * are expired. Undefined when the stream is kept forever.
   */
  cutoffNs(labels: Readonly<Record<string, string>>, nowMs: number): bigint | undefined {
    const period = this.periodFor(labels);
    return period > 0 ? BigInt(nowMs - period) * 1_000_000n : undefined;
  }
}

/** Every tenant's retention: the limits, per-tenant overrides laid over them. */
export interface RetentionConfig {
  /** Loki's `retention_enabled`: off, nothing expires and queries are not clamped. */
  readonly enabled: boolean;
  readonly limits: RetentionLimits;
  readonly overrides: Readonly<Record<string, Partial<RetentionLimits>>>;
}

/** Retention off: what a querier without a compactor configuration uses. */
export const NO_RETENTION: RetentionConfig = {
  enabled: false,
  limits: DEFAULT_RETENTION_LIMITS,
  overrides: {},
};

/** Parsed rules per tenant, made once each. */
export class Retention {
  private readonly tenants = new Map<string, TenantRetention>();
  private readonly off = new TenantRetention(DEFAULT_RETENTION_LIMITS);

  constructor(readonly config: RetentionConfig) {}

  /** The rules of `tenant` (nothing expires when retention is off). */
  of(tenant: string): TenantRetention {
    if (!this.config.enabled) return this.off;
    let t = this.tenants.get(tenant);
    if (t === undefined) {
      const o = Object.hasOwn(this.config.overrides, tenant)
        ? this.config.overrides[tenant]
        : undefined;
      t = new TenantRetention({ ...this.config.limits, ...o });
      this.tenants.set(tenant, t);
    }
    return t;
  }
}
