/**
 * The delete processing tests, run over any object store: the file store
 * (processor.test.ts) and the real S3 server (processor.int.test.ts).
 */
import { chunkKey } from "@sieve/chunk";
import { decodeSegment } from "@sieve/index";
import { DEFAULT_CONFIG, createQuerier } from "@sieve/querier";
import type { ObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterEach, describe, expect, test } from "vitest";
import { DeletionProcessor, LeaseLostError } from "./processor.js";
import { DeleteRequestsStore } from "./requests.js";
import { entry, linesOf, writeFlush, type TestStream } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
/** 2023-11-14T22:13:20Z: far from midnight, whole seconds. */
const T0 = 1_700_000_000n * S;
const logger = pino({ level: "silent" });

/** 40 api lines (every 5th holds "secret"), 20 web lines; trace ids on every line. */
export function sample(): TestStream[] {
  const api = [];
  for (let i = 0; i < 40; i++) {
    const word = i % 5 === 0 ? "secret" : "plain";
    api.push(entry(T0 + BigInt(i) * S, `api ${i} ${word}`, { trace_id: `trace-${i}` }));
  }
  const web = [];
  for (let i = 0; i < 20; i++)
    web.push(entry(T0 + BigInt(i) * S, `web ${i}`, { trace_id: `w-${i}` }));
  return [
    { labels: { app: "api" }, entries: api },
    { labels: { app: "web" }, entries: web },
  ];
}

/** Every line the store holds for `query`, without query-time filtering. */
export async function raw(store: ObjectStore, tenant: string, query: string): Promise<string[]> {
  const q = createQuerier({
    config: {
      ...DEFAULT_CONFIG,
      workers: 0,
      limits: { ...DEFAULT_CONFIG.limits, deletionMode: "disabled" },
    },
    store,
  });
  const r = await q.selectLogs({
    tenant,
    query,
    start: T0 - 3600n * S,
    end: T0 + 3600n * S,
    limit: 5000,
    direction: "forward",
  });
  return r.entries.map((e) => e.line).sort();
}

/** `count_over_time` of every line the store holds, without query-time filtering. */
export async function rawCount(store: ObjectStore, tenant: string): Promise<number> {
  const q = createQuerier({
    config: {
      ...DEFAULT_CONFIG,
      workers: 0,
      limits: { ...DEFAULT_CONFIG.limits, deletionMode: "disabled" },
    },
    store,
  });
  const r = await q.selectVector(tenant, 'sum(count_over_time({app=~".+"}[2h]))', T0 + 3600n * S);
  return Number(r.result[0]?.value[1] ?? 0);
}

/**
 * The store is consistent: every chunk an index segment lists exists and every bloom block
 * it points to exists. Answers the chunk keys listed.
 */
export async function consistent(store: ObjectStore, tenant: string): Promise<Set<string>> {
  const listed = new Set<string>();
  for (const key of await store.list(`${tenant}/index/`)) {
    const seg = decodeSegment(await store.get(key));
    for (const s of seg.series) {
      if (s.bloom.kind === "block") await store.head(s.bloom.key);
      for (const c of s.chunks) {
        const k = chunkKey({ tenant, fingerprint: s.fingerprint, ...c });
        await store.head(k); // not_found fails the test: an index entry without its object
        listed.add(k);
      }
    }
  }
  return listed;
}

const processor = (deleteDelayMs = 0) =>
  new DeletionProcessor({
    deletionMode: () => "filter-and-delete",
    cancelPeriodMs: 0,
    deleteDelayMs,
  });

/** A run context whose lease is lost after `held` checks (a crash between two steps). */
function ctx(store: ObjectStore, held = Number.POSITIVE_INFINITY) {
  let checks = 0;
  return {
    store,
    logger,
    registry: new Registry(),
    isLeaseHeld: () => ++checks <= held,
  };
}

const all = (base: readonly string[], without: readonly string[]) =>
  base.filter((l) => !without.includes(l));

/** The suite over the store `open` gives (a fresh, empty one per test). */
export function deletionSuite(
  name: string,
  open: () => Promise<{ store: ObjectStore; close: () => Promise<void> }>,
) {
  describe(`delete processing over ${name}`, () => {
    const closers: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const c of closers.splice(0)) await c();
    });
    const fresh = async (): Promise<ObjectStore> => {
      const s = await open();
      closers.push(s.close);
      return s.store;
    };
    const secretQuery = {
      query: '{app="api"} |= "secret"',
      startMs: 1_700_000_010_000,
      endMs: 1_700_000_030_000,
    };
    const deleted = [
      "api 10 secret",
      "api 15 secret",
      "api 20 secret",
      "api 25 secret",
      "api 30 secret",
    ];

    test("before processing queries filter; processing removes exactly the matching lines", async () => {
      const store = await fresh();
      await writeFlush(store, "t", sample(), 8);
      const before = await raw(store, "t", '{app=~".+"}');
      expect(before).toHaveLength(60);
      const requests = new DeleteRequestsStore(store);
      await requests.add({ tenant: "t", ...secretQuery });
      // Query-time filtering: log and metric queries.
      const filtered = await linesOf(store, "t", '{app=~".+"}', T0 - S, T0 + 100n * S);
      expect(filtered.lines).toEqual(all(before, deleted));
      const q = createQuerier({
        config: { ...DEFAULT_CONFIG, workers: 0, deleteRequestsCacheMs: 0 },
        store,
      });
      const m = await q.selectVector("t", 'sum(count_over_time({app="api"}[10m]))', T0 + 100n * S);
      expect(m.result[0]!.value[1]).toBe("35");
      // Nothing changed in the store yet.
      expect(await raw(store, "t", '{app=~".+"}')).toEqual(before);

      const result = await processor().run(ctx(store));
      expect(result).toMatchObject({ requestsProcessed: 1, deletedLines: 5, segmentsDeferred: 0 });
      expect(await raw(store, "t", '{app=~".+"}')).toEqual(all(before, deleted));
      const [r] = await requests.list("t");
      expect(r!.status).toBe("processed");
      await consistent(store, "t");
      // A second run has nothing to do.
      expect(await processor().run(ctx(store))).toMatchObject({
        requestsProcessed: 0,
        chunksRewritten: 0,
      });
    });

    test("blooms of rewritten chunks: a remaining trace id is found, a deleted or absent one pruned", async () => {
      const store = await fresh();
      await writeFlush(store, "t", sample(), 8);
      await new DeleteRequestsStore(store).add({ tenant: "t", ...secretQuery });
      await processor().run(ctx(store));
      const range = [T0 - S, T0 + 100n * S] as const;
      // trace-11 lives in the rewritten chunk of lines 8..15.
      const kept = await linesOf(store, "t", '{app="api"} | trace_id="trace-11"', ...range);
      expect(kept.lines).toEqual(["api 11 plain"]);
      // Every remaining line of every rewritten chunk: no false negative.
      for (let i = 8; i < 32; i++) {
        if (i % 5 === 0) continue;
        const got = await linesOf(store, "t", `{app="api"} | trace_id="trace-${i}"`, ...range);
        expect(got.lines).toEqual([`api ${i} plain`]);
      }
      const deleted = await linesOf(store, "t", '{app="api"} | trace_id="trace-10"', ...range);
      expect(deleted).toMatchObject({ lines: [], fetched: 0 });
      expect(deleted.pruned).toBeGreaterThan(0);
      // Ids nowhere: pruned but for the blooms' false positives (a few percent a chunk at
      // these sizes; which chunks depends on their checksums, so counted over ten ids).
      let fetched = 0;
      for (let i = 0; i < 10; i++) {
        const r = await linesOf(
          store,
          "t",
          `{app="api"} | trace_id="trace-nowhere-${i}"`,
          ...range,
        );
        expect(r.lines).toEqual([]);
        expect(r.pruned).toBeGreaterThan(0);
        fetched += r.fetched;
      }
      expect(fetched).toBeLessThanOrEqual(4);
    });

    test("a chunk that loses every line is dropped, with its series", async () => {
      const store = await fresh();
      const { chunks } = await writeFlush(store, "t", sample(), 8);
      await new DeleteRequestsStore(store).add({
        tenant: "t",
        query: '{app="web"}',
        startMs: 1_699_999_000_000,
        endMs: 1_700_000_100_000,
      });
      await processor().run(ctx(store));
      expect(await raw(store, "t", '{app="web"}')).toEqual([]);
      expect(await raw(store, "t", '{app="api"}')).toHaveLength(40);
      const listed = await consistent(store, "t");
      const webChunks = chunks.filter((k) => !listed.has(k));
      expect(webChunks.length).toBeGreaterThan(0);
      for (const k of webChunks) await expect(store.head(k)).rejects.toThrow(/not.found/i);
    });

    test("a segment a live flush manifest lists is skipped until the manifest is gone", async () => {
      const store = await fresh();
      const flushed = await writeFlush(store, "t", sample(), 8, 3);
      const requests = new DeleteRequestsStore(store);
      await requests.add({ tenant: "t", ...secretQuery });
      const first = await processor().run(ctx(store));
      expect(first).toMatchObject({
        requestsProcessed: 0,
        segmentsDeferred: 1,
        segmentsReplaced: 0,
      });
      // Untouched, and still filtered at query time.
      expect(await store.list("t/index/")).toEqual(flushed.segments);
      expect((await requests.list("t"))[0]!.status).toBe("processing");
      expect((await linesOf(store, "t", '{app="api"}', T0 - S, T0 + 100n * S)).lines).toHaveLength(
        35,
      );
      // The ingester commits and deletes its manifest: the next run replaces the segment.
      await store.delete(flushed.manifest!);
      expect(await processor().run(ctx(store))).toMatchObject({ requestsProcessed: 1 });
      expect(await raw(store, "t", '{app="api"}')).toHaveLength(35);
      expect(await store.list("t/index/")).not.toContain(flushed.segments[0]);
      await consistent(store, "t");
    });

    test("a chunk across midnight is replaced in both days' segments", async () => {
      const store = await fresh();
      const midnight = 1_700_006_400n * S; // 2023-11-15T00:00:00Z
      const entries = [];
      for (let i = -5; i < 5; i++) entries.push(entry(midnight + BigInt(i) * S, `night ${i}`));
      const { segments } = await writeFlush(
        store,
        "t",
        [{ labels: { app: "night" }, entries }],
        100,
      );
      expect(segments).toHaveLength(2);
      // Only after midnight, so only the second day is in the request's range.
      await new DeleteRequestsStore(store).add({
        tenant: "t",
        query: '{app="night"} |= "night 3"',
        startMs: 1_700_006_400_000,
        endMs: 1_700_006_410_000,
      });
      await processor().run(ctx(store));
      const q = createQuerier({
        config: {
          ...DEFAULT_CONFIG,
          workers: 0,
          limits: { ...DEFAULT_CONFIG.limits, deletionMode: "disabled" },
        },
        store,
      });
      const r = await q.selectLogs({
        tenant: "t",
        query: '{app="night"}',
        start: midnight - 60n * S,
        end: midnight + 60n * S,
        limit: 100,
        direction: "forward",
      });
      expect(r.entries.map((e) => e.line)).toEqual(
        [-5, -4, -3, -2, -1, 0, 1, 2, 4].map((i) => `night ${i}`),
      );
      for (const key of segments) await expect(store.head(key)).rejects.toThrow(/not.found/i);
      await consistent(store, "t");
    });

    test("old chunks wait for the delete delay; doubled refs meanwhile are deduplicated", async () => {
      let now = 1_800_000_000_000;
      const store = await fresh();
      const { chunks } = await writeFlush(store, "t", sample(), 8);
      await new DeleteRequestsStore(store, () => now).add({ tenant: "t", ...secretQuery });
      const slow = new DeletionProcessor({
        deletionMode: () => "filter-and-delete",
        cancelPeriodMs: 0,
        deleteDelayMs: 60_000,
        now: () => now,
      });
      await slow.run(ctx(store));
      // Swapped: the index no longer lists the old chunks, but they are still there.
      const listed = await consistent(store, "t");
      const old = chunks.filter((k) => !listed.has(k));
      expect(old.length).toBeGreaterThan(0);
      for (const k of old) await store.head(k);
      now += 60_000;
      expect(await slow.run(ctx(store))).toMatchObject({
        requestsProcessed: 1,
        chunksDeleted: old.length,
      });
      for (const k of old) await expect(store.head(k)).rejects.toThrow(/not.found/i);
    });

    test("a crash between any two steps: the next run finishes, no line lost, no entry dangling", async () => {
      // Crash point k: the lease is lost at the k-th check, which precedes every change of
      // the request and every deletion; then a run with the lease finishes the job.
      let points = 0;
      for (let k = 0; ; k++) {
        const store = await fresh();
        await writeFlush(store, "t", sample(), 8);
        const before = await raw(store, "t", '{app=~".+"}');
        await new DeleteRequestsStore(store).add({ tenant: "t", ...secretQuery });
        const crashed = await processor()
          .run(ctx(store, k))
          .then(() => false)
          .catch((error: unknown) => {
            if (error instanceof LeaseLostError) return true;
            throw error;
          });
        if (!crashed) break;
        points++;
        // Whatever the state: no dangling entry, no line lost, none twice (doubled refs).
        await consistent(store, "t");
        const mid = await raw(store, "t", '{app=~".+"}');
        expect(new Set(mid).size).toBe(mid.length);
        // Metric queries fold each line once too (overlapping chunks are deduplicated).
        expect(await rawCount(store, "t")).toBe(mid.length);
        for (const line of all(before, deleted)) expect(mid).toContain(line);
        expect(await processor().run(ctx(store))).toMatchObject({ requestsProcessed: 1 });
        expect(await raw(store, "t", '{app=~".+"}')).toEqual(all(before, deleted));
        await consistent(store, "t");
      }
      // Status, pending chunks, the old segment, swapped, three old chunks, processed.
      expect(points).toBe(8);
    });
  });
}
