/**
 * The querier over a store the compactor works on (`@sieve/compactor`), over the file
 * store and MinIO: queries that run while a day of many segments is merged answer exactly
 * what they answered before (a segment merged away between a query's listing and its read
 * makes it list again; a chunk listed by both the old and the merged segment is read
 * once); and retention hides expired lines before the compactor has deleted anything.
 */
import { randomBytes } from "node:crypto";
import { mapLimit } from "@sieve/kit";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { CompactorMetrics, DEFAULT_CONFIG as COMPACTOR, runOnce } from "@sieve/compactor";
import { dayOf } from "@sieve/index";
import { Retention, type RetentionConfig } from "@sieve/logql";
import type { Entry } from "@sieve/chunk";
import { S3ObjectStore, isNotFound, type CallOptions, type ObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { BloomGateway, DEFAULT_CONFIG as GATEWAY_CONFIG } from "@sieve/bloom-gateway";
import { Registry } from "prom-client";
import { DEFAULT_CONFIG } from "./config.js";
import { createQuerier } from "./index.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const H = 3600n * S;
const DAY = 24n * H;
const NOW = BigInt(Date.now()) * 1_000_000n;
/**
 * Day 0's first line: 12 hours ago, or earlier so that its 45 minutes of flushes stay on
 * one UTC day (a segment per day: across midnight a flush writes two, and the counts below
 * would depend on the hour the suite runs).
 */
const FLUSHES_NS = 45n * 60n * S;
const TWELVE_HOURS_AGO = NOW - 12n * H;
const DAY0 =
  dayOf(TWELVE_HOURS_AGO) === dayOf(TWELVE_HOURS_AGO + FLUSHES_NS)
    ? TWELVE_HOURS_AGO
    : BigInt(dayOf(TWELVE_HOURS_AGO) + 1) * DAY - FLUSHES_NS - 1n;
const quiet = pino({ level: "silent" });

async function openStore(
  kind: "fs" | "s3",
): Promise<{ store: ObjectStore; close: () => Promise<void> }> {
  if (kind === "fs") return tempStore();
  const store = new S3ObjectStore({
    bucket: `sieve-querier-${randomBytes(6).toString("hex")}`,
    endpoint: process.env.S3_ENDPOINT ?? "",
    forcePathStyle: true,
  });
  await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
  return {
    store,
    close: async () => {
      await mapLimit(await store.list(""), 16, (k) => store.delete(k));
      store.close();
    },
  };
}

/** One flush of three apps: 8 lines each, `i` minutes into hour `hour` of `day` days ago. */
function flushStreams(
  day: number,
  flush: number,
): { labels: Record<string, string>; entries: Entry[] }[] {
  const base = DAY0 - BigInt(day) * DAY + BigInt(flush) * 60n * S;
  return ["api", "web", "db"].map((app) => ({
    labels: { app, env: flush % 3 === 0 ? "dev" : "prod" },
    entries: [...Array(8).keys()].map((i) => ({
      timestamp: base + BigInt(i) * 7n * S,
      line: `${app} day ${day} flush ${flush} line ${i} status=${200 + (i % 3)}`,
      structuredMetadata: [{ name: "trace_id", value: `tr-${flush % 9}-${i % 4}` }],
    })),
  }));
}

function compact(store: ObjectStore, retention?: RetentionConfig, grace = 0) {
  return runOnce({
    store,
    lock: { check: () => undefined },
    retention: new Retention(
      retention ?? { enabled: false, limits: COMPACTOR.limits, overrides: {} },
    ),
    logger: quiet,
    metrics: new CompactorMetrics(),
    writer: "compactor-test",
    minSegmentsToCompact: 2,
    maxSegmentChunks: 200,
    garbageGracePeriodMs: grace,
    now: () => Date.now() + 1000,
  });
}

describe.each(["fs", "s3"] as const)("queries while the compactor works, over %s", (kind) => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
  });

  it("answer exactly what they answered before compaction, during and after it", async () => {
    const { store, close } = await openStore(kind);
    closers.push(close);
    for (let day = 0; day < 2; day++) {
      for (let f = 0; f < 40; f++) await writeFlush(store, "t", flushStreams(day, f), 3);
    }
    expect((await store.list("t/index/")).length).toBe(80);
    const gateway = new BloomGateway(GATEWAY_CONFIG, store, quiet, new Registry());
    const querier = () =>
      createQuerier({ config: { ...DEFAULT_CONFIG, workers: 0 }, store, chunkFilter: gateway });
    const start = NOW - 3n * DAY;
    const end = NOW + H;
    const logs = [
      '{app="api"}',
      '{env="dev"} |= "line 3"',
      '{app=~"api|db"} | trace_id="tr-4-1"',
      '{app="web"} | logfmt | status="202"',
    ];
    const answer = async (q: ReturnType<typeof querier>): Promise<string[]> => {
      const out: string[] = [];
      for (const query of logs) {
        for (const direction of ["forward", "backward"] as const) {
          const r = await q.selectLogs({ tenant: "t", query, start, end, limit: 2000, direction });
          out.push(
            `${query} ${direction}: ${r.entries.map((e) => `${e.timestamp} ${e.line}`).join("|")}`,
          );
        }
      }
      const m = await q.selectMatrix({
        tenant: "t",
        query: 'sum by (app, env) (count_over_time({app=~".+"} |= "line" [1h]))',
        start,
        end,
        step: H,
      });
      out.push(
        JSON.stringify(m.result, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
      );
      return out;
    };
    const before = await answer(querier());
    expect(before[0]!.split("|").length).toBe(2 * 40 * 8);
    // Queries in a loop, each from a querier with a cold cache (it lists and reads every
    // segment), while the compactor merges 40 segments a day into one.
    const compacting = { on: true };
    let during = 0;
    const queries = (async () => {
      while (compacting.on) {
        expect(await answer(querier())).toEqual(before);
        during++;
      }
    })();
    const report = await compact(store);
    compacting.on = false;
    await queries;
    expect(report).toMatchObject({ segmentsCompacted: 80, daysRewritten: 2 });
    expect(during).toBeGreaterThan(0);
    expect((await store.list("t/index/")).length).toBeLessThan(10);
    expect(await answer(querier())).toEqual(before);
  });

  it("a query whose listing predates a compaction lists the day again and answers the same", async () => {
    const { store, close } = await openStore(kind);
    closers.push(close);
    for (let f = 0; f < 6; f++) await writeFlush(store, "t", flushStreams(0, f), 3);
    let hook: (() => Promise<unknown>) | undefined;
    let gone = 0;
    const racing = {
      // The listing is taken, then the compactor merges and deletes, then the reads come.
      list: async (prefix: string, o?: CallOptions) => {
        const keys = await store.list(prefix, o);
        const h = keys.length > 0 ? hook : undefined;
        if (h !== undefined) {
          hook = undefined;
          await h();
        }
        return keys;
      },
      get: (key: string, o?: CallOptions) =>
        store.get(key, o).catch((error: unknown) => {
          if (isNotFound(error)) gone++;
          throw error;
        }),
      getRange: (key: string, offset: number, length: number, o?: CallOptions) =>
        store.getRange(key, offset, length, o),
      getTail: (key: string, length: number, o?: CallOptions) => store.getTail(key, length, o),
    };
    const q = { tenant: "t", query: '{app=~".+"}', start: NOW - DAY, end: NOW + H, limit: 1000 };
    const read = async () =>
      (
        await createQuerier({
          config: { ...DEFAULT_CONFIG, workers: 0 },
          store: racing,
        }).selectLogs({
          ...q,
          direction: "forward",
        })
      ).entries.map((e) => `${e.timestamp} ${e.line}`);
    const before = await read();
    expect(before).toHaveLength(6 * 3 * 8);
    hook = () => compact(store);
    expect(await read()).toEqual(before);
    expect(gone).toBe(6);
    expect(await store.list("t/index/")).toHaveLength(1);
  });

  it("never returns a line older than its stream's retention, before and after the compactor ran", async () => {
    const { store, close } = await openStore(kind);
    closers.push(close);
    for (let day = 0; day < 5; day++) {
      for (let f = 0; f < 3; f++) await writeFlush(store, "t", flushStreams(day, f), 3);
    }
    const retention: RetentionConfig = {
      enabled: true,
      limits: { retentionPeriodMs: 3 * 86_400_000, retentionStream: ['period=1d {app="db"}'] },
      overrides: {},
    };
    const querier = (r?: RetentionConfig) =>
      createQuerier({
        config: { ...DEFAULT_CONFIG, workers: 0 },
        store,
        ...(r !== undefined && { retention: r }),
      });
    const lines = async (r: RetentionConfig | undefined): Promise<string[]> =>
      (
        await querier(r).selectLogs({
          tenant: "t",
          query: '{app=~".+"}',
          start: NOW - 10n * DAY,
          end: NOW + H,
          limit: 5000,
          direction: "forward",
        })
      ).entries.map((e) => e.line);
    const all = await lines(undefined);
    expect(all).toHaveLength(5 * 3 * 3 * 8);
    // Day d's lines are about 12 hours before NOW - d days: db keeps day 0, the rest days 0 to 2.
    const kept = all.filter((l) => {
      const day = Number(/day (\d)/.exec(l)![1]);
      return l.startsWith("db") ? day < 1 : day < 3;
    });
    const clamped = await lines(retention);
    expect(clamped).toEqual(kept);
    // The index APIs too: stats count what the compactor will leave.
    const stats = (r?: RetentionConfig) =>
      querier(r).indexStats("t", '{app=~".+"}', NOW - 10n * DAY, NOW + H);
    const before = await stats(retention);
    expect(before.chunks).toBeLessThan((await stats(undefined)).chunks);
    await compact(store, retention);
    expect(await lines(retention)).toEqual(kept);
    // Deleted for good: even a querier without retention sees only what remains.
    expect(await lines(undefined)).toEqual(kept);
    expect(await stats(undefined)).toEqual(before);
  });
});
