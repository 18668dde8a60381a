/**
 * One compactor run over the whole store, in an order that keeps every index entry's
 * object in place and every reader's answer whole:
 *
 * 1. list every object (chunks and bloom blocks with their ages), then the flush manifests
 *    (the segments they list are left alone: see `protectedSegments`);
 * 2. per tenant and day: merge the segments (compaction) leaving out expired chunks
 *    (retention), write the merged segments under new keys, then delete the old ones;
 * 3. list the index again and read it: every chunk and bloom block it references;
 * 4. delete the chunks and bloom blocks of step 1 that no segment references and that are
 *    older than the grace period (those left out by step 2 as expired, and orphans of
 *    rolled-back or crashed flushes alike).
 *
 * Every deletion is preceded by a look at the lock: a compactor that lost it (paused past
 * its lease) stops before deleting anything.
 */
import { mapLimit } from "@sieve/kit";
import { chunkKey } from "@sieve/chunk";
import { encodeSegment, newSegmentId, segmentKey, type SegmentChunk } from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import type { ListedObject, ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import type { CompactorLock } from "./lock.js";
import { mergeDay } from "./merge.js";
import type { CompactorMetrics, DeleteReason, ObjectKind } from "./metrics.js";
import type { Retention, TenantRetention } from "@sieve/logql";
import { listStore, protectedSegments, SegmentReader, type DaySegments } from "./scan.js";

/** Deletions in flight at once. */
const DELETE_CONCURRENCY = 16;
const MS_PER_DAY = 86_400_000;

/** What one run did. */
export interface RunReport {
  /** Tenant days whose segments were merged or rewritten. */
  daysRewritten: number;
  segmentsCompacted: number;
  segmentsWritten: number;
  chunksExpired: number;
  /** Segments left alone because a live flush manifest lists them. */
  segmentsProtected: number;
  deleted: Record<ObjectKind, number>;
  bytesReclaimed: number;
}

/** What a run needs, passed in. */
export interface RunDeps {
  readonly store: ObjectStore;
  readonly lock: Pick<CompactorLock, "check">;
  readonly retention: Retention;
  readonly logger: Logger;
  readonly metrics: CompactorMetrics;
  /** Names the segments this compactor writes (`newSegmentId`'s writer). */
  readonly writer: string;
  readonly minSegmentsToCompact: number;
  readonly maxSegmentChunks: number;
  readonly garbageGracePeriodMs: number;
  /** Wall clock, Unix ms. */
  readonly now: () => number;
}

/** Runs steps 1 to 4 (see the top of this file) once. */
export async function runOnce(deps: RunDeps): Promise<RunReport> {
  const { store, logger } = deps;
  const report: RunReport = {
    daysRewritten: 0,
    segmentsCompacted: 0,
    segmentsWritten: 0,
    chunksExpired: 0,
    segmentsProtected: 0,
    deleted: { segment: 0, chunk: 0, bloom: 0 },
    bytesReclaimed: 0,
  };
  const nowMs = deps.now();
  deps.lock.check();
  const listing = await listStore(store);
  const protectedKeys = await protectedSegments(store, logger);
  const reader = new SegmentReader(store, logger);
  const expired = new Set<string>();
  let sequence = 0;
  const nextId = (): string => newSegmentId(deps.writer, Date.now(), sequence++);
  for (const d of listing.days.values()) {
    await rewriteDay(deps, d, protectedKeys, reader, nowMs, nextId, expired, report, listing.sizes);
  }

  // Step 3: the index as it is now. Tenants come from every kind of object: a tenant
  // whose index is all gone still has chunks to collect.
  const tenants = new Set<string>();
  for (const d of listing.days.values()) tenants.add(d.tenant);
  for (const o of [...listing.chunks, ...listing.blooms]) tenants.add(o.key.split("/", 1)[0]!);
  const referenced = new Set<string>();
  const unsure = new Set<string>();
  for (const tenant of tenants) {
    for (const key of await store.list(`${tenant}/index/`)) {
      const segment = await reader.read(key);
      if (segment === null) {
        if (reader.damaged.has(key)) unsure.add(tenant);
        continue;
      }
      for (const s of segment.series) {
        if (s.bloom.kind === "block") referenced.add(s.bloom.key);
        for (const c of s.chunks) {
          referenced.add(chunkKey({ tenant, fingerprint: s.fingerprint, ...c }));
        }
      }
    }
  }

  // Step 4.
  const graceEnd = nowMs - deps.garbageGracePeriodMs;
  const collectable = (o: ListedObject): boolean =>
    !referenced.has(o.key) && o.lastModifiedMs < graceEnd && !unsure.has(o.key.split("/", 1)[0]!);
  for (const tenant of unsure) {
    logger.warn({ tenant }, "a damaged index segment: the tenant's objects are not collected");
  }
  const garbage: { o: ListedObject; kind: ObjectKind; reason: DeleteReason }[] = [];
  for (const o of listing.chunks) {
    if (collectable(o)) {
      garbage.push({ o, kind: "chunk", reason: expired.has(o.key) ? "retention" : "orphan" });
    }
  }
  for (const o of listing.blooms) {
    // A bloom block's series may all have expired; one some segment lists stays.
    if (collectable(o)) garbage.push({ o, kind: "bloom", reason: "orphan" });
  }
  await mapLimit(garbage, DELETE_CONCURRENCY, async ({ o, kind, reason }) => {
    deps.lock.check();
    await store.delete(o.key);
    deps.metrics.deleted(kind, reason, o.size);
    report.deleted[kind]++;
    report.bytesReclaimed += o.size;
  });
  return report;
}

/** The day of a `YYYY-MM-DD` key part, or undefined when it is not one. */
function parseDay(day: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return undefined;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(ms) ? undefined : ms / MS_PER_DAY;
}

/** The shortest period (ms) after which some stream of the tenant expires; 0 for none. */
function shortestPeriod(t: TenantRetention): number {
  const periods = [t.periodMs, ...t.streams.map((s) => s.periodMs)].filter((p) => p > 0);
  return periods.length === 0 ? 0 : Math.min(...periods);
}

/**
 * Step 2 for one tenant's day: merges its unprotected segments, leaving out expired
 * chunks, when that leaves fewer segments or fewer chunks; writes the result first, then
 * deletes the inputs.
 */
async function rewriteDay(
  deps: RunDeps,
  d: DaySegments,
  protectedKeys: ReadonlySet<string>,
  reader: SegmentReader,
  nowMs: number,
  nextId: () => string,
  expired: Set<string>,
  report: RunReport,
  sizes: ReadonlyMap<string, number>,
): Promise<void> {
  const day = parseDay(d.day);
  if (day === undefined) return;
  const eligible = d.keys.filter((k) => !protectedKeys.has(k));
  report.segmentsProtected += d.keys.length - eligible.length;
  const retention = deps.retention.of(d.tenant);
  const shortest = shortestPeriod(retention);
  // Every chunk a day lists ends on or after the day's start: none can have expired yet.
  const mayExpire = shortest > 0 && day * MS_PER_DAY < nowMs - shortest;
  if (eligible.length < deps.minSegmentsToCompact && !mayExpire) return;
  const inputs: {
    key: string;
    segment: NonNullable<Awaited<ReturnType<SegmentReader["read"]>>>;
  }[] = [];
  for (const key of eligible) {
    const segment = await reader.read(key);
    if (segment !== null && segment.tenant === d.tenant && segment.day === day) {
      inputs.push({ key, segment });
    }
  }
  const cutoffs = new Map<string, bigint | undefined>();
  const isExpired = (labels: string, c: SegmentChunk): boolean => {
    if (!mayExpire) return false;
    let cutoff = cutoffs.get(labels);
    if (!cutoffs.has(labels)) {
      cutoff = cutoffOf(retention, labels, nowMs);
      cutoffs.set(labels, cutoff);
    }
    return cutoff !== undefined && c.through < cutoff;
  };
  const merged = mergeDay(
    d.tenant,
    day,
    inputs.map((i) => i.segment),
    isExpired,
    deps.maxSegmentChunks,
  );
  const compacts =
    inputs.length >= deps.minSegmentsToCompact && merged.segments.length < inputs.length;
  if (!compacts && merged.expired.length === 0) return;
  for (const segment of merged.segments) {
    await deps.store.put(segmentKey(d.tenant, day, nextId()), encodeSegment(segment));
  }
  const reason: DeleteReason = merged.expired.length > 0 ? "retention" : "compaction";
  await mapLimit(inputs, DELETE_CONCURRENCY, async ({ key }) => {
    deps.lock.check();
    await deps.store.delete(key);
    reader.forget(key);
    const bytes = sizes.get(key) ?? 0;
    deps.metrics.deleted("segment", reason, bytes);
    report.deleted.segment++;
    report.bytesReclaimed += bytes;
  });
  for (const key of merged.expired) expired.add(key);
  report.daysRewritten++;
  report.segmentsCompacted += inputs.length;
  report.segmentsWritten += merged.segments.length;
  report.chunksExpired += merged.expired.length;
  deps.metrics.segmentsCompacted.inc(inputs.length);
  deps.metrics.segmentsWritten.inc(merged.segments.length);
  deps.metrics.chunksExpired.inc(merged.expired.length);
  deps.logger.info(
    {
      tenant: d.tenant,
      day: d.day,
      segmentsIn: inputs.length,
      segmentsOut: merged.segments.length,
      listingsIn: merged.listingsIn,
      chunksOut: merged.chunksOut,
      chunksExpired: merged.expired.length,
    },
    "index day rewritten",
  );
}

/** A series' retention cutoff from its canonical labels; kept forever when they do not parse. */
function cutoffOf(retention: TenantRetention, labels: string, nowMs: number): bigint | undefined {
  let record: Record<string, string>;
  try {
    record = Object.fromEntries(parseLabels(labels).map((l) => [l.name, l.value]));
  } catch {
    return undefined;
  }
  return retention.cutoffNs(record, nowMs);
}
