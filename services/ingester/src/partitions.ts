/**
 * What the ingester holds for each queue partition it owns: the partition's streams (by
 * key, and by tenant in instance.ts), where consumption and commits stand, and what
 * recovery found at assignment (streams to skip on replay, and the claim that decides its
 * flushes). The ingester (ingester.ts) creates a partition's state when the partition is
 * assigned (recovery.ts) and drops it when the partition is revoked or its flush is fenced.
 */
import type { QueueRecord } from "@sieve/proto";
import type { IngesterConfig } from "./config.js";
import type { FlushReason } from "./head.js";
import { Instance } from "./instance.js";
import type { InstanceContext } from "./instance.js";
import { PatternStore } from "./patterns.js";
import type { PartitionOwner } from "./ownership.js";
import type { Recovery } from "./recovery.js";
import type { Stream } from "./stream.js";

/** One owned partition: its streams, offsets, recovery results and flush state. */
export interface PartitionState {
  readonly partition: number;
  /** Every stream in memory, by `streamKey`, in creation order (the order flush jobs list them). */
  readonly streams: Map<string, Stream>;
  /** The same streams by tenant: what queries read. Kept in step by {@link streamFor} and {@link evictIfEmpty}. */
  readonly instances: Map<string, Instance>;
  /**
   * The patterns of its streams (patterns.ts), made with the first stream of a tenant with
   * patterns on: they outlive the streams' heads, and go when the partition does.
   */
  patterns: PatternStore | undefined;
  /** Offset after the last record handled; -1 before the first batch. */
  nextOffset: number;
  /** Last offset this ingester committed (or found committed); -1 unknown. */
  committed: number;
  skip: Map<string, number>;
  skipMax: number;
  /** This ingester's claim of the partition: decides each flush, lists the decided ones. */
  readonly owner: PartitionOwner;
  pendingBytes: number;
  flushing: Promise<void> | undefined;
  again: boolean;
  revoked: boolean;
  /**
   * Another ingester claimed the partition (a flush was refused): nothing more is appended,
   * flushed or committed, until the consumer revokes it (or assigns it again).
   */
  fenced: boolean;
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
    instances: new Map(),
    patterns: undefined,
    nextOffset: -1,
    committed: -1,
    skip: r.skip,
    skipMax,
    owner: r.owner,
    pendingBytes: 0,
    flushing: undefined,
    again: false,
    revoked: false,
    fenced: false,
    flushHalted: undefined,
  };
}

/** The stream of `record` (key `key`) in `p`: made, and indexed under its tenant, on its first record. */
export function streamFor(
  p: PartitionState,
  key: string,
  record: Pick<QueueRecord, "tenant" | "labels" | "fingerprint">,
  ctx: InstanceContext,
): Stream {
  const s = p.streams.get(key);
  if (s !== undefined) return s;
  let instance = p.instances.get(record.tenant);
  if (instance === undefined) {
    instance = new Instance(record.tenant, ctx);
    p.instances.set(record.tenant, instance);
  }
  const created = instance.create(key, record);
  if (instance.patternsEnabled) {
    p.patterns ??= new PatternStore(drainOptions(ctx.config));
    created.patterns = p.patterns.stream(record.tenant, key, created.labels, created.labelMap);
  }
  p.streams.set(key, created);
  return created;
}

/** What each stream's Drain is made with. */
function drainOptions(config: IngesterConfig): {
  maxClusters: number;
  maxBuckets: number;
  bucketMs: number;
} {
  const bucketMs = 10_000;
  return {
    maxClusters: config.patternMaxClusters,
    bucketMs,
    maxBuckets: Math.ceil(config.patternRetentionMs / bucketMs) + 1,
  };
}

/** Drops a stream that holds nothing (see `Stream.releasable`): its next record makes it again. */
export function evictIfEmpty(p: PartitionState, s: Stream): void {
  if (!s.releasable()) return;
  p.streams.delete(s.key);
  const instance = p.instances.get(s.tenant);
  instance?.delete(s.key);
  if (instance?.size === 0) p.instances.delete(s.tenant);
}

/** Cuts a stream's head (`Stream.cut`) into the partition's next flush. */
export function cutHead(p: PartitionState, s: Stream, reason: FlushReason): void {
  p.pendingBytes += s.cut(reason);
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
