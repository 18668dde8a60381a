/**
 * Chunk verdicts (`FilterResponse.verdicts`): why the gateway pruned a chunk, with the test
 * leaf that failed, or why it kept one untested. Pruned chunks are listed only when the
 * request asks `explain`; chunks kept untested always, but for a missing bloom, which the
 * request itself says (a querier's false-positive audit must leave the others out, and they
 * are rare: a failure, not the healthy path).
 */
import type { SegmentChunk } from "@sieve/index";
import { printSelector, type BloomTest } from "@sieve/logql";
import type { ChunkVerdict, FilterSeries } from "@sieve/proto";
import type { FailOpenReason } from "./reasons.js";

export type { ChunkVerdict };

/** A leaf of a bloom test: what a verdict names. */
type Leaf = Extract<BloomTest, { kind: "key" | "kv" | "line" }>;

/**
 * The leaf that made a failed test fail: in a failed `and` its first failing child, in a
 * failed `or` (every child failed) its first child, down to a leaf. `holds` evaluates a
 * subtree the way the failed test was evaluated (same bloom, same tokens).
 */
export function failedLeaf(test: BloomTest, holds: (t: BloomTest) => boolean): Leaf | undefined {
  switch (test.kind) {
    case "key":
    case "kv":
    case "line":
      return test;
    case "and": {
      const failed = test.children.find((c) => !holds(c));
      return failed === undefined ? undefined : failedLeaf(failed, holds);
    }
    case "or":
      return test.children[0] === undefined ? undefined : failedLeaf(test.children[0], holds);
    case "all":
      return undefined;
  }
}

/** `"s"` quoted as LogQL's printer quotes it (reached through a one-matcher selector). */
function quoted(s: string): string {
  return printSelector([{ name: "_", op: "=", value: s }]).slice(3, -1);
}

/** A leaf as the LogQL that yields it: `trace_id="abc"`, `user=~".+"`, `|= "needle"`. */
export function leafText(leaf: Leaf): string {
  switch (leaf.kind) {
    case "kv":
      return `${leaf.name}=${quoted(leaf.value)}`;
    case "key":
      return `${leaf.name}=~".+"`;
    case "line":
      return `|= ${quoted(leaf.literal)}`;
  }
}

/** The verdicts of one request, collected as its series are filtered. */
export class Verdicts {
  readonly list: ChunkVerdict[] = [];

  /** `explain`: whether pruned chunks (and missing blooms) are listed too. */
  constructor(readonly explain: boolean) {}

  /** `chunks` of `series` pruned; `leaf` names the failed leaf (called only when explaining). */
  pruned(
    series: FilterSeries,
    chunks: readonly SegmentChunk[],
    outcome: "series" | "chunk",
    leaf: () => Leaf | undefined,
  ): void {
    if (!this.explain) return;
    const failed = leaf();
    const test = failed === undefined ? {} : { test: leafText(failed) };
    for (const c of chunks) this.list.push({ ...identity(series, c), outcome, ...test });
  }

  /** Every chunk of `series` kept untested because of `reason`. */
  failedOpen(series: FilterSeries, reason: FailOpenReason): void {
    if (reason === "missing_bloom" && !this.explain) return;
    for (const c of series.chunks) {
      this.list.push({ ...identity(series, c), outcome: "failed_open", reason });
    }
  }

  /** Adds another gateway's verdicts. */
  add(verdicts: readonly ChunkVerdict[] | undefined): void {
    if (verdicts !== undefined) this.list.push(...verdicts);
  }

  /** The `verdicts` field of an answer: absent when there are none. */
  field(): { verdicts?: ChunkVerdict[] } {
    return this.list.length === 0 ? {} : { verdicts: this.list };
  }
}

function identity(series: FilterSeries, c: SegmentChunk) {
  return {
    fingerprint: series.fingerprint,
    from: c.from,
    through: c.through,
    checksum: c.checksum,
  };
}
