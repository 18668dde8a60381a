/**
 * Crash safety: an ingester process (crash.test-child.ts) is SIGKILLed at random points
 * while it consumes and flushes with tiny thresholds, then restarted. After every kill the
 * store must be consistent (every chunk the index shows exists, decodes, passes its bloom,
 * and no line is stored twice); at the end every acknowledged line is stored exactly once.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { KafkaQueueWriter } from "@sieve/queue";
import { kafkaBrokers, uniqueName, waitFor } from "@sieve/queue/testing";
import { FsObjectStore, S3ObjectStore } from "@sieve/storage";
import type { ObjectStore } from "@sieve/storage";
import { describe, expect, it } from "vitest";
import { spawnChild } from "./child.test-helper.js";
import type { Child } from "./child.test-helper.js";
import { lineCounts, readStore, record } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";

const PARTITIONS = 3;
const TENANTS = ["crash-a", "crash-b"];
const STREAMS = [`{app="api"}`, `{app="web", env="prod"}`, `{app="db"}`];
const T0 = BigInt(Date.now()) * 1_000_000n;

async function kill(child: Child): Promise<void> {
  child.process.kill("SIGKILL");
  await child.exited;
}

async function stopGracefully(child: Child): Promise<void> {
  child.process.kill("SIGTERM");
  expect(await child.exited).toBe(0);
}

/** Unique lines for one push: 1–3 streams, 3–8 entries each. */
class Lines {
  private seq = 0;
  batch(): { tenant: string; labels: string; entries: TestEntry[] }[] {
    const out = [];
    const streams = 1 + Math.floor(Math.random() * 3);
    for (let s = 0; s < streams; s++) {
      const entries: TestEntry[] = [];
      const n = 3 + Math.floor(Math.random() * 6);
      for (let i = 0; i < n; i++) {
        const seq = this.seq++;
        // Some out of order: up to 50 steps back.
        const ts = T0 + BigInt(Math.max(0, seq - Math.floor(Math.random() * 50))) * 1000n;
        entries.push({
          ts,
          line: `line-${seq} ${randomBytes(24).toString("hex")}`,
          md: { trace_id: `trace-${Math.floor(seq / 10)}` },
        });
      }
      out.push({
        tenant: TENANTS[Math.floor(Math.random() * TENANTS.length)]!,
        labels: STREAMS[Math.floor(Math.random() * STREAMS.length)]!,
        entries,
      });
    }
    return out;
  }
}

/** Reads both tenants; throws if a visible chunk lacks its object; checks blooms and at-most-once. */
async function checkStore(store: ObjectStore): Promise<Map<string, number>> {
  const all = new Map<string, number>();
  for (const tenant of TENANTS) {
    const contents = await readStore(store, tenant, T0 - 1n);
    expect(contents.falseNegatives).toEqual([]);
    for (const [line, n] of lineCounts(contents)) all.set(line, (all.get(line) ?? 0) + n);
  }
  const twice = [...all].filter(([, n]) => n > 1);
  expect(twice).toEqual([]);
  return all;
}

async function waitAllStored(
  child: Child,
  store: ObjectStore,
  acked: Set<string>,
  timeoutMs: number,
): Promise<void> {
  await waitFor(
    async () => {
      await fetch(`${child.url}/flush`, { method: "POST" });
      const stored = await checkStore(store);
      return [...acked].every((line) => stored.has(line));
    },
    { timeoutMs, intervalMs: 200, what: "every acknowledged line in the store" },
  );
}

describe("crash safety", () => {
  it.each([
    ["on the main thread", 0],
    ["on two worker threads", 2],
  ])(
    "write-ahead log + file system, ingester %s: SIGKILL at random points, every acknowledged line stored exactly once",
    async (_where, workers) => {
      const dir = await mkdtemp(join(tmpdir(), "sieve-crash-"));
      const env = {
        CRASH_WORKERS: String(workers),
        CRASH_QUEUE: "wal",
        CRASH_WAL_DIR: join(dir, "wal"),
        CRASH_STORE: "fs",
        CRASH_STORE_DIR: join(dir, "objects"),
        CRASH_PARTITIONS: String(PARTITIONS),
      };
      const store = new FsObjectStore(join(dir, "objects"));
      const lines = new Lines();
      const acked = new Set<string>();
      const attempted = new Set<string>();
      try {
        for (let round = 0; round < 8; round++) {
          const child = await spawnChild(env);
          const killAt = Date.now() + 100 + Math.random() * 700;
          const pusher = async (): Promise<void> => {
            while (Date.now() < killAt) {
              const batch = lines.batch();
              const batchLines = batch.flatMap((s) => s.entries.map((e) => e.line));
              for (const l of batchLines) attempted.add(l);
              try {
                const response = await fetch(`${child.url}/append`, {
                  method: "POST",
                  headers: { "content-type": "application/json" },
                  body: JSON.stringify(
                    batch.map((s) => ({
                      ...s,
                      entries: s.entries.map((e) => ({ ts: String(e.ts), line: e.line, md: e.md })),
                    })),
                  ),
                });
                if (response.status === 204) for (const l of batchLines) acked.add(l);
              } catch {
                return; // killed mid-request: not acknowledged
              }
            }
          };
          const killer = new Promise<void>((resolve) =>
            setTimeout(() => void kill(child).then(resolve), killAt - Date.now()),
          );
          await Promise.all([pusher(), pusher(), killer]);
          // After any kill: the index shows only complete chunks, nothing twice.
          await checkStore(store);
        }
        expect(acked.size).toBeGreaterThan(200);
        const child = await spawnChild(env);
        await waitAllStored(child, store, acked, 30_000);
        await stopGracefully(child);
        const stored = await checkStore(store);
        for (const line of acked) expect(stored.get(line)).toBe(1);
        for (const line of stored.keys()) expect(attempted.has(line)).toBe(true);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    180_000,
  );

  it("Kafka + S3 (MinIO): SIGKILL at random points, every acknowledged line stored exactly once", async () => {
    const brokers = kafkaBrokers(); // throws with instructions when KAFKA_BROKERS is unset
    const endpoint = process.env.S3_ENDPOINT;
    if (endpoint === undefined || endpoint === "") {
      throw new Error("S3_ENDPOINT is not set: run via `sh scripts/test.sh` (starts MinIO)");
    }
    const bucket = uniqueName("sieve-crash");
    const store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
    await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
    const topic = uniqueName("sieve-crash");
    const writer = await KafkaQueueWriter.connect({ brokers, topic, partitions: PARTITIONS });
    const env = {
      CRASH_QUEUE: "kafka",
      KAFKA_BROKERS: brokers.join(","),
      CRASH_TOPIC: topic,
      CRASH_GROUP: uniqueName("sieve-crash-group"),
      CRASH_STORE: "s3",
      CRASH_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      CRASH_PARTITIONS: String(PARTITIONS),
    };
    const lines = new Lines();
    const acked = new Set<string>();
    const push = async (): Promise<void> => {
      const batch = lines.batch();
      await writer.append(batch.map((s) => record(s.tenant, s.labels, s.entries, PARTITIONS)));
      for (const s of batch) for (const e of s.entries) acked.add(e.line);
    };
    try {
      for (let round = 0; round < 3; round++) {
        const child = await spawnChild(env);
        // Push until the child has flushed something of this round, then a little more.
        const before = acked.size;
        while (acked.size < before + 150) await push();
        await waitFor(async () => (await checkStore(store)).size > 0, { timeoutMs: 60_000 });
        const killAt = Date.now() + 200 + Math.random() * 1500;
        while (Date.now() < killAt) await push();
        await kill(child);
        await checkStore(store);
      }
      const child = await spawnChild(env);
      await waitAllStored(child, store, acked, 90_000);
      await stopGracefully(child);
      const stored = await checkStore(store);
      for (const line of acked) expect(stored.get(line)).toBe(1);
      expect(stored.size).toBe(acked.size);
    } finally {
      await writer.close();
      store.close();
    }
  }, 240_000);
});
