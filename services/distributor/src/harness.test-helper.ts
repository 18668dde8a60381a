// Shared by the distributor's tests: a real distributor over loopback writing into a real
// write-ahead log in a temporary directory, and a reader that waits for records to arrive.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { decodeQueueRecord } from "@sieve/proto";
import type { QueueRecord } from "@sieve/proto";
import { openWal } from "@sieve/queue";
import type { ConsumedRecord, LocalWal, QueueConsumer, QueueWriter } from "@sieve/queue";
import { DEFAULT_CONFIG } from "./config.js";
import type { DistributorConfig } from "./config.js";
import { createDistributorServer } from "./http.js";
import type { TenantLimits } from "./limits.js";

/** A running distributor and the WAL behind it. */
export interface Harness {
  readonly url: string;
  readonly app: FastifyInstance;
  readonly wal: LocalWal;
  readonly registry: Registry;
  readonly dir: string;
  close(): Promise<void>;
}

/**
 * Config with limits changed, for tests. Service name and level discovery are off unless
 * `limits` turns them on: the streams of these tests keep the labels and metadata they
 * were pushed with.
 */
export function testConfig(
  config: Partial<Omit<DistributorConfig, "limits">> = {},
  limits: Partial<TenantLimits> = {},
): DistributorConfig {
  return {
    ...DEFAULT_CONFIG,
    ...config,
    limits: {
      ...DEFAULT_CONFIG.limits,
      discoverServiceName: [],
      discoverLogLevels: false,
      ...limits,
    },
  };
}

/** Opens a WAL in a fresh temporary directory. */
export async function tempWal(partitions = 4): Promise<{ wal: LocalWal; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-distributor-"));
  return { wal: await openWal({ dir, partitions }), dir };
}

/** Starts a distributor on 127.0.0.1 (random port) writing to `queue` (a fresh WAL by default). */
export async function startDistributor(
  options: {
    config?: DistributorConfig;
    now?: () => number;
    queue?: QueueWriter;
  } = {},
): Promise<Harness> {
  const { wal, dir } = await tempWal();
  const registry = new Registry();
  const app = await createDistributorServer({
    config: options.config ?? testConfig(),
    queue: options.queue ?? wal.writer,
    logger: pino({ level: "silent" }),
    registry,
    ...(options.now !== undefined && { now: options.now }),
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    app,
    wal,
    registry,
    dir,
    async close() {
      await app.close();
      await wal.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A record read back from the queue, decoded, with where it was. */
export interface ReadRecord extends QueueRecord {
  readonly partition: number;
  readonly key: Uint8Array;
}

/**
 * Reads records from `consumer` until `done(records)` holds, or fails after `timeoutMs`.
 * Waits on deliveries, never on a timer (the timer only bounds a failing test).
 */
export async function readUntil(
  consumer: QueueConsumer,
  done: (records: readonly ReadRecord[]) => boolean,
  timeoutMs = 20_000,
): Promise<ReadRecord[]> {
  const records: ReadRecord[] = [];
  let resolve!: () => void;
  const reached = new Promise<void>((r) => (resolve = r));
  const take = (r: ConsumedRecord) => {
    records.push({ ...decodeQueueRecord(r.value), partition: r.partition, key: r.key });
  };
  await consumer.start(async (batch) => {
    batch.records.forEach(take);
    if (done(records)) resolve();
    await Promise.resolve();
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`timed out with ${records.length} records`));
    }, timeoutMs);
  });
  try {
    if (!done(records)) await Promise.race([reached, timeout]);
  } finally {
    clearTimeout(timer);
    await consumer.stop();
  }
  return records;
}

/** Lines of all records, in queue order per partition. */
export function linesOf(records: readonly ReadRecord[]): string[] {
  return records.flatMap((r) => r.entries.map((e) => e.line));
}
