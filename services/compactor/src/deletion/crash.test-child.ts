/**
 * The delete processor as a process the crash test SIGKILLs: `node --import tsx
 * crash.test-child.ts`, over the store named by CRASH_STORE (`fs` with CRASH_DIR, or `s3`
 * with S3_ENDPOINT and CRASH_BUCKET). Every store call first waits CRASH_DELAY_MS, so
 * that a kill at a random time lands inside processing. Prints `running` before its first
 * run, then runs until every request is processed and prints `done`.
 */
import { openStore, type StoreConfig } from "@sieve/storage";
import { pino } from "pino";
import { DeletionProcessor } from "./processor.js";
import { DeleteRequestsStore } from "./requests.js";

const env = process.env;
const config: StoreConfig =
  env.CRASH_STORE === "s3"
    ? { backend: "s3", bucket: env.CRASH_BUCKET!, endpoint: env.S3_ENDPOINT!, forcePathStyle: true }
    : { backend: "filesystem", dir: env.CRASH_DIR! };
const real = openStore(config);
const delayMs = Number(env.CRASH_DELAY_MS ?? "2");
const slow = new Proxy(real, {
  get(target, name, receiver) {
    const value = Reflect.get(target, name, receiver) as unknown;
    if (typeof value !== "function") return value;
    return async (...args: unknown[]) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return (value as (...a: unknown[]) => unknown).apply(target, args);
    };
  },
});

const processor = new DeletionProcessor({
  deletionMode: () => "filter-and-delete",
  cancelPeriodMs: 0,
  deleteDelayMs: 0,
});
const requests = new DeleteRequestsStore(real);
process.stdout.write("running\n");
for (;;) {
  await processor.run({ store: slow, logger: pino({ level: "silent" }), isLeaseHeld: () => true });
  const all = await requests.list("t");
  if (all.every((r) => r.status === "processed")) break;
}
process.stdout.write("done\n");
