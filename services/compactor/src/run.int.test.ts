/**
 * One compactor run over a real store (a temporary directory and a MinIO bucket): index
 * compaction keeps every line and every reference; retention removes exactly the expired
 * chunks (per tenant, per stream rule) and the bloom blocks only they used; garbage
 * collection removes a rolled-back flush's objects after the grace period and never a
 * referenced one; segments a live flush manifest lists are left alone.
 */
import { claimPartition, encodeManifest, manifestKey, recoverPartition } from "@sieve/ingester";
import { readIndex } from "@sieve/index";
import type { ObjectStore } from "@sieve/storage";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG, type CompactorConfig } from "./config.js";
import { LockLostError } from "./lock.js";
import { CompactorMetrics } from "./metrics.js";
import { Retention, type RetentionConfig } from "@sieve/logql";
import { runOnce, type RunReport } from "./run.js";
import {
  DAY_MS,
  HOUR_NS,
  NS_PER_MS,
  danglingRefs,
  entries,
  oneDayWindow,
  openTestStore,
  quiet,
  visibleLines,
  writeFlush,
} from "./testdata.test-helper.js";

const NOW = Date.now();
const NOW_NS = BigInt(NOW) * NS_PER_MS;
const DAY_NS = BigInt(DAY_MS) * NS_PER_MS;
const ALL = [NOW_NS - 30n * DAY_NS, NOW_NS + DAY_NS] as const;
/** Where day 0's data starts: 5 hours of it, on one UTC day, ending an hour or more ago. */
const DAY0_NS = oneDayWindow(NOW_NS - HOUR_NS, 5n * HOUR_NS);
const DAY0_END_MS = Number((DAY0_NS + 5n * HOUR_NS) / NS_PER_MS);

function run(
  store: ObjectStore,
  options: {
    retention?: RetentionConfig;
    graceMs?: number;
    now?: number;
    config?: Partial<CompactorConfig>;
  } = {},
): Promise<RunReport> {
  const config = { ...DEFAULT_CONFIG, ...options.config };
  return runOnce({
    store,
    lock: { check: () => undefined },
    retention: new Retention(
      options.retention ?? { enabled: false, limits: config.limits, overrides: {} },
    ),
    logger: quiet,
    metrics: new CompactorMetrics(),
    writer: "compactor-test",
    minSegmentsToCompact: config.minSegmentsToCompact,
    maxSegmentChunks: config.maxSegmentChunks,
    garbageGracePeriodMs: options.graceMs ?? 0,
    now: () => options.now ?? Date.now(),
  });
}

/**
 * `flushes` flushes a day for days `0..days-1` before day 0, each with streams `apps`: 12
 * lines an app over 4.6 hours from the day's start of data, 6 lines a chunk.
 */
async function writeDays(
  store: ObjectStore,
  tenant: string,
  days: number,
  flushes: number,
  apps: readonly string[],
): Promise<void> {
  for (let d = 0; d < days; d++) {
    for (let f = 0; f < flushes; f++) {
      const base = DAY0_NS - BigInt(d) * DAY_NS + BigInt(f) * 60_000_000_000n;
      await writeFlush(
        store,
        tenant,
        apps.map((app) => ({
          labels: { app, flush: String(f % 2) },
          entries: entries(`${app}-${d}-${f}`, base, 1_500_000_000_000n, 12),
        })),
        { entriesPerChunk: 6, nowMs: DAY0_END_MS - d * DAY_MS },
      );
    }
  }
}

const stores = ["fs", "s3"] as const;

describe.each(stores)("compactor run over %s", (kind) => {
  const opened: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(opened.map((close) => close()));
  });
  async function fresh(): Promise<ObjectStore> {
    const { store, close } = await openTestStore(kind);
    opened.push(close);
    return store;
  }

  it("merges each day's segments into one, every line and reference kept; a second run does nothing", async () => {
    const store = await fresh();
    await writeDays(store, "t", 3, 5, ["api", "web"]);
    const before = await visibleLines(store, "t", ...ALL);
    const objects = (await store.list("t/")).filter((k) => !k.includes("/index/"));
    expect((await store.list("t/index/")).length).toBe(15);
    const report = await run(store);
    expect(report).toMatchObject({ daysRewritten: 3, segmentsCompacted: 15, segmentsWritten: 3 });
    expect(report.deleted).toEqual({ segment: 15, chunk: 0, bloom: 0 });
    expect((await store.list("t/index/")).length).toBe(3);
    expect(await visibleLines(store, "t", ...ALL)).toEqual(before);
    expect(await danglingRefs(store, "t")).toEqual([]);
    expect((await store.list("t/")).filter((k) => !k.includes("/index/"))).toEqual(objects);
    // Blooms: each chunk still points at its own flush's block.
    const blooms = new Set(
      (await readIndex(store, "t", ...ALL)).flatMap((s) =>
        s.chunks.map((c) => (c.bloom.kind === "block" ? c.bloom.key : "")),
      ),
    );
    expect(blooms.size).toBe(15);
    expect((await run(store)).daysRewritten).toBe(0);
  });

  it("removes exactly the expired chunks, per tenant and per stream rule, and nothing else", async () => {
    const store = await fresh();
    const apps = ["api", "noisy", "keep"];
    await writeDays(store, "alpha", 6, 2, apps);
    await writeDays(store, "beta", 6, 2, apps);
    const retention: RetentionConfig = {
      enabled: true,
      limits: {
        retentionPeriodMs: 3 * DAY_MS,
        retentionStream: [
          'period=1d priority=1 {app="noisy"}',
          'period=10d priority=2 {app=~"keep|noisy", flush="0"}',
        ],
      },
      overrides: { beta: { retentionPeriodMs: 0, retentionStream: [] } },
    };
    // What each stream keeps: noisy and keep of flush="0" 10 days (priority 2); noisy 1 day
    // (priority 1); the rest the tenant's 3 days.
    const keptDays = (labels: string): number => {
      if (labels.includes('flush="0"') && !labels.includes('app="api"')) return 10;
      return labels.includes('app="noisy"') ? 1 : 3;
    };
    const index = await readIndex(store, "alpha", ...ALL);
    const expiredChunks = new Set<string>();
    const expectedLines: string[] = [];
    const chunkLines = new Map(
      await Promise.all(
        index.flatMap((s) =>
          s.chunks.map(
            async (c) =>
              [
                c.key,
                (await visibleLines(store, "alpha", c.ref.from, c.ref.through)).filter((l) =>
                  l.startsWith(s.labels),
                ),
              ] as const,
          ),
        ),
      ),
    );
    for (const s of index) {
      for (const c of s.chunks) {
        // Chunks of day d end hours before NOW - d days: expired once d ≥ the period.
        if (c.ref.through < NOW_NS - BigInt(keptDays(s.labels)) * DAY_NS) expiredChunks.add(c.key);
        else
          expectedLines.push(...chunkLines.get(c.key)!.filter((l) => !expectedLines.includes(l)));
      }
    }
    expect(expiredChunks.size).toBeGreaterThan(0);
    const chunksBefore = await store.list("alpha/chunks/");
    const betaBefore = await store.list("beta/");
    const betaLines = await visibleLines(store, "beta", ...ALL);
    const report = await run(store, { retention, now: Date.now() + 1000 });
    expect(report.chunksExpired).toBe(expiredChunks.size);
    expect(await store.list("alpha/chunks/")).toEqual(
      chunksBefore.filter((k) => !expiredChunks.has(k)),
    );
    expect(await visibleLines(store, "alpha", ...ALL)).toEqual(expectedLines.sort());
    expect(await danglingRefs(store, "alpha")).toEqual([]);
    // A bloom block is gone exactly when every chunk it covered expired: day 3 to 5 blocks
    // covered api (3 days), noisy and keep of flush 0 (10 days): all kept; no block of
    // alpha lost all its chunks here, so none is deleted.
    const referencedBlooms = new Set(
      (await readIndex(store, "alpha", ...ALL)).flatMap((s) =>
        s.chunks.map((c) => (c.bloom.kind === "block" ? c.bloom.key : "")),
      ),
    );
    expect(new Set(await store.list("alpha/blooms/"))).toEqual(referencedBlooms);
    // beta keeps everything (override: forever), though it was merged.
    expect((await store.list("beta/")).filter((k) => !k.includes("/index/"))).toEqual(
      betaBefore.filter((k) => !k.includes("/index/")),
    );
    expect(await visibleLines(store, "beta", ...ALL)).toEqual(betaLines);
    // A stream rule with a short period alone removes a whole flush's block.
    const gamma = await fresh();
    await writeDays(gamma, "g", 3, 1, ["noisy"]);
    const report2 = await run(gamma, {
      retention: {
        enabled: true,
        limits: { retentionPeriodMs: 0, retentionStream: ['period=1d {app="noisy"}'] },
        overrides: {},
      },
      now: Date.now() + 1000,
    });
    expect(report2.deleted.bloom).toBe(2);
    expect(await gamma.list("g/blooms/")).toHaveLength(1);
    expect(await danglingRefs(gamma, "g")).toEqual([]);
  });

  it("collects a rolled-back flush's objects after the grace period, never referenced ones", async () => {
    const store = await fresh();
    const kept = await writeFlush(
      store,
      "t",
      [{ labels: { app: "a" }, entries: entries("kept", NOW_NS - HOUR_NS, 1_000_000n, 20) }],
      { entriesPerChunk: 5 },
    );
    const orphan = await writeFlush(
      store,
      "t",
      [{ labels: { app: "a" }, entries: entries("orphan", NOW_NS - 2n * HOUR_NS, 1_000_000n, 20) }],
      { entriesPerChunk: 5, noSegments: true },
    );
    const before = await store.list("t/");
    // Younger than the grace period: a flush in progress looks the same. Nothing goes.
    expect((await run(store, { graceMs: 3_600_000 })).deleted).toEqual({
      segment: 0,
      chunk: 0,
      bloom: 0,
    });
    expect(await store.list("t/")).toEqual(before);
    // Two hours later the orphans are past it.
    const report = await run(store, { graceMs: 3_600_000, now: Date.now() + 2 * 3_600_000 });
    expect(report.deleted).toEqual({ segment: 0, chunk: orphan.chunks.length, bloom: 1 });
    const after = new Set(await store.list("t/"));
    for (const k of [...orphan.chunks, orphan.bloom]) expect(after.has(k)).toBe(false);
    for (const k of [...kept.chunks, kept.bloom, ...kept.segments]) expect(after.has(k)).toBe(true);
    expect(await visibleLines(store, "t", ...ALL)).toHaveLength(20);
  });

  it("leaves a segment a live flush manifest lists; recovery still finds that flush complete", async () => {
    const store = await fresh();
    await writeDays(store, "t", 1, 3, ["api"]);
    const live = await writeFlush(store, "t", [
      {
        labels: { app: "api" },
        entries: entries("live", DAY0_NS + 4n * HOUR_NS + 50n * 60_000_000_000n, 1_000_000n, 6),
      },
    ]);
    // A decided flush, as an ingester leaves it until the queue commit passes it: its
    // manifest (version 2, carrying the segments' bytes) listed in the ownership record.
    const writer = await claimPartition(store, 0, "ingester-x", quiet);
    const seq = writer.takeSeq();
    const key = manifestKey(0, writer.epoch, seq);
    await store.put(
      key,
      encodeManifest({
        partition: 0,
        epoch: writer.epoch,
        seq,
        writer: "ingester-x",
        createdMs: NOW,
        segments: live.segments,
        segmentBytes: await Promise.all(live.segments.map((k) => store.get(k))),
        blooms: [live.bloom],
        streams: [],
      }),
    );
    await writer.decide({ epoch: writer.epoch, seq, maxOffset: 0 }, 0);
    const report = await run(store);
    expect(report).toMatchObject({
      segmentsCompacted: 3,
      segmentsWritten: 1,
      segmentsProtected: 1,
    });
    const segments = await store.list("t/index/");
    expect(segments).toHaveLength(2);
    expect(segments).toContain(live.segments[0]);
    // The next owner finds the flush complete: nothing to roll forward beside a copy.
    const recovered = await recoverPartition(store, 0, "ingester-y", quiet);
    expect({
      complete: recovered.complete,
      discarded: recovered.discarded,
      rolledForward: recovered.segmentsRolledForward,
    }).toEqual({ complete: 1, discarded: 0, rolledForward: 0 });
    expect(await store.list(key)).toHaveLength(1);
  });

  it("a run that loses the lock stops before deleting: the index stays whole", async () => {
    const store = await fresh();
    await writeDays(store, "t", 2, 3, ["api"]);
    const before = await visibleLines(store, "t", ...ALL);
    let checks = 0;
    const lost = runOnce({
      store,
      lock: {
        check: () => {
          if (++checks > 2) throw new LockLostError("paused past the lease");
        },
      },
      retention: new Retention({ enabled: false, limits: DEFAULT_CONFIG.limits, overrides: {} }),
      logger: quiet,
      metrics: new CompactorMetrics(),
      writer: "compactor-test",
      minSegmentsToCompact: 2,
      maxSegmentChunks: 1000,
      garbageGracePeriodMs: 0,
      now: Date.now,
    });
    await expect(lost).rejects.toThrow(LockLostError);
    expect(await visibleLines(store, "t", ...ALL)).toEqual(before);
    expect(await danglingRefs(store, "t")).toEqual([]);
    // The next holder finishes the job; the doubled listings merge away.
    await run(store);
    expect(await store.list("t/index/")).toHaveLength(2);
    expect(await visibleLines(store, "t", ...ALL)).toEqual(before);
  });
});
