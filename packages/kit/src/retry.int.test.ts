import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SieveError } from "./errors.js";
import { isRetriable, retryRetriable } from "./retry.js";

/** A loopback server that answers 503 to its first `failures` requests, then 200. */
let failures = 0;
let requests = 0;
const server = createServer((_req, res) => {
  requests++;
  res.statusCode = requests <= failures ? 503 : 200;
  res.end(requests <= failures ? "down\n" : "ok\n");
});
let url = "";

beforeAll(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => {
  server.close();
});

/** A GET whose 5xx is a retriable error, as the services' clients make it. */
async function get(): Promise<string> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status >= 500) {
    throw new SieveError("unavailable", res.status, text.trim(), { retriable: true });
  }
  return text;
}

describe("retryRetriable", () => {
  it("retries a failing call with backoff until it succeeds, telling each failure", async () => {
    failures = 2;
    requests = 0;
    const told: [number, boolean][] = [];
    const started = performance.now();
    const text = await retryRetriable(get, {
      minBackoffMs: 20,
      maxBackoffMs: 1000,
      onFailure: (error, attempt, retrying) => {
        expect(error).toBeInstanceOf(SieveError);
        told.push([attempt, retrying]);
      },
    });
    expect(text).toBe("ok\n");
    expect(requests).toBe(3);
    expect(told).toEqual([
      [1, true],
      [2, true],
    ]);
    // Two pauses of at least 20 and 40 ms (jitter only lengthens them).
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
  });

  it("gives up after maxAttempts with the last failure", async () => {
    failures = 100;
    requests = 0;
    const told: boolean[] = [];
    await expect(
      retryRetriable(get, {
        minBackoffMs: 1,
        maxBackoffMs: 5,
        maxAttempts: 3,
        onFailure: (_error, _attempt, retrying) => told.push(retrying),
      }),
    ).rejects.toMatchObject({ code: "unavailable", status: 503, message: "down" });
    expect(requests).toBe(3);
    expect(told).toEqual([true, true, false]);
  });

  it("does not retry a non-retriable failure", async () => {
    let calls = 0;
    await expect(
      retryRetriable(
        () => {
          calls++;
          return Promise.resolve(JSON.parse("{not json") as unknown);
        },
        { minBackoffMs: 1, maxBackoffMs: 5 },
      ),
    ).rejects.toThrow(SyntaxError);
    expect(calls).toBe(1);
  });

  it("stops on abort", async () => {
    failures = 1_000_000;
    requests = 0;
    const stop = new AbortController();
    const call = retryRetriable(get, {
      minBackoffMs: 5,
      maxBackoffMs: 10,
      signal: stop.signal,
    });
    setTimeout(() => {
      stop.abort(new Error("shutting down"));
    }, 50);
    // With the abort reason during a pause, or the failure of the attempt then in flight.
    await expect(call).rejects.toThrow(/shutting down|down/);
    const after = requests;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requests).toBe(after);
  });
});

describe("isRetriable", () => {
  it.each<[string, unknown, boolean]>([
    [
      "an error that says it is retriable",
      new SieveError("x", 503, "x", { retriable: true }),
      true,
    ],
    ["an error that says it is not", new SieveError("x", 400, "x"), false],
    ["an I/O error", Object.assign(new Error("refused"), { code: "ECONNREFUSED" }), true],
    ["a TypeError (a bug)", new TypeError("x is undefined"), false],
    ["a RangeError", new RangeError("bad length"), false],
    ["not an error", "oops", false],
  ])("%s: %s", (_name, error, want) => {
    expect(isRetriable(error)).toBe(want);
  });
});
