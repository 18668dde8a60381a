/**
 * The compactor process the crash tests SIGKILL: `node --import tsx crash.test-child.ts`,
 * configured by the environment (the store as `openTestStore` describes it, and
 * CRASH_RETENTION, a RetentionConfig as JSON). It runs the compactor's run over and over
 * with no grace period, printing `run <n>` after each, until killed.
 */
import { CompactorMetrics } from "./metrics.js";
import { Retention, type RetentionConfig } from "./retention.js";
import { runOnce } from "./run.js";
import { quiet, storeFromEnv } from "./testdata.test-helper.js";

const store = storeFromEnv(process.env);
const retention = new Retention(JSON.parse(process.env.CRASH_RETENTION!) as RetentionConfig);
process.stdout.write("started\n");
for (let n = 0; ; n++) {
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
