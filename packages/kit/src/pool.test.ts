import fc from "fast-check";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { mapLimit } from "./pool.js";

describe("mapLimit", () => {
  it("never runs more than `limit` tasks at once, and answers every result in order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 8 }),
        async (delaysMs, limit) => {
          let running = 0;
          let most = 0;
          const out = await mapLimit(delaysMs, limit, async (ms, i) => {
            running++;
            most = Math.max(most, running);
            await sleep(ms);
            running--;
            return i * 2;
          });
          expect(out).toEqual(delaysMs.map((_, i) => i * 2));
          expect(most).toBeLessThanOrEqual(limit);
          // The bound is also reached when there is work for it.
          if (delaysMs.length >= limit) expect(most).toBe(limit);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("rejects with the first failure and starts no task after it", async () => {
    const started: number[] = [];
    const failing = mapLimit([0, 1, 2, 3, 4, 5], 2, async (n) => {
      started.push(n);
      if (n === 1) throw new Error(`task ${n} failed`);
      await sleep(5);
      return n;
    });
    await expect(failing).rejects.toThrow("task 1 failed");
    await sleep(30);
    // Task 1 failed while task 0 still ran: nothing queued behind them started.
    expect(started).toEqual([0, 1]);
  });

  it("refuses a limit below 1", async () => {
    await expect(mapLimit([1], 0, (n) => Promise.resolve(n))).rejects.toThrow(RangeError);
  });
});
