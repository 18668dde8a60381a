/**
 * `Compactor.busy`: true exactly while a run is in progress (the main thread's needle
 * queries yield to it: the querier's inline.ts), over a real file store and lock.
 */
import { describe, expect, it } from "vitest";
import { Compactor } from "./compactor.js";
import { DEFAULT_CONFIG } from "./config.js";
import { openTestStore, quiet } from "./testdata.test-helper.js";

describe("a compactor's busy flag", () => {
  it("is set while a run's jobs work, and cleared when the run ends, failed or not", async () => {
    const { store, close } = await openTestStore("fs");
    let release!: () => void;
    let started!: () => void;
    const inJob = new Promise<void>((resolve) => {
      started = resolve;
    });
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    const compactor = new Compactor({
      config: { ...DEFAULT_CONFIG, compactionIntervalMs: 60_000, lockRetryMs: 50 },
      store,
      logger: quiet,
      jobs: [
        {
          name: "held",
          run: async () => {
            runs++;
            started();
            await held;
            throw new Error("the job fails: the run ends all the same");
          },
        },
      ],
    });
    try {
      expect(compactor.busy).toBe(false);
      compactor.start();
      await inJob;
      expect(compactor.busy).toBe(true);
      release();
      while (compactor.busy) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(runs).toBe(1);
    } finally {
      await compactor.stop();
      await close();
    }
    expect(compactor.busy).toBe(false);
  });
});
