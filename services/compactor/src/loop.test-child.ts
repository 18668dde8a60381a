/**
 * A whole compactor (the loop, the lock, a job) for the two-compactor test: `node --import
 * tsx loop.test-child.ts`, the store from the environment (`openTestStore`), LOOP_ID its
 * instance id. Its job prints `run <id> <ms>` at each run; SIGTERM stops it gracefully
 * (releasing the lock).
 */
import { Compactor } from "./compactor.js";
import { DEFAULT_CONFIG } from "./config.js";
import { quiet, storeFromEnv } from "./testdata.test-helper.js";

const id = process.env.LOOP_ID!;
const compactor = new Compactor({
  config: {
    ...DEFAULT_CONFIG,
    instanceId: id,
    compactionIntervalMs: 200,
    lockTtlMs: 2000,
    lockRetryMs: 100,
  },
  store: storeFromEnv(process.env),
  logger: quiet,
  jobs: [
    {
      name: "print",
      run: () => {
        process.stdout.write(`run ${id} ${Date.now()}\n`);
        return Promise.resolve();
      },
    },
  ],
});
compactor.start();
process.stdout.write("started\n");
process.on("SIGTERM", () => {
  void compactor.stop().then(() => process.exit(0));
});
