/**
 * Delete request processing (Loki's `DeleteRequestsManager` and its job runner), for
 * tenants in `filter-and-delete` mode, once a request is past its cancel period. One
 * request at a time, oldest first, in steps that a crash anywhere can resume:
 *
 *   1. status `processing` (If-Match: a cancel in between wins)
 *   2. swap, per affected index segment (segments listed first, then flush manifests: a
 *      segment a live manifest lists is skipped until the manifest is gone):
 *        a. each chunk holding deleted lines rewritten without them (or dropped when it
 *           loses all), written under its new content-addressed key
 *        b. the affected series' blooms rebuilt into a new bloom block
 *        c. the replacement segment written, under a key derived from the old one and the
 *           request (`<old id>.d<request id>`: a rerun rewrites the same object)
 *        d. the old chunk keys recorded in the request (`pending_chunks`)
 *        e. the old segments deleted
 *      While both an old segment and its replacement exist a query sees the old chunk and
 *      its rewrite: the querier drops exact duplicates, and the deleted lines are still
 *      filtered at query time, so the answer does not change.
 *   3. `swapped_at` set once no segment left (live manifests included) lists a deleted line
 *   4. after `retentionDeleteDelayMs`, each pending old chunk deleted, unless a segment
 *      still lists it (then the swap runs again next time)
 *   5. status `processed`
 *
 * Every step is idempotent: a rerun rescans, finds the segments not yet replaced, and
 * writes the same objects again. Nothing is deleted while an index entry points to it;
 * the lines that stay are in a written object before the entry that held them goes.
 */
import { chunkKey, decodeChunk, type Entry } from "@sieve/chunk";
import {
  dayOf,
  dayString,
  decodeSegment,
  deleteRequestRange,
  encodeSegment,
  listSegments,
  segmentKey,
  type DeleteRequestRecord,
  type IndexSegment,
  type SeriesBloomOptions,
} from "@sieve/index";
import { mapLimit } from "@sieve/kit";
import { parseLabels } from "@sieve/labels";
import { DeleteFilter } from "@sieve/logql";
import { isNotFound, type ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { DEFAULT_CANCEL_PERIOD_MS } from "./http.js";
import { protectedSegments } from "../scan.js";
import { listsAny, refOfKey, segmentsOfDays } from "./segments.js";
import { deletionMetrics } from "./registry.js";
import { DeleteRequestsStore, type TaggedRequest } from "./requests.js";
import { replaceSegment, rewriteChunk, chunkEntries, type ChunkRewrite } from "./rewrite.js";

/** What a run is handed by the compactor's loop. */
export interface DeletionRunContext {
  readonly store: ObjectStore;
  readonly logger: Logger;
  readonly registry?: Registry;
  /** False once the compactor's lease is lost: checked before every destructive step. */
  readonly isLeaseHeld: () => boolean;
  /** Aborts the run between steps (shutdown). */
  readonly signal?: AbortSignal;
}

/** The processor's settings. Times in ms. */
export interface DeletionOptions {
  /** The tenant's `deletionMode`; only `filter-and-delete` tenants are processed. */
  readonly deletionMode: (tenant: string) => string;
  /** Loki's `delete_request_cancel_period` (24h): a request is processed only after it. */
  readonly cancelPeriodMs?: number;
  /**
   * Loki's `retention_delete_delay` (2h): old chunks are deleted this long after their
   * index entries were replaced, so a query planned just before still reads them.
   */
  readonly deleteDelayMs?: number;
  /** The blooms' shape, as the ingesters build them (`falsePositiveRate`, layout, …). */
  readonly bloom?: SeriesBloomOptions;
  /** Object reads and writes in flight at once (10). */
  readonly concurrency?: number;
  readonly now?: () => number;
}

/** What one run did, for the compactor's log and the tests. */
export interface DeletionRunResult {
  readonly requestsProcessed: number;
  readonly chunksRewritten: number;
  readonly chunksDeleted: number;
  readonly segmentsReplaced: number;
  readonly deletedLines: number;
  /** Segments left alone because a live flush manifest lists them. */
  readonly segmentsDeferred: number;
}

/** The compactor lost its lease: the run stops before the next destructive step. */
export class LeaseLostError extends Error {
  constructor() {
    super("compactor lease lost: delete processing stopped");
    this.name = "LeaseLostError";
  }
}

interface Counts {
  requestsProcessed: number;
  chunksRewritten: number;
  chunksDeleted: number;
  segmentsReplaced: number;
  deletedLines: number;
  segmentsDeferred: number;
}

/** The processor: `run(ctx)` once per compactor cycle. */
export class DeletionProcessor {
  private readonly cancelPeriodMs: number;
  private readonly deleteDelayMs: number;
  private readonly concurrency: number;
  private readonly now: () => number;

  constructor(private readonly options: DeletionOptions) {
    this.cancelPeriodMs = options.cancelPeriodMs ?? DEFAULT_CANCEL_PERIOD_MS;
    this.deleteDelayMs = options.deleteDelayMs ?? 2 * 3_600_000;
    this.concurrency = options.concurrency ?? 10;
    this.now = options.now ?? Date.now;
  }

  /** Processes every tenant's due requests; throws {@link LeaseLostError} if the lease goes. */
  async run(ctx: DeletionRunContext): Promise<DeletionRunResult> {
    const metrics = ctx.registry === undefined ? undefined : deletionMetrics(ctx.registry);
    const requests = new DeleteRequestsStore(ctx.store, this.now);
    const counts: Counts = {
      requestsProcessed: 0,
      chunksRewritten: 0,
      chunksDeleted: 0,
      segmentsReplaced: 0,
      deletedLines: 0,
      segmentsDeferred: 0,
    };
    let pending = 0;
    let oldest = Number.POSITIVE_INFINITY;
    try {
      for (const tenant of await requests.tenants()) {
        if (this.options.deletionMode(tenant) !== "filter-and-delete") continue;
        for (const r of await requests.list(tenant)) {
          if (r.status === "processed") continue;
          const due = r.createdMs + this.cancelPeriodMs;
          if (due > this.now()) continue;
          ctx.signal?.throwIfAborted();
          const done = await this.process(ctx, requests, r, counts);
          if (!done) {
            pending++;
            oldest = Math.min(oldest, due);
          } else {
            counts.requestsProcessed++;
            metrics?.requestsProcessed.inc({ user: tenant });
          }
        }
      }
    } catch (error) {
      metrics?.processingFails.inc();
      throw error;
    }
    if (metrics !== undefined) {
      metrics.pendingRequests.set(pending);
      metrics.oldestPendingAgeSeconds.set(pending === 0 ? 0 : (this.now() - oldest) / 1000);
      metrics.lastSuccessfulRun.set(this.now() / 1000);
    }
    return counts;
  }

  private guard(ctx: DeletionRunContext): void {
    ctx.signal?.throwIfAborted();
    if (!ctx.isLeaseHeld()) throw new LeaseLostError();
  }

  /** One request's next steps; true once it is processed. */
  private async process(
    ctx: DeletionRunContext,
    requests: DeleteRequestsStore,
    r: DeleteRequestRecord,
    counts: Counts,
  ): Promise<boolean> {
    let tagged: TaggedRequest | undefined = await requests.get(r.tenant, r.requestId);
    if (tagged === undefined) return true; // cancelled meanwhile
    if (tagged.record.status === "received") {
      this.guard(ctx);
      tagged = await requests.update(tagged, { ...tagged.record, status: "processing" });
      if (tagged === undefined) return true;
    }
    if (tagged.record.swappedMs === undefined) {
      const swap = await this.swap(ctx, requests, tagged, counts);
      if (swap === undefined) return true; // cancelled
      tagged = swap.tagged;
      if (!swap.complete) return false;
      this.guard(ctx);
      tagged = await requests.update(tagged, { ...tagged.record, swappedMs: this.now() });
      if (tagged === undefined) return true;
    }
    const rec = tagged.record;
    const nothing = (rec.pendingChunks ?? []).length === 0;
    if (!nothing && this.now() < rec.swappedMs! + this.deleteDelayMs) return false;
    const still = await this.deleteOldChunks(ctx, rec, counts);
    if (still.length > 0) {
      // A segment lists an old chunk again (a replayed flush): swap again next run.
      const rest: DeleteRequestRecord = { ...rec, pendingChunks: still };
      delete (rest as { swappedMs?: number }).swappedMs;
      this.guard(ctx);
      await requests.update(tagged, rest);
      return false;
    }
    this.guard(ctx);
    const done: DeleteRequestRecord = { ...rec, status: "processed", processedMs: this.now() };
    delete (done as { pendingChunks?: readonly string[] }).pendingChunks;
    await requests.update(tagged, done);
    ctx.logger.info(
      { delete_request_id: rec.requestId, user: rec.tenant },
      "delete request processed",
    );
    return true;
  }

  /**
   * Step 2: replaces every segment that lists a chunk with deleted lines. Answers whether
   * none is left (no live manifest held one back), or undefined when the request went.
   */
  private async swap(
    ctx: DeletionRunContext,
    requests: DeleteRequestsStore,
    tagged: TaggedRequest,
    counts: Counts,
  ): Promise<{ tagged: TaggedRequest; complete: boolean } | undefined> {
    const { store } = ctx;
    const rec = tagged.record;
    const { start, end } = deleteRequestRange(rec);
    const filter = DeleteFilter.compile([{ query: rec.query, start, end }])!;
    const metrics = ctx.registry === undefined ? undefined : deletionMetrics(ctx.registry);

    // Segments of the request's days, then of the other days its affected chunks touch
    // (a chunk across midnight is listed in both days' segments).
    const segments = new Map<string, IndexSegment>();
    const rewrites = new Map<string, ChunkRewrite | null>();
    const listed = new Set<number>();
    const scanDays = async (from: bigint, through: bigint): Promise<void> => {
      for (const key of await segmentsOfDays(store, rec.tenant, from, through)) {
        if (segments.has(key)) continue;
        let segment: IndexSegment;
        try {
          segment = decodeSegment(await store.get(key));
        } catch (error) {
          if (isNotFound(error)) continue;
          throw error;
        }
        segments.set(key, segment);
        listed.add(segment.day);
        await this.scanSegment(store, segment, filter, start, end, rewrites);
      }
    };
    await scanDays(start, end);
    const extra = new Set<number>();
    for (const [key, r] of rewrites) {
      if (r === null) continue;
      const { from, through } = refOfKey(key);
      for (let d = dayOf(from); d <= dayOf(through); d++) if (!listed.has(d)) extra.add(d);
    }
    for (const d of extra) {
      const ns = BigInt(d) * 86_400_000_000_000n;
      await scanDays(ns, ns);
    }
    // After the listings: a segment listed above has its manifest written already. The
    // partition's next owner would write a live flush's segment again from its manifest,
    // bringing the deleted lines back: such segments wait for their manifest to go.
    const live = await protectedSegments(store, ctx.logger);

    const affected = new Map<string, ChunkRewrite>();
    for (const [k, r] of rewrites) if (r !== null) affected.set(k, r);
    const touched = [...segments].filter(([, seg]) => listsAny(seg, affected));
    const deferred = touched.filter(([key]) => live.has(key));
    const free = touched.filter(([key]) => !live.has(key));
    counts.segmentsDeferred += deferred.length;

    // a. the rewritten chunks, before any index entry points to them.
    const writes = [...affected.values()].flatMap((r) => (r.rewritten === undefined ? [] : [r]));
    await mapLimit(writes, this.concurrency, (r) =>
      store.put(r.rewritten!.key, r.rewritten!.encoded.bytes),
    );
    // b, c. blooms and replacement segments.
    const cache = new Map<string, readonly Entry[]>();
    const readEntries = async (key: string): Promise<readonly Entry[]> => {
      let e = cache.get(key);
      if (e === undefined) cache.set(key, (e = chunkEntries(await store.get(key))));
      return e;
    };
    const written: string[] = [];
    for (const [oldKey, seg] of free) {
      const id = replacementId(oldKey, rec.requestId);
      const bloomKey = `${rec.tenant}/blooms/${dayString(seg.day)}/${id}`;
      const rep = await replaceSegment(
        seg,
        affected,
        readEntries,
        bloomKey,
        this.options.bloom ?? {},
      );
      if (rep.bloomBlock !== undefined) await store.put(rep.bloomBlock.key, rep.bloomBlock.bytes);
      if (rep.segment !== undefined) {
        const key = segmentKey(rec.tenant, seg.day, id);
        await store.put(key, encodeSegment(rep.segment));
        written.push(key);
      }
    }
    // d. the old chunks are remembered before their last index entry goes.
    const pending = new Set(rec.pendingChunks ?? []);
    for (const k of affected.keys()) pending.add(k);
    let next = tagged;
    if (pending.size !== (rec.pendingChunks ?? []).length) {
      this.guard(ctx);
      const updated = await requests.update(tagged, { ...rec, pendingChunks: [...pending].sort() });
      if (updated === undefined) {
        // Cancelled meanwhile: the old segments stay, their replacements go (a rerun of
        // a cancelled request never happens, so they would list the chunks twice forever).
        for (const key of written) await store.delete(key);
        return undefined;
      }
      next = updated;
    }
    // e. the old segments.
    for (const [oldKey] of free) {
      this.guard(ctx);
      await store.delete(oldKey);
      metrics?.objectsDeleted.inc({ kind: "segment" });
    }
    let lines = 0;
    for (const r of affected.values()) lines += r.deletedLines;
    if (free.length > 0) {
      counts.segmentsReplaced += free.length;
      counts.chunksRewritten += affected.size;
      counts.deletedLines += lines;
      metrics?.chunksRewritten.inc(writes.length);
      metrics?.deletedLines.inc({ user: rec.tenant }, lines);
      ctx.logger.info(
        {
          delete_request_id: rec.requestId,
          user: rec.tenant,
          segments: free.length,
          deferred: deferred.length,
          chunks: affected.size,
          lines,
        },
        "delete request: index segments replaced",
      );
    }
    return { tagged: next, complete: deferred.length === 0 };
  }

  /** Finds the chunks of `segment` in range that hold deleted lines (each chunk read once). */
  private async scanSegment(
    store: ObjectStore,
    segment: IndexSegment,
    filter: DeleteFilter,
    start: bigint,
    end: bigint,
    rewrites: Map<string, ChunkRewrite | null>,
  ): Promise<void> {
    const todo: {
      key: string;
      fp: bigint;
      test: NonNullable<ReturnType<DeleteFilter["forStream"]>>;
    }[] = [];
    for (const s of segment.series) {
      const labels: Record<string, string> = {};
      for (const l of parseLabels(s.labels)) labels[l.name] = l.value;
      const test = filter.forStream(labels);
      if (test === undefined) continue;
      for (const c of s.chunks) {
        if (c.through < start || c.from > end) continue;
        const key = chunkKey({ tenant: segment.tenant, fingerprint: s.fingerprint, ...c });
        if (rewrites.has(key)) continue;
        rewrites.set(key, null);
        todo.push({ key, fp: s.fingerprint, test });
      }
    }
    await mapLimit(todo, this.concurrency, async ({ key, fp, test }) => {
      let bytes: Uint8Array;
      try {
        bytes = await store.get(key);
      } catch (error) {
        // Deleted by an earlier run of this request whose segment swap it survived: the
        // segment that still lists it is being replaced; nothing of it can be read.
        if (isNotFound(error)) return;
        throw error;
      }
      decodeChunk(bytes); // checks every block: a damaged chunk stops the run, unrewritten
      rewrites.set(key, rewriteChunk(segment.tenant, fp, key, bytes, test) ?? null);
    });
  }

  /** Step 4: deletes the old chunks no segment lists; answers those still listed. */
  private async deleteOldChunks(
    ctx: DeletionRunContext,
    rec: DeleteRequestRecord,
    counts: Counts,
  ): Promise<string[]> {
    const metrics = ctx.registry === undefined ? undefined : deletionMetrics(ctx.registry);
    const keys = rec.pendingChunks ?? [];
    const byDay = new Map<number, Set<string>>();
    const listedOn = async (day: number): Promise<Set<string>> => {
      let set = byDay.get(day);
      if (set !== undefined) return set;
      set = new Set();
      const ns = BigInt(day) * 86_400_000_000_000n;
      for (const key of await listSegments(ctx.store, rec.tenant, ns, ns)) {
        let seg: IndexSegment;
        try {
          seg = decodeSegment(await ctx.store.get(key));
        } catch (error) {
          if (isNotFound(error)) continue;
          throw error;
        }
        for (const s of seg.series) {
          for (const c of s.chunks)
            set.add(chunkKey({ tenant: rec.tenant, fingerprint: s.fingerprint, ...c }));
        }
      }
      byDay.set(day, set);
      return set;
    };
    const still: string[] = [];
    for (const key of keys) {
      const { from, through } = refOfKey(key);
      let listed = false;
      for (let d = dayOf(from); d <= dayOf(through) && !listed; d++)
        listed = (await listedOn(d)).has(key);
      if (listed) {
        still.push(key);
        continue;
      }
      this.guard(ctx);
      let size = 0;
      try {
        size = (await ctx.store.head(key)).size;
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      await ctx.store.delete(key);
      counts.chunksDeleted++;
      metrics?.objectsDeleted.inc({ kind: "chunk" });
      metrics?.bytesReclaimed.inc(size);
    }
    return still;
  }
}

/**
 * The replacement's segment id: the old id without an earlier request's suffix, then
 * `.d<request id>`. It sorts beside the old one, and a rerun of the same request writes
 * the same key.
 */
export function replacementId(oldSegmentKey: string, requestId: string): string {
  const id = oldSegmentKey.slice(oldSegmentKey.lastIndexOf("/") + 1);
  return `${id.replace(/\.d[0-9a-f]{8}$/, "")}.d${requestId}`;
}
