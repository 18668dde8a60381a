import { describe, expect, test, vi } from "vitest";
import { DEFAULT_QUERY_LIMITS } from "./config.js";
import { OverBudget, QueryContext } from "./context.js";
import { ERR_DEADLINE_EXCEEDED, QueryError } from "./errors.js";

const withTimeout = (queryTimeoutMs: number): QueryContext =>
  new QueryContext({ ...DEFAULT_QUERY_LIMITS, queryTimeoutMs });

/** Timers keeping the process alive now (a pending race's is one of them). */
const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

/**
 * How many of the timers `run` arms are still pending when it ends (neither fired nor
 * cleared): the process-wide count above also moves with timers others armed before.
 */
async function timersLeftBy(run: () => Promise<void>): Promise<number> {
  const pending = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const set = vi
    .spyOn(globalThis, "setTimeout")
    .mockImplementation((fn: () => void, ms?: number) => {
      const timer = realSet(() => {
        pending.delete(timer);
        fn();
      }, ms);
      pending.add(timer);
      return timer;
    });
  const clear = vi.spyOn(globalThis, "clearTimeout").mockImplementation((timer) => {
    pending.delete(timer);
    realClear(timer);
  });
  try {
    await run();
  } finally {
    set.mockRestore();
    clear.mockRestore();
  }
  return pending.size;
}

/** A promise that never settles, and work that stops (rejects) when `signal` aborts. */
const never = new Promise<never>(() => undefined);
function stopsOn(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    signal.addEventListener(
      "abort",
      () => {
        reject(new Error("read aborted"));
      },
      { once: true },
    );
  });
}

async function timedOut(p: Promise<unknown>): Promise<QueryError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(QueryError);
  expect((error as QueryError).message).toBe(ERR_DEADLINE_EXCEEDED);
  return error as QueryError;
}

describe("a query's deadline", () => {
  test("before it, a race answers what it raced, value or error, and leaves no timer behind", async () => {
    const ctx = withTimeout(10_000);
    const before = timers();
    const raced = ctx.race(Promise.resolve(7));
    expect(timers()).toBe(before + 1);
    expect(await raced).toBe(7);
    await expect(ctx.race(Promise.reject(new Error("store down")))).rejects.toThrow("store down");
    // Two at once share one timer, gone once the last settles.
    let release!: () => void;
    const slow = ctx.race(
      new Promise<void>((resolve) => {
        release = resolve;
      }),
    );
    const fast = ctx.race(Promise.resolve("x"));
    expect(timers()).toBe(before + 1);
    expect(await fast).toBe("x");
    expect(timers()).toBe(before + 1);
    release();
    await slow;
    expect(timers()).toBe(before);
    expect(ctx.signal.aborted).toBe(false);
  });

  test("at it, every pending race fails with Loki's words and the signal the work holds aborts", async () => {
    const ctx = withTimeout(60);
    const t0 = performance.now();
    const held = ctx.signal;
    const stuck = ctx.race(never);
    const reading = ctx.race(stopsOn(ctx.callOptions().signal));
    await timedOut(stuck);
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(55);
    expect(waited).toBeLessThan(2_000);
    await timedOut(reading);
    expect(held.aborted).toBe(true);
    expect((held.reason as DOMException).name).toBe("TimeoutError");
    // After it: a race fails at once, a signal asked for now is aborted already.
    const late = performance.now();
    await timedOut(ctx.race(Promise.resolve(1)));
    expect(performance.now() - late).toBeLessThan(50);
    expect(withTimeout(1).signal.aborted).toBe(false);
    expect(ctx.signal.aborted).toBe(true);
    expect(() => {
      ctx.check();
    }).toThrow(ERR_DEADLINE_EXCEEDED);
  });

  test("a race begun past the deadline fails before its timer could fire, and aborts the signal", async () => {
    const ctx = withTimeout(5);
    const held = ctx.signal;
    const until = performance.now() + 10;
    while (performance.now() < until); // past the deadline, no timer run
    await timedOut(ctx.race(Promise.resolve(1)));
    expect(held.aborted).toBe(true);
  });

  test("without queryTimeoutMs, a race is the work itself and the signal never aborts", () => {
    const ctx = withTimeout(0);
    const work = Promise.resolve(3);
    expect(ctx.race(work)).toBe(work);
    expect(ctx.callOptions()).toEqual({ signal: ctx.signal });
    expect(ctx.signal.aborted).toBe(false);
    expect(() => {
      ctx.check();
    }).not.toThrow();
  });
});

describe("a query's budget (a needle on the main thread: inline.ts)", () => {
  const budgeted = (ms: number, queryTimeoutMs = 60_000): QueryContext =>
    new QueryContext({ ...DEFAULT_QUERY_LIMITS, queryTimeoutMs }, false, { ms, chunks: 100 });

  test("past its time, a check and every pending race fail with OverBudget, not Loki's timeout", async () => {
    const ctx = budgeted(20);
    // Its own timers, not the process's count: a timer armed before may fire meanwhile
    // (the whole suite under load once saw 1 before and 0 after).
    const left = await timersLeftBy(async () => {
      const pending = ctx.race(stopsOn(ctx.signal));
      await expect(pending).rejects.toBeInstanceOf(OverBudget);
    });
    expect(left).toBe(0);
    expect(ctx.signal.aborted).toBe(true);
    expect(() => {
      ctx.check();
    }).toThrow(OverBudget);
    await expect(ctx.race(Promise.resolve(1))).rejects.toBeInstanceOf(OverBudget);
  });

  test("a timeout shorter than the budget is still the timeout", async () => {
    const ctx = budgeted(10_000, 20);
    await timedOut(ctx.race(never));
  });

  test("within it, races and checks pass; chunks in range are refused past its count", async () => {
    const ctx = budgeted(10_000);
    expect(await ctx.race(Promise.resolve("ok"))).toBe("ok");
    ctx.check();
    ctx.afford(100);
    expect(() => {
      ctx.afford(101);
    }).toThrow(OverBudget);
    // Without a budget there is no count to pass.
    withTimeout(0).afford(1_000_000);
  });
});
