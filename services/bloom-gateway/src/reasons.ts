/**
 * Why a gateway kept refs it could not test ("fail open"): the keys of
 * `FilterStats.failedOpen`, the `reason` label of the fail-open metric and the word in
 * the log line, one table. A kept ref is never wrong, only more work for the querier.
 */
export const FAIL_OPEN_REASONS = {
  missing_bloom: "the index lists no bloom for the series",
  block_not_found: "the bloom block object does not exist",
  corrupt_bloom: "the bloom record is damaged, truncated or not the series'",
  oversized_bloom: "the bloom record is larger than maxBloomRecordBytes",
  invalid_labels: "the series' labels do not parse, so stream-label leaves cannot be told apart",
  timeout: "reading the bloom (gateway) or the gateway's answer (client) took too long",
  store_error: "the object store failed",
  internal_error: "an unexpected error while testing the series",
  gateway_error: "the gateway answered with an error or could not be reached (client side)",
} as const;

/** A key of {@link FAIL_OPEN_REASONS}. */
export type FailOpenReason = keyof typeof FAIL_OPEN_REASONS;
