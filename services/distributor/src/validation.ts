import type { LabelPair } from "@sieve/proto";
import type { Label } from "@sieve/labels";
import type { TenantLimits } from "./limits.js";

/**
 * Why data is refused: the snake_case reason (Loki's constant, pkg/validation/validate.go)
 * that labels `sieve_discarded_*_total` and logs, and the HTTP status it earns. Adding a
 * reason without its status does not compile.
 */
export const REASONS = {
  invalid_labels: 400,
  missing_labels: 400,
  max_label_names_per_series: 400,
  label_name_too_long: 400,
  label_value_too_long: 400,
  duplicate_label_names: 400,
  line_too_long: 400,
  greater_than_max_sample_age: 400,
  too_far_in_future: 400,
  disallowed_structured_metadata: 400,
  structured_metadata_too_large: 400,
  structured_metadata_too_many: 400,
  rate_limited: 429,
  per_stream_rate_limit: 429,
  stream_limit: 429,
} as const satisfies Record<string, 400 | 429>;

/** A reason of {@link REASONS}. */
export type Reason = keyof typeof REASONS;

/** A refusal: its reason and Loki's message. */
export interface Rejection {
  readonly reason: Reason;
  readonly message: string;
}

/** Loki's message templates, by reason, with the same wording. */
export const messages = {
  missingLabels: () => "error at least one label pair is required per stream",
  invalidLabels: (labels: string, error: string) =>
    `Error parsing labels '${labels}' with error: ${error}`,
  maxLabelNames: (labels: string, count: number, limit: number) =>
    `entry for stream '${labels}' has ${count} label names; limit ${limit}`,
  labelNameTooLong: (labels: string, name: string) =>
    `stream '${labels}' has label name too long: '${name}'`,
  labelValueTooLong: (labels: string, value: string) =>
    `stream '${labels}' has label value too long: '${value}'`,
  duplicateLabelNames: (labels: string, name: string) =>
    `stream '${labels}' has duplicate label name: '${name}'`,
  tooOld: (labels: string, ts: string, oldest: string) =>
    `entry for stream '${labels}' has timestamp too old: ${ts}, oldest acceptable timestamp is: ${oldest}`,
  tooNew: (labels: string, ts: string) =>
    `entry for stream '${labels}' has timestamp too new: ${ts}`,
  lineTooLong: (limit: number, labels: string, length: number) =>
    `Max entry size '${limit}' bytes exceeded for stream '${labels}' while adding an entry with length '${length}' bytes`,
  disallowedStructuredMetadata: (labels: string) =>
    `stream '${labels}' includes structured metadata, but this feature is disallowed. Please see \`limits_config.allow_structured_metadata\` or contact your Loki administrator to enable it.`,
  structuredMetadataTooLarge: (labels: string, size: number, limit: number) =>
    `stream '${labels}' has structured metadata too large: '${size}' bytes, limit: '${limit}' bytes. Please see \`limits_config.max_structured_metadata_size\` or contact your Loki administrator to increase it.`,
  structuredMetadataTooMany: (labels: string, count: number, limit: number) =>
    `stream '${labels}' has too many structured metadata labels: '${count}', limit: '${limit}'. Please see \`limits_config.max_structured_metadata_entries_count\` or contact your Loki administrator to increase it.`,
  rateLimited: (tenant: string, limit: number, lines: number, bytes: number) =>
    `Ingestion rate limit exceeded for user ${tenant} (limit: ${limit} bytes/sec) while attempting to ingest '${lines}' lines totaling '${bytes}' bytes, reduce log volume or contact your Loki administrator to see if the limit can be increased`,
  perStreamRateLimit: (limit: number, labels: string, bytes: number) =>
    `Per stream rate limit exceeded (limit: ${byteSize(limit)}/sec) while attempting to ingest for stream '${labels}' totaling ${byteSize(bytes)}, consider splitting a stream via additional labels or contact your Loki administrator to see if the limit can be increased`,
  streamLimit: (labels: string, tenant: string, limitName: string, limit: number) =>
    `Maximum new streams limit exceeded (${limitName}: ${limit}) when trying to create stream ${labels}, reduce the number of new streams (reduce labels or reduce label values), or contact your Loki administrator to see if the limit can be increased, user: '${tenant}'`,
  bodyTooLarge: (size: number, limit: number) =>
    `request body too large: ${size} bytes, limit: ${limit} bytes`,
};

/** Bytes as dskit's `flagext.ByteSize` prints them: the largest binary unit that divides. */
export function byteSize(bytes: number): string {
  for (const [unit, size] of [
    ["GB", 1024 ** 3],
    ["MB", 1024 ** 2],
    ["KB", 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}B`;
}

/** A timestamp in ns as Go's `time.RFC3339` prints it in UTC. */
export function rfc3339(ns: bigint): string {
  const ms = Number(ns / 1_000_000n);
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return String(ns);
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** UTF-8 bytes of a string; the sizes Loki checks are byte lengths. */
export function utf8Bytes(s: string): number {
  // Fast path: Buffer.byteLength is native; ASCII strings need no scan in JS.
  return Buffer.byteLength(s, "utf8");
}

/** Names plus values, in bytes: Loki's `util.StructuredMetadataSize`. */
export function structuredMetadataBytes(pairs: readonly LabelPair[]): number {
  let size = 0;
  for (const p of pairs) size += utf8Bytes(p.name) + utf8Bytes(p.value);
  return size;
}

/**
 * Checks a stream's parsed, sorted labels as Loki's `ValidateLabels`: present, not too many
 * (`service_name` does not count), names and values not too long, no name twice. `raw` is
 * the label string as sent, for the message.
 */
export function validateLabels(
  labels: readonly Label[],
  raw: string,
  limits: TenantLimits,
): Rejection | undefined {
  if (labels.length === 0) return { reason: "missing_labels", message: messages.missingLabels() };
  let count = labels.length;
  if (labels.some((l) => l.name === "service_name")) count--;
  if (count > limits.maxLabelNamesPerSeries) {
    return {
      reason: "max_label_names_per_series",
      message: messages.maxLabelNames(raw, count, limits.maxLabelNamesPerSeries),
    };
  }
  let last = "";
  for (const { name, value } of labels) {
    if (utf8Bytes(name) > limits.maxLabelNameLength) {
      return { reason: "label_name_too_long", message: messages.labelNameTooLong(raw, name) };
    }
    if (utf8Bytes(value) > limits.maxLabelValueLength) {
      return { reason: "label_value_too_long", message: messages.labelValueTooLong(raw, value) };
    }
    if (name === last) {
      return { reason: "duplicate_label_names", message: messages.duplicateLabelNames(raw, name) };
    }
    last = name;
  }
  return undefined;
}

/** Bounds of acceptable timestamps for one request, computed once. */
export interface TimeBounds {
  /** Oldest acceptable timestamp, ns; undefined when old samples are accepted. */
  readonly oldestNs: bigint | undefined;
  /** Newest acceptable timestamp, ns. */
  readonly newestNs: bigint;
}

/** The time bounds of a tenant at `nowMs`. */
export function timeBounds(limits: TenantLimits, nowMs: number): TimeBounds {
  const now = BigInt(Math.floor(nowMs)) * 1_000_000n;
  return {
    oldestNs: limits.rejectOldSamples
      ? now - BigInt(limits.rejectOldSamplesMaxAgeMs) * 1_000_000n
      : undefined,
    newestNs: now + BigInt(limits.creationGracePeriodMs) * 1_000_000n,
  };
}

/**
 * Checks one entry as Loki's `ValidateEntry`, in Loki's order: too old, too new, line too
 * long, structured metadata allowed, too large, too many. `lineBytes` and `metadataBytes`
 * are the UTF-8 sizes, computed once by the caller.
 */
export function validateEntry(
  timestampNs: bigint,
  lineBytes: number,
  metadataCount: number,
  metadataBytes: number,
  labels: string,
  limits: TenantLimits,
  bounds: TimeBounds,
): Rejection | undefined {
  if (bounds.oldestNs !== undefined && timestampNs < bounds.oldestNs) {
    return {
      reason: "greater_than_max_sample_age",
      message: messages.tooOld(labels, rfc3339(timestampNs), rfc3339(bounds.oldestNs)),
    };
  }
  if (timestampNs > bounds.newestNs) {
    return { reason: "too_far_in_future", message: messages.tooNew(labels, rfc3339(timestampNs)) };
  }
  if (limits.maxLineBytes !== 0 && lineBytes > limits.maxLineBytes) {
    return {
      reason: "line_too_long",
      message: messages.lineTooLong(limits.maxLineBytes, labels, lineBytes),
    };
  }
  if (metadataCount > 0) {
    if (!limits.allowStructuredMetadata) {
      return {
        reason: "disallowed_structured_metadata",
        message: messages.disallowedStructuredMetadata(labels),
      };
    }
    const maxBytes = limits.maxStructuredMetadataBytes;
    if (maxBytes !== 0 && metadataBytes > maxBytes) {
      return {
        reason: "structured_metadata_too_large",
        message: messages.structuredMetadataTooLarge(labels, metadataBytes, maxBytes),
      };
    }
    const maxCount = limits.maxStructuredMetadataCount;
    if (maxCount !== 0 && metadataCount > maxCount) {
      return {
        reason: "structured_metadata_too_many",
        message: messages.structuredMetadataTooMany(labels, metadataCount, maxCount),
      };
    }
  }
  return undefined;
}

// The tenant ID rule is @sieve/config's, shared by every component.
export { MAX_TENANT_ID_LENGTH, tenantIdError } from "@sieve/config";
