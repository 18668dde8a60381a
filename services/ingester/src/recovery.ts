/**
 * A partition's start in this ingester (Loki's `pkg/ingester/recovery.go`, which replays
 * a WAL; here the queue is the log and the flush manifests say what of it is stored
 * already). When a partition is assigned, its manifests are read: a complete flush's
 * streams are skipped on replay up to its offsets, an incomplete one is rolled back and
 * replayed. The write order that makes this enough is at the top of flush.ts; the format
 * is in docs/formats.md, "Flush manifests and exactly-once ingestion".
 */
import { isNotFound } from "@sieve/storage";
import type { Logger } from "pino";
import type { FlushStore } from "./flush.js";
import { asRetryable } from "./health.js";
import { decodeManifest, manifestMaxOffset, manifestPrefix, manifestSeq } from "./manifest.js";
import type { FlushManifest } from "./manifest.js";
import type { IngesterMetrics } from "./metrics.js";
import { recoveredPartition } from "./partitions.js";
import type { PartitionState } from "./partitions.js";
import { streamKey } from "./stream.js";

/** A manifest kept after recovery, until the committed offset passes it. */
export interface KeptManifest {
  readonly key: string;
  readonly maxOffset: number;
}

/** Options of {@link recoverPartition}. */
export interface RecoveryOptions {
  /** This ingester's instanceId: its own incomplete manifests are from a crash, never waited for. */
  readonly writer?: string;
  /** How long another writer's incomplete manifest may take to complete, from its creation. */
  readonly graceMs?: number;
  readonly now?: () => number;
}

/** What {@link recoverPartition} found. */
export interface Recovery {
  /** Per stream (`streamKey`), the highest offset already in visible chunks: skip up to it. */
  readonly skip: Map<string, number>;
  /** Complete manifests, to delete once the commit passes them. */
  readonly kept: KeptManifest[];
  /** The seq the partition's next manifest takes. */
  readonly nextSeq: number;
  readonly complete: number;
  readonly rolledBack: number;
}

/** What {@link recoverAssigned} needs, passed in. */
export interface RecoveryDeps {
  readonly store: FlushStore;
  readonly logger: Logger;
  readonly metrics: Pick<IngesterMetrics, "manifestsRecovered">;
  readonly options: RecoveryOptions;
}

/**
 * The state of a partition just assigned, from its manifests (see {@link recoverPartition}),
 * counted and logged. An object store failure is made retryable, so the queue consumer
 * retries the assignment (its batches wait) while the store is unavailable.
 */
export async function recoverAssigned(
  partition: number,
  deps: RecoveryDeps,
): Promise<PartitionState> {
  let r;
  try {
    r = await recoverPartition(deps.store, partition, deps.logger, deps.options);
  } catch (error) {
    throw asRetryable(error);
  }
  deps.metrics.manifestsRecovered.inc({ outcome: "complete" }, r.complete);
  deps.metrics.manifestsRecovered.inc({ outcome: "rolled_back" }, r.rolledBack);
  if (r.complete + r.rolledBack > 0) {
    deps.logger.info(
      { partition, complete: r.complete, rolledBack: r.rolledBack, streamsSkipped: r.skip.size },
      "partition recovered from flush manifests",
    );
  }
  return recoveredPartition(partition, r);
}

/**
 * Reads partition `partition`'s manifests (oldest first). A complete one (every segment
 * present) adds its streams' offsets to the skip map; an incomplete one has its present
 * segments and then itself deleted, so the chunks it meant to publish stay invisible and
 * the records, never committed, are replayed into new chunks. A damaged manifest is
 * treated as incomplete with no segments known: its segments (if any) were never written,
 * because segments are written only after the manifest's put succeeded.
 */
export async function recoverPartition(
  store: FlushStore,
  partition: number,
  logger: Logger,
  options: RecoveryOptions = {},
): Promise<Recovery> {
  const graceMs = options.graceMs ?? 0;
  const now = options.now ?? Date.now;
  const keys = (await store.list(manifestPrefix(partition)))
    .map((key) => ({ key, seq: manifestSeq(partition, key) }))
    .filter((k): k is { key: string; seq: number } => k.seq !== undefined)
    .sort((a, b) => a.seq - b.seq);
  const skip = new Map<string, number>();
  const kept: KeptManifest[] = [];
  let nextSeq = 0;
  let complete = 0;
  let rolledBack = 0;
  for (const { key, seq } of keys) {
    nextSeq = Math.max(nextSeq, seq + 1);
    let manifest: FlushManifest | undefined;
    try {
      manifest = decodeManifest(await store.get(key));
    } catch (error) {
      if (isNotFound(error)) continue;
      logger.warn({ key, err: error }, "damaged flush manifest: rolled back");
    }
    let present: string[] = [];
    if (manifest !== undefined) {
      present = await presentSegments(store, manifest);
      // Another ingester's flush in progress (a Kafka rebalance: the old owner flushes the
      // partition it lost): give it a moment to finish before calling it incomplete.
      const m = manifest;
      while (
        present.length < m.segments.length &&
        m.writer !== options.writer &&
        now() - m.createdMs < graceMs
      ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        present = await presentSegments(store, m);
      }
    }
    if (manifest !== undefined && present.length === manifest.segments.length) {
      complete++;
      for (const s of manifest.streams) {
        const k = streamKey(s.tenant, s.fingerprint);
        skip.set(k, Math.max(skip.get(k) ?? -1, s.maxOffset));
      }
      kept.push({ key, maxOffset: manifestMaxOffset(manifest) });
    } else {
      rolledBack++;
      for (const s of present) await store.delete(s);
      await store.delete(key);
      logger.info(
        { key, partition, segmentsDeleted: present.length },
        "incomplete flush rolled back; its records are replayed",
      );
    }
  }
  return { skip, kept, nextSeq, complete, rolledBack };
}

async function presentSegments(store: FlushStore, m: FlushManifest): Promise<string[]> {
  const present: string[] = [];
  for (const s of m.segments) if (await exists(store, s)) present.push(s);
  return present;
}

async function exists(store: FlushStore, key: string): Promise<boolean> {
  try {
    await store.head(key);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}
