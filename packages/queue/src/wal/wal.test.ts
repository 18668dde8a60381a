import { readdir, stat, truncate, open as openFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { QueueError } from "../errors.js";
import type { ConsumedBatch, OutgoingRecord } from "../queue.js";
import { frameBytes, SEGMENT_HEADER_BYTES } from "./format.js";
import { openWal } from "./wal.js";
import { drain, tempDir, valueOf } from "./wal.test-helper.js";

const KEY = Buffer.from("fp-8byte");

function records(partition: number, from: number, count: number, size = 32): OutgoingRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    partition,
    key: KEY,
    value: valueOf(partition, from + i, size),
  }));
}

function values(batch: readonly { value: Uint8Array }[]): string[] {
  return batch.map((r) => Buffer.from(r.value).toString());
}

async function segmentFiles(dir: string, partition: number): Promise<string[]> {
  const names = await readdir(join(dir, `partition-${partition}`));
  return names.filter((n) => n.endsWith(".wal")).sort();
}

describe("write-ahead log", () => {
  it("delivers appended records per partition in order with dense offsets, and resumes from the commit", async () => {
    const dir = await tempDir();
    let wal = await openWal({ dir, partitions: 3 });
    await wal.writer.append([...records(0, 0, 5), ...records(2, 0, 2)]);
    await wal.writer.append(records(0, 5, 3));
    let read = await drain(wal);
    expect(read.map((r) => r.map((x) => x.offset))).toEqual([[0, 1, 2, 3, 4, 5, 6, 7], [], [0, 1]]);
    expect(values(read[0]!)).toEqual(records(0, 0, 8).map((r) => Buffer.from(r.value).toString()));
    expect(read[2]!.every((r) => r.partition === 2 && Buffer.from(r.key).equals(KEY))).toBe(true);

    await wal.consumer.commit(0, 6);
    await wal.close();
    wal = await openWal({ dir, partitions: 3 });
    expect(wal.consumer.committed(0)).toBe(6);
    read = await drain(wal);
    expect(read[0]!.map((r) => r.offset)).toEqual([6, 7]);
    expect(read[2]!.map((r) => r.offset)).toEqual([0, 1]);
    await wal.close();
  });

  it("tells each partition's end and commit: what a flush waits for", async () => {
    const dir = await tempDir();
    const wal = await openWal({ dir, partitions: 3 });
    await wal.writer.append([...records(0, 0, 5), ...records(2, 0, 2)]);
    expect(Object.fromEntries(await wal.consumer.positions())).toEqual({
      0: { end: 5, committed: 0 },
      1: { end: 0, committed: 0 },
      2: { end: 2, committed: 0 },
    });
    await wal.consumer.commit(0, 4);
    await wal.writer.append(records(2, 2, 1));
    const after = await wal.consumer.positions();
    expect(after.get(0)).toEqual({ end: 5, committed: 4 });
    expect(after.get(2)).toEqual({ end: 3, committed: 0 });
    await wal.close();
  });

  it("wakes a caught-up consumer when records are appended", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 2 });
    const seen: ConsumedBatch[] = [];
    let arrived!: () => void;
    const got = new Promise<void>((resolve) => (arrived = resolve));
    await wal.consumer.start((batch) => {
      seen.push(batch);
      if (seen.reduce((n, b) => n + b.records.length, 0) === 3) arrived();
      return Promise.resolve();
    });
    await wal.writer.append(records(1, 0, 2));
    await wal.writer.append(records(1, 2, 1));
    await got;
    expect(seen.flatMap((b) => b.records.map((r) => r.offset))).toEqual([0, 1, 2]);
    await wal.close();
  });

  it("group-commits concurrent appends: every one durable, fewer fsyncs than appends", async () => {
    const dir = await tempDir();
    let wal = await openWal({ dir, partitions: 1 });
    const appends = Array.from({ length: 200 }, (_, i) => wal.writer.append(records(0, i, 1)));
    await Promise.all(appends);
    expect(wal.stats.appends).toBe(200);
    expect(wal.stats.syncs).toBeLessThan(200);
    expect(wal.stats.syncs).toBeGreaterThan(0);
    await wal.close();
    wal = await openWal({ dir, partitions: 1 });
    const read = await drain(wal);
    expect(read[0]!.map((r) => r.offset)).toEqual([...Array(200).keys()]);
    // Concurrent callers may be interleaved but each record appears once.
    expect(new Set(values(read[0]!)).size).toBe(200);
    await wal.close();
  });

  it("rolls segments, reads across them, and deletes only segments wholly below the commit", async () => {
    const dir = await tempDir();
    const frame = frameBytes(KEY.length, 100);
    // Room for 4 frames after the header.
    const segmentBytes = Math.max(1024, SEGMENT_HEADER_BYTES + 4 * frame);
    const perSegment = Math.floor((segmentBytes - SEGMENT_HEADER_BYTES) / frame);
    let wal = await openWal({ dir, partitions: 1, segmentBytes });
    for (let i = 0; i < 30; i++) await wal.writer.append(records(0, i, 1, 100));
    const segments = Math.ceil(30 / perSegment);
    expect(wal.segmentCount(0)).toBe(segments);
    expect((await segmentFiles(dir, 0)).length).toBe(segments);
    const read = await drain(wal);
    expect(read[0]!.map((r) => r.offset)).toEqual([...Array(30).keys()]);

    // Committing inside the second segment deletes only the first.
    await wal.consumer.commit(0, perSegment + 1);
    expect(wal.firstOffset(0)).toBe(perSegment);
    expect(await segmentFiles(dir, 0)).toHaveLength(segments - 1);
    // Committing everything keeps the active segment.
    await wal.consumer.commit(0, 30);
    expect(await segmentFiles(dir, 0)).toHaveLength(1);
    expect(wal.stats.segmentsDeleted).toBe(segments - 1);
    await wal.close();

    wal = await openWal({ dir, partitions: 1, segmentBytes });
    expect(wal.endOffset(0)).toBe(30);
    await wal.writer.append(records(0, 30, 2, 100));
    expect((await drain(wal))[0]!.map((r) => r.offset)).toEqual([30, 31]);
    await wal.close();
  });

  it("once all is committed, retires the active segment too: a caught-up log keeps a header", async () => {
    const dir = await tempDir();
    let wal = await openWal({ dir, partitions: 1, retireBytes: 1000 });
    const delivered: number[] = [];
    await wal.consumer.start((batch) => {
      for (const r of batch.records) delivered.push(r.offset);
      return Promise.resolve();
    });
    const waitDelivered = async (n: number): Promise<void> => {
      while (delivered.length < n) await new Promise((resolve) => setImmediate(resolve));
    };
    // 5 small records: under retireBytes, the active segment stays.
    await wal.writer.append(records(0, 0, 5, 100));
    await waitDelivered(5);
    await wal.consumer.commit(0, 5);
    expect(wal.stats.segmentsDeleted).toBe(0);
    // 20 more: past it, the commit of everything seals and deletes the segment.
    await wal.writer.append(records(0, 5, 20, 100));
    await waitDelivered(25);
    await wal.consumer.commit(0, 25);
    expect(wal.stats.segmentsDeleted).toBe(1);
    const files = await segmentFiles(dir, 0);
    expect(files).toHaveLength(1);
    expect((await stat(join(dir, "partition-0", files[0]!))).size).toBe(SEGMENT_HEADER_BYTES);
    // The consumer goes on into the new segment, at the same offsets.
    await wal.writer.append(records(0, 25, 3, 100));
    await waitDelivered(28);
    expect(delivered).toEqual([...Array(28).keys()]);
    await wal.consumer.stop();
    await wal.close();

    wal = await openWal({ dir, partitions: 1, retireBytes: 1000 });
    expect(wal.firstOffset(0)).toBe(25);
    expect(wal.endOffset(0)).toBe(28);
    expect((await drain(wal))[0]!.map((r) => r.offset)).toEqual([25, 26, 27]);
    await wal.close();
  });

  it("reads records larger than its read chunk", async () => {
    const dir = await tempDir();
    const wal = await openWal({ dir, partitions: 1, readChunkBytes: 256 });
    const big = records(0, 0, 3, 5000);
    await wal.writer.append([...big, ...records(0, 3, 10)]);
    const read = await drain(wal);
    expect(values(read[0]!)).toEqual(values([...big, ...records(0, 3, 10)]));
    await wal.close();
  });

  it("rejects bad records with typed errors before writing any", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 2, maxRecordBytes: 100 });
    const tooBig = { partition: 0, key: KEY, value: Buffer.alloc(93) };
    await expect(wal.writer.append([...records(0, 0, 1), tooBig])).rejects.toMatchObject({
      name: "QueueError",
      code: "record_too_large",
    });
    await expect(wal.writer.append([{ partition: 2, key: KEY, value: KEY }])).rejects.toMatchObject(
      {
        code: "invalid_partition",
      },
    );
    await expect(
      wal.writer.append([{ partition: 0.5, key: KEY, value: KEY }]),
    ).rejects.toBeInstanceOf(QueueError);
    expect(wal.endOffset(0)).toBe(0);
    await wal.writer.append([{ partition: 0, key: KEY, value: Buffer.alloc(92) }]);
    expect(wal.endOffset(0)).toBe(1);
    await wal.close();
    await expect(wal.writer.append(records(0, 0, 1))).rejects.toMatchObject({ code: "closed" });
  });

  it("rejects commits outside the log and going backwards", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 1 });
    await wal.writer.append(records(0, 0, 3));
    await expect(wal.consumer.commit(0, 4)).rejects.toMatchObject({ code: "invalid_offset" });
    await wal.consumer.commit(0, 2);
    await expect(wal.consumer.commit(0, 1)).rejects.toMatchObject({ code: "invalid_offset" });
    await expect(wal.consumer.commit(1, 0)).rejects.toMatchObject({ code: "invalid_partition" });
    await wal.close();
  });

  it("refuses a second open of the same directory and a different partition count", async () => {
    const dir = await tempDir();
    const wal = await openWal({ dir, partitions: 2 });
    await expect(openWal({ dir, partitions: 2 })).rejects.toMatchObject({ code: "locked" });
    await wal.close();
    await expect(openWal({ dir, partitions: 3 })).rejects.toMatchObject({
      code: "partitions_mismatch",
    });
    const again = await openWal({ dir, partitions: 2 });
    await again.close();
  });

  it.each([
    [{ partitions: 0 }],
    [{ partitions: 2, segmentBytes: 10 }],
    [{ partitions: 2, maxRecordBytes: 0 }],
    [{ partitions: 2, readChunkBytes: 1 }],
  ])("rejects invalid options %j", async (options) => {
    await expect(openWal({ dir: await tempDir(), ...options })).rejects.toMatchObject({
      code: "invalid_options",
    });
  });

  it("redelivers a batch whose handler failed, and reports the failure", async () => {
    const errors: unknown[] = [];
    const wal = await openWal({
      dir: await tempDir(),
      partitions: 1,
      retryBackoffMs: 1,
      onError: (error) => errors.push(error),
    });
    await wal.writer.append(records(0, 0, 2));
    const deliveries: number[][] = [];
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    await wal.consumer.start((batch) => {
      deliveries.push(batch.records.map((r) => r.offset));
      if (deliveries.length === 1) return Promise.reject(new Error("flush failed"));
      done();
      return Promise.resolve();
    });
    await finished;
    await wal.close();
    expect(deliveries).toEqual([
      [0, 1],
      [0, 1],
    ]);
    expect(errors).toHaveLength(1);
  });

  it("calls assigned on start and revoked on stop", async () => {
    const wal = await openWal({ dir: await tempDir(), partitions: 2 });
    const calls: string[] = [];
    await wal.consumer.start(() => Promise.resolve(), {
      assigned: (p) => {
        calls.push(`assigned ${p.join(",")}`);
        return Promise.resolve();
      },
      revoked: (p) => {
        calls.push(`revoked ${p.join(",")}`);
        return Promise.resolve();
      },
    });
    await wal.consumer.stop();
    expect(calls).toEqual(["assigned 0,1", "revoked 0,1"]);
    await wal.close();
  });
});

describe("write-ahead log recovery", () => {
  /** Writes `count` records to partition 0 and returns the segment path and tail frame start. */
  async function logWith(dir: string, count: number): Promise<{ path: string; tailStart: number }> {
    const wal = await openWal({ dir, partitions: 1 });
    for (let i = 0; i < count; i++) await wal.writer.append(records(0, i, 1, 20 + i));
    await wal.close();
    const [name] = await segmentFiles(dir, 0);
    const path = join(dir, "partition-0", name!);
    const size = (await stat(path)).size;
    return { path, tailStart: size - frameBytes(KEY.length, 20 + count - 1) };
  }

  async function expectIntact(dir: string, count: number): Promise<void> {
    const wal = await openWal({ dir, partitions: 1 });
    expect(wal.endOffset(0)).toBe(count);
    const read = await drain(wal);
    expect(values(read[0]!)).toEqual(
      Array.from({ length: count }, (_, i) => valueOf(0, i, 20 + i).toString()),
    );
    // The log continues right after what survived.
    await wal.writer.append(records(0, count, 1, 20 + count));
    expect(wal.endOffset(0)).toBe(count + 1);
    await wal.close();
  }

  it("cuts a tail record torn at any byte, losing nothing before it", async () => {
    const dir = await tempDir();
    const { path, tailStart } = await logWith(dir, 5);
    const size = (await stat(path)).size;
    for (let cut = size - 1; cut >= tailStart; cut--) {
      await truncate(path, cut);
      await expectIntact(dir, 4);
      // expectIntact appended record 4 again (same bytes); cut again from a full tail.
      expect((await stat(path)).size).toBe(size);
    }
  });

  it("cuts a tail record with any single damaged byte, losing nothing before it", async () => {
    const dir = await tempDir();
    const { path, tailStart } = await logWith(dir, 5);
    const size = (await stat(path)).size;
    for (let at = tailStart; at < size; at++) {
      for (const flip of [0x01, 0xff]) {
        const fh = await openFile(path, "r+");
        const byte = Buffer.alloc(1);
        await fh.read(byte, 0, 1, at);
        byte[0]! ^= flip;
        await fh.write(byte, 0, 1, at);
        await fh.close();
        await expectIntact(dir, 4);
      }
    }
  });

  it("cuts garbage appended after the last record (a torn multi-record write)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }), async (garbage) => {
        const dir = await tempDir();
        const { path } = await logWith(dir, 3);
        const fh = await openFile(path, "a");
        await fh.write(garbage);
        await fh.close();
        await expectIntact(dir, 3);
      }),
      { numRuns: 30 },
    );
  });

  it("reports a damaged sealed segment header as corrupt instead of cutting it", async () => {
    const dir = await tempDir();
    const wal = await openWal({ dir, partitions: 1, segmentBytes: 1024 });
    for (let i = 0; i < 40; i++) await wal.writer.append(records(0, i, 1, 100));
    await wal.close();
    const [first] = await segmentFiles(dir, 0);
    const fh = await openFile(join(dir, "partition-0", first!), "r+");
    await fh.write(Buffer.from([0x42]), 0, 1, 9);
    await fh.close();
    await expect(openWal({ dir, partitions: 1, segmentBytes: 1024 })).rejects.toMatchObject({
      code: "corrupt",
    });
  });
});

describe("write-ahead log against a model", () => {
  it("returns what was appended, from the commit, across rolls, deletions and reopens", async () => {
    const step = fc.oneof(
      fc.record({
        kind: fc.constant("append" as const),
        sizes: fc.array(fc.record({ partition: fc.nat({ max: 1 }), size: fc.nat({ max: 700 }) }), {
          minLength: 1,
          maxLength: 12,
        }),
      }),
      fc.record({
        kind: fc.constant("commit" as const),
        partition: fc.nat({ max: 1 }),
        fraction: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      fc.constant({ kind: "reopen" as const }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 1024, max: 4096 }),
        fc.constantFrom(0, 600, 1 << 20),
        async (steps, segmentBytes, retireBytes) => {
          const dir = await tempDir();
          const open = () =>
            openWal({ dir, partitions: 2, segmentBytes, retireBytes, readChunkBytes: 512 });
          let wal = await open();
          const model: string[][] = [[], []];
          const committed = [0, 0];
          let n = 0;
          for (const s of steps) {
            if (s.kind === "append") {
              const batch = s.sizes.map(({ partition, size }) => ({
                partition,
                key: KEY,
                value: valueOf(partition, n++, size),
              }));
              await wal.writer.append(batch);
              for (const r of batch) model[r.partition]!.push(r.value.toString());
            } else if (s.kind === "commit") {
              const p = s.partition;
              const to =
                committed[p]! + Math.floor(s.fraction * (model[p]!.length - committed[p]!));
              await wal.consumer.commit(p, to);
              committed[p] = to;
              // Whatever was deleted lay wholly below the commit.
              expect(wal.firstOffset(p)).toBeLessThanOrEqual(to);
            } else {
              await wal.close();
              wal = await open();
            }
          }
          const read = await drain(wal);
          for (const p of [0, 1]) {
            expect(read[p]!.map((r) => r.offset)).toEqual(
              model[p]!.map((_, i) => i).slice(committed[p]),
            );
            expect(values(read[p]!)).toEqual(model[p]!.slice(committed[p]));
          }
          await wal.close();
        },
      ),
      { numRuns: 25 },
    );
  });
});
