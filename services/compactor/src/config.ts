import { defineSchema, sectionLoader } from "@sieve/config";
import type { SectionLoader } from "@sieve/config";

/**
 * The compactor's configuration, Loki's `compactor` block where Loki has the option.
 * Durations in milliseconds. For now the options of delete requests only (issue 18's
 * other parts add theirs); the per-tenant `deletionMode` is the querier's limit
 * (`querier.limits.deletionMode`), since queriers filter by it too.
 */
export interface CompactorConfig {
  /**
   * Loki's `delete_request_cancel_period` (24h): a delete request can be cancelled for
   * this long after it is made, and is processed only after it.
   */
  readonly deleteRequestCancelPeriodMs: number;
  /**
   * Loki's `retention_delete_delay` (2h): chunks whose index entries were replaced are
   * deleted this long after, so a query planned just before still reads them.
   */
  readonly retentionDeleteDelayMs: number;
}

/** Loki's defaults. */
export const DEFAULT_CONFIG: CompactorConfig = {
  deleteRequestCancelPeriodMs: 24 * 3_600_000,
  retentionDeleteDelayMs: 2 * 3_600_000,
};

const SCHEMA = defineSchema({
  section: "compactor",
  defaults: DEFAULT_CONFIG,
  min: 0,
  docs: {
    deleteRequestCancelPeriodMs:
      "a delete request can be cancelled this long after it is made, and is processed only after it (`delete_request_cancel_period`)",
    retentionDeleteDelayMs:
      "chunks whose index entries were replaced are deleted this long after (`retention_delete_delay`)",
  },
});

/**
 * Reads the `compactor` section: defaults, the file, then `SIEVE_COMPACTOR_*` variables
 * (`SIEVE_COMPACTOR_DELETE_REQUEST_CANCEL_PERIOD_MS=0`).
 */
export const loadConfig: SectionLoader<CompactorConfig> = sectionLoader(SCHEMA);
