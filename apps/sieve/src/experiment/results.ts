/**
 * What `sieve experiment run` writes to `results.json`: the spec it ran, where it ran, and
 * one row per configuration × query shape. report.ts draws `report.html` from this alone.
 */

import type { BloomLayout } from "@sieve/index";

/** The machine and build a run was measured on. */
export interface RunEnvironment {
  readonly sieveVersion: string;
  /** `git describe` of the checkout, when it is one. */
  readonly gitRevision?: string;
  readonly node: string;
  readonly platform: string;
  readonly cpuModel: string;
  readonly cpus: number;
  readonly memoryBytes: number;
  /** 1-minute load average at the start and at the end. */
  readonly loadStart: number;
  readonly loadEnd: number;
}

/** The bloom settings a configuration ran with (`blooms: false` is the baseline). */
export interface ConfigurationSettings {
  readonly blooms: boolean;
  readonly falsePositiveRate: number;
  /**
   * `ribbon`: one ribbon filter built at flush (Sieve's default); `exact`: one Bloom filter
   * sized at flush; `scalable`: Loki's arrival-time filter.
   */
  readonly layout: BloomLayout;
  /** 0 when line n-grams are off. */
  readonly ngramLength: number;
  readonly ngramSkip: number;
  /** The token kinds the blooms hold: `key`, `key=value`, `prefixed` (all by default). */
  readonly tokens: readonly string[];
  readonly chunkTargetBytes: number;
  readonly chunkBlockBytes: number;
}

/** Latency of one query shape, in milliseconds, over its repetitions. */
export interface Latency {
  readonly p50: number;
  readonly p99: number;
  readonly samples: number;
}

/** One configuration × query shape of one dataset: every figure of the run. */
export interface ResultRow {
  readonly dataset: string;
  /** The configuration's name (its spec name, with the matrix values appended). */
  readonly configuration: string;
  readonly settings: ConfigurationSettings;
  /** The query shape's name, e.g. `needle-present-narrow`. */
  readonly query: string;
  /** One concrete LogQL query of the shape (the first repetition's). */
  readonly example: string;
  /** Queries run for this row (each a different needle), cold and warm each. */
  readonly queries: number;
  /** Sums over the row's queries (cold pass). */
  readonly chunksInRange: number;
  readonly chunksPruned: number;
  readonly chunksFetched: number;
  /** Chunks the blooms kept that hold no matching line. */
  readonly falsePositiveChunks: number;
  /** falsePositiveChunks / (falsePositiveChunks + chunksPruned); null without blooms. */
  readonly observedFalsePositiveRate: number | null;
  readonly bytesFetched: number;
  /** chunksPruned / chunksInRange. */
  readonly prunedShare: number;
  /** The configuration's stored bytes (the same on every row of a configuration). */
  readonly chunkBytes: number;
  readonly bloomBytes: number;
  /** bloomBytes / chunkBytes. */
  readonly bloomRatio: number;
  /** Push to end of flush, seconds, and its ratio to the blooms-off baseline's. */
  readonly ingestSeconds: number;
  readonly ingestCostRatio: number | null;
  readonly cold: Latency;
  readonly warm: Latency;
  /** Every answer equalled the blooms-off baseline's (a run with a difference fails). */
  readonly correct: boolean;
}

/** A dataset as generated or replayed. */
export interface DatasetSummary {
  readonly name: string;
  readonly kind: "generated" | "replay";
  readonly streams: number;
  readonly lines: number;
  readonly rawBytes: number;
}

/** The whole of `results.json`. */
export interface ExperimentResults {
  /** The spec as read (after defaults), so the report can show it. */
  readonly spec: unknown;
  /** The spec file's text, shown verbatim in the report. */
  readonly specText: string;
  readonly quick: boolean;
  readonly startedAt: string;
  readonly finishedAt: string;
  /** Set when the run was stopped (Ctrl-C) before every configuration finished. */
  readonly interrupted: boolean;
  readonly environment: RunEnvironment;
  readonly datasets: readonly DatasetSummary[];
  readonly rows: readonly ResultRow[];
}
