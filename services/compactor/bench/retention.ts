/**
 * `pnpm bench:retention`: disk bytes before and after one compactor run with retention on
 * a generated multi-day dataset, written the way ingester flushes write it (real chunks,
 * bloom blocks and index segments, `src/testdata.test-helper.ts`), plus the orphans of
 * rolled-back flushes.
 *
 * Dataset: `--days` days (14) ending now, `--flushes` flushes a day (24), three tenants of
 * four streams each, 40 lines of about 120 bytes per stream and flush, every 10th flush's
 * index lost (rolled back). Retention: 7 days for every tenant, `{app="debug"}` 2 days
 * (stream rule), tenant `keep` 30 days (override).
 *
 *   pnpm bench:retention [--days 14] [--flushes 24] [--store fs|s3]
 *
 * Prints bytes by kind before and after; writes the run as JSON under bench/results/.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import type { Entry } from "@sieve/chunk";
import type { ObjectStore } from "@sieve/storage";
import pino from "pino";
import { CompactorMetrics } from "../src/metrics.js";
import { Retention, type RetentionConfig } from "@sieve/logql";
import { runOnce } from "../src/run.js";
import { DAY_MS, NS_PER_MS, openTestStore, writeFlush } from "../src/testdata.test-helper.js";

const { values } = parseArgs({
  options: {
    days: { type: "string", default: "14" },
    flushes: { type: "string", default: "24" },
    store: { type: "string", default: "fs" },
  },
});
const DAYS = Number(values.days);
const FLUSHES = Number(values.flushes);
const TENANTS = ["alpha", "beta", "keep"];
const APPS = ["api", "web", "db", "debug"];
const RETENTION: RetentionConfig = {
  enabled: true,
  limits: { retentionPeriodMs: 7 * DAY_MS, retentionStream: ['period=2d {app="debug"}'] },
  overrides: { keep: { retentionPeriodMs: 30 * DAY_MS } },
};

/** Bytes and objects by kind: index, chunks, blooms. */
async function usage(
  store: ObjectStore,
): Promise<Record<string, { objects: number; bytes: number }>> {
  const out: Record<string, { objects: number; bytes: number }> = {};
  for (const o of await store.listInfo("")) {
    const kind = o.key.split("/")[1] ?? "other";
    const u = (out[kind] ??= { objects: 0, bytes: 0 });
    u.objects++;
    u.bytes += o.size;
  }
  return out;
}

function lines(tenant: string, app: string, fromNs: bigint, n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    timestamp: fromNs + BigInt(i) * 5_000_000_000n,
    line: `level=info tenant=${tenant} app=${app} msg="request ${i} served" path=/v1/items/${(i * 7919) % 10007} took=${i % 97}ms`,
    structuredMetadata: [{ name: "trace_id", value: `${app}-${fromNs % 1_000_000n}-${i % 11}` }],
  }));
}

const { store, close } = await openTestStore(values.store === "s3" ? "s3" : "fs");
try {
  const now = Date.now();
  let sequence = 0;
  for (let d = 0; d < DAYS; d++) {
    for (let f = 0; f < FLUSHES; f++) {
      // Flush f of day d: lines from (d days + f hours) before now, as an hourly flush.
      const fromMs = now - d * DAY_MS - (f + 1) * (DAY_MS / FLUSHES);
      for (const tenant of TENANTS) {
        await writeFlush(
          store,
          tenant,
          APPS.map((app) => ({
            labels: { app, env: "prod" },
            entries: lines(tenant, app, BigInt(fromMs) * NS_PER_MS, 40),
          })),
          { entriesPerChunk: 40, sequence: sequence++, nowMs: fromMs, noSegments: f % 10 === 9 },
        );
      }
    }
  }
  const before = await usage(store);
  const t0 = performance.now();
  const report = await runOnce({
    store,
    lock: { check: () => undefined },
    retention: new Retention(RETENTION),
    logger: pino({ level: "silent" }),
    metrics: new CompactorMetrics(),
    writer: "compactor-bench",
    minSegmentsToCompact: 2,
    maxSegmentChunks: 200_000,
    // The generated objects are minutes old: a grace period of zero lets the orphans go.
    garbageGracePeriodMs: 0,
    now: () => Date.now() + 1000,
  });
  const runMs = performance.now() - t0;
  const after = await usage(store);
  const total = (u: typeof before): number => Object.values(u).reduce((n, k) => n + k.bytes, 0);
  console.log(
    `\nstore ${values.store}: ${DAYS} days × ${FLUSHES} flushes × ${TENANTS.length} tenants × ${APPS.length} streams`,
  );
  console.log("| kind | objects before | bytes before | objects after | bytes after |");
  console.log("|---|---:|---:|---:|---:|");
  for (const kind of ["index", "chunks", "blooms"]) {
    const b = before[kind] ?? { objects: 0, bytes: 0 };
    const a = after[kind] ?? { objects: 0, bytes: 0 };
    console.log(`| ${kind} | ${b.objects} | ${b.bytes} | ${a.objects} | ${a.bytes} |`);
  }
  console.log(`| total | | ${total(before)} | | ${total(after)} |`);
  console.log(
    `\nrun: ${runMs.toFixed(0)} ms; chunks expired ${report.chunksExpired}, deleted ${JSON.stringify(report.deleted)}, ${report.bytesReclaimed} bytes reclaimed`,
  );
  const dir = new URL("../../../bench/results/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL(
    `compactor-retention-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
    dir,
  );
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
  writeFileSync(
    file,
    JSON.stringify(
      {
        benchmark: "compactor-retention",
        store: values.store,
        days: DAYS,
        flushes: FLUSHES,
        retention: RETENTION,
        machine,
        before,
        after,
        report,
        runMs,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${file.pathname}`);
} finally {
  await close();
}
