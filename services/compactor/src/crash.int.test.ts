/**
 * Crash safety: a compactor process (crash.test-child.ts) is SIGKILLed at random points of
 * its runs (merging days, rewriting them without expired chunks, deleting segments, chunks,
 * bloom blocks and orphans), over the file store and MinIO. After every kill the index has
 * no entry whose chunk or bloom block is missing, and every line that should remain is
 * visible; at the end, one clean run leaves exactly the lines retention keeps.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ObjectStore } from "@sieve/storage";
import { afterAll, describe, expect, it } from "vitest";
import { CompactorMetrics } from "./metrics.js";
import { Retention, type RetentionConfig } from "@sieve/logql";
import { runOnce } from "./run.js";
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

const here = dirname(fileURLToPath(import.meta.url));
const NOW_NS = BigInt(Date.now()) * NS_PER_MS;
const DAY_NS = BigInt(DAY_MS) * NS_PER_MS;
const ALL = [NOW_NS - 30n * DAY_NS, NOW_NS + DAY_NS] as const;
/** Where day 0's flushes start: about 12 hours ago, their half hour on one UTC day. */
const DAY0_NS = oneDayWindow(NOW_NS - 11n * HOUR_NS - 30n * 60_000_000_000n, 30n * 60_000_000_000n);
const KILLS = 6;
const RETENTION: RetentionConfig = {
  enabled: true,
  limits: { retentionPeriodMs: 3 * DAY_MS, retentionStream: ['period=1d {app="db"}'] },
  overrides: {},
};

/**
 * Runs the child until it has printed `started`, then kills it after `delayMs`. Answers
 * whether the kill landed inside a run (one begun and not ended).
 */
async function killAfter(env: Record<string, string>, delayMs: number): Promise<boolean> {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "crash.test-child.ts")], {
    cwd: join(here, ".."),
    env: {
      ...process.env,
      ...env,
      CRASH_RETENTION: JSON.stringify(RETENTION),
      CRASH_CALL_DELAY_MS: "5",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) =>
    child.on("exit", () => {
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    const started = (): void => {
      if (out.includes("started")) resolve();
    };
    child.stdout.on("data", started);
    void exited.then(() => {
      reject(new Error(`child exited before starting: ${err}`));
    });
  });
  await new Promise((resolve) => setTimeout(resolve, delayMs));
  child.kill("SIGKILL");
  await exited;
  return (out.match(/^begin /gm) ?? []).length > (out.match(/^run /gm) ?? []).length;
}

/** 4 days × 12 flushes of 3 apps, about 12 hours before NOW minus the day; 3 orphan flushes. */
async function writeData(store: ObjectStore): Promise<void> {
  for (let d = 0; d < 4; d++) {
    for (let f = 0; f < 12; f++) {
      const base = DAY0_NS - BigInt(d) * DAY_NS + BigInt(f) * 60_000_000_000n;
      await writeFlush(
        store,
        "t",
        ["api", "web", "db"].map((app) => ({
          labels: { app },
          entries: entries(`${app}-${d}-${f}`, base, 2_000_000_000n, 8),
        })),
        { entriesPerChunk: 4, nowMs: Date.now() - d * DAY_MS },
      );
    }
  }
  for (let o = 0; o < 3; o++) {
    await writeFlush(
      store,
      "t",
      [
        {
          labels: { app: "api" },
          entries: entries(`orphan-${o}`, NOW_NS - HOUR_NS, 1_000_000n, 8),
        },
      ],
      { noSegments: true },
    );
  }
}

/** What retention keeps: db the last day, the rest three days (lines name their day). */
function shouldRemain(line: string): boolean {
  const day = Number(/-(\d)-\d+ line/.exec(line)![1]);
  return line.includes('{app="db"}') ? day < 1 : day < 3;
}

describe.each(["fs", "s3"] as const)("a compactor killed at random points, over %s", (kind) => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
  });

  it(
    "never leaves an index entry without its object nor loses a line that should remain",
    { timeout: 300_000 },
    async () => {
      const { store, close, env } = await openTestStore(kind);
      closers.push(close);
      await writeData(store);
      const all = await visibleLines(store, "t", ...ALL);
      expect(all).toHaveLength(4 * 12 * 3 * 8);
      const remain = all.filter(shouldRemain);
      expect(remain.length).toBeLessThan(all.length);
      let midRun = 0;
      for (let k = 0; k < KILLS; k++) {
        // Work for the next run: three more flushes of today (to merge) and an orphan.
        for (let f = 0; f < 3; f++) {
          const flushed = await writeFlush(store, "t", [
            {
              labels: { app: "web" },
              entries: entries(
                `web-0-${100 + k * 3 + f}`,
                DAY0_NS + BigInt(k * 3 + f) * 1_000_000_000n,
                1_000_000n,
                4,
              ),
            },
          ]);
          expect(flushed.segments).toHaveLength(1);
        }
        await writeFlush(
          store,
          "t",
          [
            {
              labels: { app: "api" },
              entries: entries(`orphan-${10 + k}`, NOW_NS - HOUR_NS, 1_000_000n, 4),
            },
          ],
          { noSegments: true },
        );
        const remainNow = (await visibleLines(store, "t", ...ALL)).filter(shouldRemain);
        // From just after start to past the end of a run over this store.
        const delay = Math.floor(Math.random() * (kind === "fs" ? 800 : 2000));
        if (await killAfter(env, delay)) midRun++;
        expect(await danglingRefs(store, "t")).toEqual([]);
        const visible = new Set(await visibleLines(store, "t", ...ALL));
        for (const line of remainNow) expect(visible.has(line), line).toBe(true);
      }
      // Some kills landed inside a run, not only between runs.
      expect(midRun).toBeGreaterThan(0);
      const report = await runOnce({
        store,
        lock: { check: () => undefined },
        retention: new Retention(RETENTION),
        logger: quiet,
        metrics: new CompactorMetrics(),
        writer: "final",
        minSegmentsToCompact: 2,
        maxSegmentChunks: 40,
        garbageGracePeriodMs: 0,
        now: () => Date.now() + 1000,
      });
      expect(report).toBeDefined();
      const final = await visibleLines(store, "t", ...ALL);
      expect(final.filter((l) => !/-(1\d\d|[2-9]\d) line/.test(l))).toEqual(remain);
      expect(final.length - remain.length).toBe(KILLS * 3 * 4);
      expect(await danglingRefs(store, "t")).toEqual([]);
      // Nothing unreferenced is left: orphans and expired chunks are gone.
      const index = new Set(
        (await import("@sieve/index").then((m) => m.readIndex(store, "t", ...ALL))).flatMap((s) =>
          s.chunks.flatMap((c) => [c.key, c.bloom.kind === "block" ? c.bloom.key : ""]),
        ),
      );
      const stored = (await store.list("t/")).filter((k) => !k.includes("/index/"));
      expect(stored.filter((k) => !index.has(k))).toEqual([]);
    },
  );
});
