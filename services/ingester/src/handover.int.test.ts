/**
 * The fenced handover (ownership.ts): two ingesters in one Kafka consumer group (the real
 * broker, KAFKA_BROKERS) over S3 (MinIO, S3_ENDPOINT). Ingester A, a child process, holds
 * consumed lines in its heads when it is frozen (SIGSTOP) past its session timeout; the
 * group gives its partitions to ingester B, which claims them, replays the uncommitted
 * records and flushes them. A is then resumed (SIGCONT): it learns it lost the partitions
 * and flushes what it held, and that flush must be refused. Every acknowledged line must
 * then be in the store's chunks exactly once.
 */
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { KafkaQueueConsumer, KafkaQueueWriter } from "@sieve/queue";
import { kafkaBrokers, uniqueName, waitFor } from "@sieve/queue/testing";
import { S3ObjectStore } from "@sieve/storage";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { childMetric, spawnChild } from "./child.test-helper.js";
import type { Child } from "./child.test-helper.js";
import { lineCounts, readStore, record, testConfig, testLogger } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";
import { createIngester } from "./http.js";
import type { IngesterService } from "./http.js";

const PARTITIONS = 2;
const TENANT = "handover";
const T0 = BigInt(Date.now()) * 1_000_000n;
/** A's session timeout (crash.test-child.ts): frozen longer than this, it leaves the group. */
const SESSION_TIMEOUT_MS = 6000;

describe("fenced handover", () => {
  it("an ingester frozen past its revocation cannot store its lines a second time", async () => {
    const brokers = kafkaBrokers(); // throws with instructions when KAFKA_BROKERS is unset
    const endpoint = process.env.S3_ENDPOINT;
    if (endpoint === undefined || endpoint === "") {
      throw new Error("S3_ENDPOINT is not set: run via `sh scripts/test.sh` (starts MinIO)");
    }
    const bucket = uniqueName("sieve-handover");
    const store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
    await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
    const topic = uniqueName("sieve-handover");
    const groupId = uniqueName("sieve-handover-group");
    const writer = await KafkaQueueWriter.connect({ brokers, topic, partitions: PARTITIONS });
    let seq = 0;
    const acked: string[] = [];
    /** `n` records of 5 lines each over 6 streams: few lines a stream, so heads stay open. */
    const push = async (n: number): Promise<void> => {
      const recs = [];
      const lines: string[] = [];
      for (let r = 0; r < n; r++) {
        const entries: TestEntry[] = [];
        for (let i = 0; i < 5; i++, seq++) {
          entries.push({ ts: T0 + BigInt(seq), line: `handover line ${seq}`, md: { n: `${seq}` } });
          lines.push(`handover line ${seq}`);
        }
        recs.push(record(TENANT, `{app="a${r % 6}"}`, entries, PARTITIONS));
      }
      await writer.append(recs);
      acked.push(...lines);
    };
    let a: Child | undefined;
    let b: IngesterService | undefined;
    try {
      a = await spawnChild({
        CRASH_QUEUE: "kafka",
        KAFKA_BROKERS: brokers.join(","),
        CRASH_TOPIC: topic,
        CRASH_GROUP: groupId,
        CRASH_STORE: "s3",
        CRASH_BUCKET: bucket,
        S3_ENDPOINT: endpoint,
        CRASH_PARTITIONS: String(PARTITIONS),
        CRASH_INSTANCE_ID: "ingester-a",
        CRASH_CHUNK_IDLE_MS: "600000",
        CRASH_CHUNK_MAX_AGE_MS: "600000",
        CRASH_CHUNK_TARGET_BYTES: String(1024 * 1024),
      });
      const child = a;
      const consumedByA = (n: number) => async () =>
        (await childMetric(child, "sieve_ingester_records_consumed_total")) >= n;
      // Some lines flushed, decided and committed by A; then more that stay in its heads.
      await push(40);
      await waitFor(consumedByA(40), { timeoutMs: 60_000, what: "A consumed 40 records" });
      expect((await fetch(`${child.url}/flush`, { method: "POST" })).status).toBe(204);
      await push(60);
      await waitFor(consumedByA(100), { timeoutMs: 30_000, what: "A consumed 100 records" });
      const storedByA = lineCounts(await readStore(store, TENANT, T0 - 1n));
      expect(storedByA.size).toBe(200);

      // Frozen: A misses its heartbeats; B joins, and once A's session ends, owns everything.
      child.process.kill("SIGSTOP");
      const registry = new Registry();
      b = createIngester({
        config: testConfig({ instanceId: "ingester-b", flushCheckIntervalMs: 3_600_000 }),
        consumer: new KafkaQueueConsumer({
          brokers,
          topic,
          groupId,
          partitions: PARTITIONS,
          sessionTimeoutMs: SESSION_TIMEOUT_MS,
          heartbeatIntervalMs: 500,
        }),
        store,
        logger: testLogger,
        registry,
      });
      await b.ingester.start();
      const ingesterB = b.ingester;
      await waitFor(() => ingesterB.ownedPartitions.length === 2, {
        timeoutMs: 60_000,
        what: "B owns both partitions",
      });
      // B replays what A never committed and stores it: every line once so far.
      await ingesterB.flushAll();
      const afterB = lineCounts(await readStore(store, TENANT, T0 - 1n));
      expect(afterB.size).toBe(500);
      expect([...afterB.values()].every((n) => n === 1)).toBe(true);

      // Resumed: A flushes the 300 lines it still holds, and is refused.
      child.process.kill("SIGCONT");
      await waitFor(
        async () => (await childMetric(child, "sieve_ingester_flushes_fenced_total")) >= 1,
        { timeoutMs: 60_000, what: "A's flush fenced" },
      );
      expect(
        await childMetric(child, "sieve_ingester_flushes_fenced_total", { at: "decide" }),
      ).toBeGreaterThanOrEqual(1);

      // The group settles between A and B; more lines, then everything flushed by both.
      await push(20);
      await waitFor(
        async () => {
          await ingesterB.flushAll().catch(() => undefined);
          await fetch(`${child.url}/flush`, { method: "POST" });
          return lineCounts(await readStore(store, TENANT, T0 - 1n)).size === acked.length;
        },
        { timeoutMs: 90_000, intervalMs: 500, what: "every acknowledged line stored" },
      );
      const counts = lineCounts(await readStore(store, TENANT, T0 - 1n));
      expect(counts.size).toBe(600);
      const twice = [...counts].filter(([, n]) => n !== 1);
      expect(twice).toEqual([]);
      for (const line of acked) expect(counts.get(line)).toBe(1);
    } finally {
      if (a !== undefined) {
        a.process.kill("SIGCONT");
        a.process.kill("SIGKILL");
        await a.exited;
      }
      await b?.ingester.stop();
      await writer.close();
      store.close();
    }
  }, 240_000);
});
