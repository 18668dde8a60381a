import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deadlineSignal,
  isDeadlineReason,
  settleBy,
  waitAtMost,
  withDeadline,
} from "./deadline.js";

/**
 * A loopback server that never answers (a frozen peer), except `/warm`. Counts the
 * connections of unanswered requests that were closed.
 */
let closed = 0;
const server = createServer((req, res) => {
  if (req.url === "/warm") {
    res.end("ok");
    return;
  }
  req.socket.on("close", () => {
    closed++;
  });
});
let url = "";

beforeAll(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  // fetch loads its HTTP client on first use: a slow first request must not eat a deadline.
  await (await fetch(`${url}warm`)).text();
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const until = async (ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe("deadlineSignal", () => {
  it("aborts a real fetch at the deadline with a TimeoutError, closing its connection", async () => {
    const before = closed;
    const started = performance.now();
    const error = await fetch(url, { signal: deadlineSignal(300) }).catch((e: unknown) => e);
    const tookMs = performance.now() - started;
    expect(isDeadlineReason(error)).toBe(true);
    expect(tookMs).toBeGreaterThanOrEqual(295);
    expect(tookMs).toBeLessThan(2000);
    await until(() => closed > before);
    expect(closed).toBe(before + 1); // cancelled, not just abandoned
  });

  it("aborts on the caller's signal first, with the caller's reason", async () => {
    const caller = new AbortController();
    const signal = deadlineSignal(60_000, caller.signal);
    setTimeout(() => {
      caller.abort(new Error("client went away"));
    }, 20);
    const error = await fetch(url, { signal }).catch((e: unknown) => e);
    expect(error).toMatchObject({ message: "client went away" });
    expect(isDeadlineReason(signal.reason)).toBe(false);
  });

  it("without a timeout is the caller's signal, or one that never aborts", () => {
    const caller = new AbortController();
    expect(deadlineSignal(undefined, caller.signal)).toBe(caller.signal);
    expect(deadlineSignal(Number.POSITIVE_INFINITY).aborted).toBe(false);
  });
});

describe("settleBy and withDeadline", () => {
  it("settle at the deadline even when the work ignores its signal", async () => {
    const started = performance.now();
    const ignoring = new Promise<string>((resolve) =>
      setTimeout(() => {
        resolve("late");
      }, 500),
    );
    const error = await withDeadline(() => ignoring, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(isDeadlineReason(error)).toBe(true);
    expect(performance.now() - started).toBeLessThan(400);
  });

  it("answer the work's result when it comes first", async () => {
    const got = await withDeadline(
      async (signal) => {
        const res = await fetch(url, { signal, method: "HEAD" }).catch(() => undefined);
        return res === undefined ? "aborted" : "answered";
      },
      { timeoutMs: 30 },
    ).catch((e: unknown) => e);
    // The frozen server never answers: the deadline wins, as a TimeoutError.
    expect(isDeadlineReason(got)).toBe(true);
    expect(await withDeadline(() => Promise.resolve(42), { timeoutMs: 1000 })).toBe(42);
  });

  it("reject at once on a signal that already aborted", async () => {
    const caller = new AbortController();
    caller.abort(new Error("already gone"));
    await expect(settleBy(Promise.resolve(1), caller.signal)).rejects.toThrow("already gone");
    let ran = false;
    await expect(
      withDeadline(
        () => {
          ran = true;
          return Promise.resolve(1);
        },
        { signal: caller.signal },
      ),
    ).rejects.toThrow("already gone");
    expect(ran).toBe(false);
  });
});

describe("withDeadline cancels the work, waitAtMost only stops waiting", () => {
  it("aborts the work's signal at the deadline, and on the caller's abort", async () => {
    let seen: AbortSignal | undefined;
    const never = (signal: AbortSignal): Promise<never> => {
      seen = signal;
      return new Promise(() => undefined);
    };
    expect(
      isDeadlineReason(await withDeadline(never, { timeoutMs: 20 }).catch((e: unknown) => e)),
    ).toBe(true);
    expect(seen?.aborted).toBe(true);
    expect(isDeadlineReason(seen?.reason)).toBe(true);

    const caller = new AbortController();
    const pending = withDeadline(never, { timeoutMs: 60_000, signal: caller.signal });
    caller.abort(new Error("client gone"));
    await expect(pending).rejects.toThrow("client gone");
    expect(seen?.aborted).toBe(true);
  });

  it("waitAtMost answers the work or a TimeoutError, and leaves the work running", async () => {
    expect(await waitAtMost(Promise.resolve("fast"), 1000)).toBe("fast");
    let finished = false;
    const slow = new Promise<string>((resolve) =>
      setTimeout(() => {
        finished = true;
        resolve("late");
      }, 100),
    );
    expect(isDeadlineReason(await waitAtMost(slow, 10).catch((e: unknown) => e))).toBe(true);
    expect(await slow).toBe("late");
    expect(finished).toBe(true);
    await expect(waitAtMost(Promise.reject(new Error("own")), 1000)).rejects.toThrow("own");
  });
});
