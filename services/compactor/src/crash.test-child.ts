/**
 * The compactor process the crash tests SIGKILL: `node --import tsx crash.test-child.ts`,
 * configured by the environment (the store as `openTestStore` describes it, and
 * CRASH_RETENTION, a RetentionConfig as JSON). It runs the compactor's run over and over
 * with no grace period, printing `begin <n>` before each and `run <n>` after, until
 * killed. Every store call first waits CRASH_CALL_DELAY_MS (a slow store), so that a run
 * lasts long enough for random kills to land inside it.
 */
import { CompactorMetrics } from "./metrics.js";
import { Retention, type RetentionConfig } from "@sieve/logql";
import { runOnce } from "./run.js";
import { quiet, storeFromEnv } from "./testdata.test-helper.js";

const store = storeFromEnv(process.env);
const delayMs = Number(process.env.CRASH_CALL_DELAY_MS ?? "0");
for (const method of ["get", "put", "delete", "list", "listInfo"] as const) {
  const real = (store[method] as (...args: unknown[]) => Promise<unknown>).bind(store);
  Object.assign(store, {
    [method]: async (...args: unknown[]) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return real(...args);
    },
  });
}
const retention = new Retention(JSON.parse(process.env.CRASH_RETENTION!) as RetentionConfig);
process.stdout.write("started\n");
for (let n = 0; ; n++) {
  process.stdout.write(`begin ${n}\n`);
  await runOnce({
    store,
    lock: { check: () => undefined },
    retention,
    logger: quiet,
    metrics: new CompactorMetrics(),
    writer: `crash-${process.pid}`,
    minSegmentsToCompact: 2,
    maxSegmentChunks: 40,
    garbageGracePeriodMs: 0,
    now: () => Date.now() + 1000,
  });
  process.stdout.write(`run ${n}\n`);
}
