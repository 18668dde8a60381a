/**
 * What the ingester holds for each queue partition it owns: the partition's streams (head,
 * bloom, cut chunks), where consumption and commits stand, and what recovery found at
 * assignment (streams to skip on replay, manifests to delete once the commit passes them).
 * The ingester (ingester.ts) creates a partition's state when the partition is assigned
 * and drops it when the partition is revoked.
 */
import type { SeriesBloomBuilder } from "@sieve/index";
import type { CutChunk, KeptManifest, Recovery } from "./flush.js";
import type { Head } from "./head.js";

/** One stream in memory: its head, its bloom, and its cut chunks until they are flushed. */
export interface StreamState {
  readonly key: string;
  readonly tenant: string;
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly labelMap: Readonly<Record<string, string>>;
  head: Head | undefined;
  /** Undefined when blooms are off for the tenant. */
  readonly bloom: SeriesBloomBuilder | undefined;
  tokensCounted: number;
  /** Cut, waiting for the next flush job. */
  pending: CutChunk[];
  /** In the running flush job. */
  flushing: CutChunk[];
}

/** One owned partition: its streams, offsets, recovery results and flush state. */
export interface PartitionState {
  readonly partition: number;
  readonly streams: Map<string, StreamState>;
  /** Offset after the last record handled; -1 before the first batch. */
  nextOffset: number;
  /** Last offset this ingester committed (or found committed); -1 unknown. */
  committed: number;
  skip: Map<string, number>;
  skipMax: number;
  kept: KeptManifest[];
  nextSeq: number;
  pendingBytes: number;
  flushing: Promise<void> | undefined;
  again: boolean;
  revoked: boolean;
  /** A non-retriable flush error: the partition flushes no more until a restart. */
  flushHalted: Error | undefined;
}

/** A newly assigned partition's state, from what {@link Recovery} found in its manifests. */
export function recoveredPartition(partition: number, r: Recovery): PartitionState {
  let skipMax = -1;
  for (const o of r.skip.values()) skipMax = Math.max(skipMax, o);
  return {
    partition,
    streams: new Map(),
    nextOffset: -1,
    committed: -1,
    skip: r.skip,
    skipMax,
    kept: r.kept,
    nextSeq: r.nextSeq,
    pendingBytes: 0,
    flushing: undefined,
    again: false,
    revoked: false,
    flushHalted: undefined,
  };
}

/** Read through a function: `again` changes while a flush awaits. */
export function flushAgain(p: PartitionState): boolean {
  return p.again;
}

/** The offset below which nothing is held in memory: what may be committed. */
export function safeOffset(p: PartitionState): number {
  let low = p.nextOffset;
  for (const s of p.streams.values()) {
    if (s.head !== undefined && s.head.entryCount > 0) low = Math.min(low, s.head.firstOffset);
    for (const c of s.pending) low = Math.min(low, c.firstOffset);
    for (const c of s.flushing) low = Math.min(low, c.firstOffset);
  }
  return low;
}
