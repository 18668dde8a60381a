/**
 * A partition's start in this ingester (Loki's `pkg/ingester/recovery.go`, which replays
 * a WAL; here the queue is the log and the flush manifests say what of it is stored
 * already). When a partition is assigned, it is claimed (ownership.ts): from then on no
 * flush of an earlier owner can be decided. The flushes the ownership record lists as
 * decided are read: their streams are skipped on replay up to their offsets, and the
 * newest one, which its writer may not have finished, has its index segments written
 * again. Every other manifest is of a flush never decided (a crash, or an owner fenced
 * off): deleted, its records replayed. The write order that makes this enough is at the
 * top of flush.ts; the formats are in docs/formats.md, "Flush manifests and exactly-once
 * ingestion".
 */
import { isNotFound } from "@sieve/storage";
import type { Logger } from "pino";
import { IngesterError } from "./errors.js";
import type { FlushStore } from "./flush.js";
import { asRetryable } from "./health.js";
import { decodeManifest, manifestId, manifestKey, manifestPrefix } from "./manifest.js";
import type { FlushManifest } from "./manifest.js";
import type { IngesterMetrics } from "./metrics.js";
import { claimPartition } from "./ownership.js";
import type { PartitionOwner } from "./ownership.js";
import { recoveredPartition } from "./partitions.js";
import type { PartitionState } from "./partitions.js";
import { streamKey } from "./stream.js";

/** What {@link recoverPartition} found. */
export interface Recovery {
  /** This ingester's claim of the partition: it decides the partition's flushes. */
  readonly owner: PartitionOwner;
  /** Per stream (`streamKey`), the highest offset already in visible chunks: skip up to it. */
  readonly skip: Map<string, number>;
  /** Decided flushes read (`complete`), and undecided manifests deleted (`discarded`). */
  readonly complete: number;
  readonly discarded: number;
  /** Index segments of the newest decided flush that were missing and written here. */
  readonly segmentsRolledForward: number;
}

/** What {@link recoverAssigned} needs, passed in. */
export interface RecoveryDeps {
  readonly store: FlushStore;
  readonly logger: Logger;
  readonly metrics: Pick<IngesterMetrics, "manifestsRecovered">;
  /** This ingester's writer id, recorded as the partition's owner. */
  readonly owner: string;
  readonly now: () => number;
}

/**
 * The state of a partition just assigned (see {@link recoverPartition}), counted and
 * logged. An object store failure is made retryable, so the queue consumer retries the
 * assignment (its batches wait) while the store is unavailable.
 */
export async function recoverAssigned(
  partition: number,
  deps: RecoveryDeps,
): Promise<PartitionState> {
  let r;
  try {
    r = await recoverPartition(deps.store, partition, deps.owner, deps.logger, deps.now);
  } catch (error) {
    throw asRetryable(error);
  }
  deps.metrics.manifestsRecovered.inc({ outcome: "complete" }, r.complete);
  deps.metrics.manifestsRecovered.inc({ outcome: "discarded" }, r.discarded);
  deps.logger.info(
    {
      partition,
      epoch: r.owner.epoch,
      complete: r.complete,
      discarded: r.discarded,
      segmentsRolledForward: r.segmentsRolledForward,
      streamsSkipped: r.skip.size,
    },
    "partition claimed and recovered from flush manifests",
  );
  return recoveredPartition(partition, r);
}

/**
 * Claims partition `partition` for `owner`, then settles its flushes from the record the
 * claim read (see the top of this file). Nothing here waits for another ingester: a
 * flush the claim did not find decided can never become visible.
 */
export async function recoverPartition(
  store: FlushStore,
  partition: number,
  owner: string,
  logger: Logger,
  now: () => number = Date.now,
): Promise<Recovery> {
  const claim = await claimPartition(store, partition, owner, logger, now);
  const skip = new Map<string, number>();
  const decided = new Set<string>();
  let complete = 0;
  let segmentsRolledForward = 0;
  const refs = claim.flushes;
  for (let i = 0; i < refs.length; i++) {
    const ref = refs[i]!;
    const key = manifestKey(partition, ref.epoch, ref.seq);
    decided.add(key);
    let manifest: FlushManifest;
    try {
      manifest = decodeManifest(await store.get(key));
    } catch (error) {
      if (!isNotFound(error) && !(error instanceof IngesterError)) throw error;
      // Written before its decision, so only a hand or a bug removes it: its records are
      // replayed into new chunks (at least once), which is better than losing them.
      logger.error({ key, partition, err: error }, "decided flush manifest unreadable");
      continue;
    }
    complete++;
    for (const s of manifest.streams) {
      const k = streamKey(s.tenant, s.fingerprint);
      skip.set(k, Math.max(skip.get(k) ?? -1, s.maxOffset));
    }
    // Only the newest decided flush can be unfinished: its writer decided no other flush
    // after it, and each owner finishes the newest flush it found before deciding its own.
    if (i === refs.length - 1) segmentsRolledForward = await rollForward(store, manifest);
  }
  let discarded = 0;
  for (const key of await store.list(manifestPrefix(partition))) {
    if (decided.has(key)) continue;
    // Undecided (or of an older format): its segments were never written, since they come
    // after the decision; a stale owner still writing it is refused at its decision.
    await store.delete(key);
    discarded++;
    logger.info(
      { key, partition, known: manifestId(partition, key) !== undefined },
      "undecided flush discarded; its records are replayed",
    );
  }
  return { owner: claim, skip, complete, discarded, segmentsRolledForward };
}

/** Writes the index segments of a decided flush that are missing; answers how many. */
async function rollForward(store: FlushStore, m: FlushManifest): Promise<number> {
  let written = 0;
  for (let i = 0; i < m.segments.length; i++) {
    const key = m.segments[i]!;
    try {
      await store.head(key);
      continue;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    await store.put(key, m.segmentBytes[i]!);
    written++;
  }
  return written;
}
