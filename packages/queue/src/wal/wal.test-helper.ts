import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import type { ConsumedRecord } from "../queue.js";
import type { LocalWal } from "./wal.js";

const dirs: string[] = [];

/** A fresh temporary directory, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-wal-"));
  dirs.push(dir);
  return dir;
}

afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A record value that says where it belongs, so a misplaced record is caught. */
export function valueOf(partition: number, n: number, size = 32): Buffer {
  const text = `p${partition}-n${n}-`;
  return Buffer.from(text.padEnd(size, "x"));
}

/**
 * Consumes every partition of `wal` up to its current end, from the committed offsets,
 * and returns the records by partition. Waits on the consumer's deliveries, no sleeps.
 */
export async function drain(wal: LocalWal): Promise<ConsumedRecord[][]> {
  const byPartition: ConsumedRecord[][] = Array.from({ length: wal.partitions }, () => []);
  const ends = byPartition.map((_, p) => wal.endOffset(p));
  const starts = byPartition.map((_, p) => wal.consumer.committed(p));
  let remaining = ends.reduce((sum, end, p) => sum + end - starts[p]!, 0);
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  if (remaining === 0) done();
  await wal.consumer.start((batch) => {
    byPartition[batch.partition]!.push(...batch.records);
    remaining -= batch.records.length;
    if (remaining <= 0) done();
    return Promise.resolve();
  });
  await finished;
  await wal.consumer.stop();
  return byPartition;
}
