/**
 * Delivery failures of the write-ahead log's consumer (issue 10, item 6): every failure is
 * told to the listener, retriable ones are retried with backoff and jitter until they
 * succeed, non-retriable ones stop the partition instead of being retried forever.
 */
import { open as openFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { QueueError } from "../errors.js";
import type { ConsumedBatch, DeliveryFailure } from "../queue.js";
import { isRetriable } from "@sieve/kit";
import { waitFor } from "../testing.js";
import { SEGMENT_HEADER_BYTES } from "./format.js";
import { openWal } from "./wal.js";
import { tempDir, valueOf } from "./wal.test-helper.js";

const KEY = Buffer.from("fp-8byte");

function record(partition: number, n: number) {
  return { partition, key: KEY, value: valueOf(partition, n) };
}

/** A listener that records every call. */
function recorder() {
  const failures: DeliveryFailure[] = [];
  const recovered: number[] = [];
  return {
    failures,
    recovered,
    listener: {
      failed: (f: DeliveryFailure) => failures.push(f),
      recovered: (p: number) => recovered.push(p),
    },
  };
}

describe("isRetriable", () => {
  it.each([
    ["a TypeError (a bug)", new TypeError("x is undefined"), false],
    ["a RangeError", new RangeError("Invalid string length"), false],
    ["a SyntaxError (bad data)", new SyntaxError("Unexpected token"), false],
    ["a retriable QueueError", new QueueError("write_failed"), true],
    ["a non-retriable QueueError", new QueueError("corrupt"), false],
    ["an error saying so", Object.assign(new Error("kafka"), { retriable: false }), false],
    [
      "a network error",
      Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
      true,
    ],
    ["a plain Error", new Error("store timeout"), true],
    ["not an error", "boom", false],
  ])("%s → %s", (_what, error, want) => {
    expect(isRetriable(error)).toBe(want);
  });
});

describe("write-ahead log delivery failures", () => {
  it("retries a retriable handler failure with growing, jittered pauses, then tells it recovered", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 1, retryBackoffMs: 20 });
    const { failures, recovered, listener } = recorder();
    await wal.writer.append([record(0, 0), record(0, 1)]);
    const at: number[] = [];
    await wal.consumer.start((batch: ConsumedBatch) => {
      at.push(performance.now());
      if (at.length <= 4) return Promise.reject(new Error(`store unavailable ${batch.partition}`));
      return Promise.resolve();
    }, listener);
    await waitFor(() => recovered.length === 1, { what: "recovery" });
    await wal.close();
    expect(at).toHaveLength(5);
    expect(failures.map((f) => [f.stage, f.attempt, f.retrying])).toEqual([
      ["handler", 1, true],
      ["handler", 2, true],
      ["handler", 3, true],
      ["handler", 4, true],
    ]);
    // Pauses: 20 ms × 2^(n-1) × a random factor in [1, 2).
    const pauses = at.slice(1).map((t, i) => t - at[i]!);
    pauses.forEach((pause, i) => {
      expect(pause).toBeGreaterThanOrEqual(20 * 2 ** i - 2);
      expect(pause).toBeLessThan(20 * 2 ** (i + 1) + 50);
    });
    // Jitter: the pauses are not the bare doublings (all four exact has odds ~0).
    const exact = pauses.filter((p, i) => Math.abs(p - 20 * 2 ** i) < 1).length;
    expect(exact).toBeLessThan(4);
    expect(recovered).toEqual([0]);
  });

  it("does not retry a non-retriable handler failure: that partition stops, the others go on", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 2, retryBackoffMs: 1 });
    const { failures, listener } = recorder();
    await wal.writer.append([record(0, 0), record(1, 0)]);
    const calls = [0, 0];
    await wal.consumer.start((batch) => {
      calls[batch.partition]!++;
      if (batch.partition === 0) throw new TypeError("cannot read properties of undefined");
      return Promise.resolve();
    }, listener);
    await waitFor(() => failures.length === 1 && calls[1] === 1, { what: "one failure" });
    await wal.writer.append([record(0, 1), record(1, 1)]);
    await waitFor(() => calls[1] === 2, { what: "partition 1 goes on" });
    await wal.close();
    expect(calls[0]).toBe(1);
    expect(failures).toMatchObject([
      { partition: 0, stage: "handler", attempt: 1, retrying: false },
    ]);
  });

  it("tells an unreadable partition as a failure that stops it", async () => {
    const dir = await tempDir();
    let wal = await openWal({ dir, partitions: 1, segmentBytes: 1024 });
    for (let n = 0; n < 40; n++) await wal.writer.append([record(0, n)]);
    await wal.close();
    // Damage a record of the first segment: recovery checks only the last segment's tail.
    const names = (await readdir(join(dir, "partition-0"))).filter((n) => n.endsWith(".wal"));
    expect(names.length).toBeGreaterThan(1);
    const fh = await openFile(join(dir, "partition-0", names.sort()[0]!), "r+");
    await fh.write(Buffer.from("!"), 0, 1, SEGMENT_HEADER_BYTES + 30);
    await fh.close();
    wal = await openWal({ dir, partitions: 1, segmentBytes: 1024 });
    const { failures, listener } = recorder();
    await wal.consumer.start(() => Promise.resolve(), listener);
    await waitFor(() => failures.length === 1, { what: "read failure" });
    await wal.close();
    expect(failures[0]).toMatchObject({ partition: 0, stage: "read", retrying: false });
    expect(failures[0]!.error).toMatchObject({ code: "corrupt" });
  });

  it("retries a retriable `assigned` before delivering anything", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 1, retryBackoffMs: 1 });
    const { failures, recovered, listener } = recorder();
    await wal.writer.append([record(0, 0)]);
    let assignedOk = false;
    let attempts = 0;
    const delivered: boolean[] = [];
    await wal.consumer.start(
      () => {
        delivered.push(assignedOk);
        return Promise.resolve();
      },
      {
        ...listener,
        assigned: () => {
          if (++attempts < 3) return Promise.reject(new Error("connect ECONNREFUSED"));
          assignedOk = true;
          return Promise.resolve();
        },
      },
    );
    await waitFor(() => delivered.length === 1, { what: "delivery" });
    await wal.close();
    expect(delivered).toEqual([true]);
    expect(failures.map((f) => [f.stage, f.retrying])).toEqual([
      ["assigned", true],
      ["assigned", true],
    ]);
    expect(recovered).toEqual([0]);
  });
});
