/**
 * Two ingesters in one Kafka consumer group (the real broker, KAFKA_BROKERS): when the second
 * joins, the first's partitions are revoked, flushed (reason `revoked`) and committed, and
 * the second takes over from there; every line ends up stored exactly once.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaQueueConsumer, KafkaQueueWriter } from "@sieve/queue";
import { kafkaBrokers, uniqueName, waitFor } from "@sieve/queue/testing";
import { FsObjectStore } from "@sieve/storage";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { lineCounts, readStore, record, testConfig, testLogger } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";
import { createIngester } from "./http.js";
import type { IngesterService } from "./http.js";

const PARTITIONS = 4;
const T0 = BigInt(Date.now()) * 1_000_000n;

async function metric(registry: Registry, name: string, reason?: string): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) => reason === undefined || v.labels.reason === reason)
    .reduce((sum, v) => sum + v.value, 0);
}

describe("ingesters in a Kafka consumer group", () => {
  it("hand partitions over on rebalance: revoked heads are flushed, every line stored once", async () => {
    const brokers = kafkaBrokers();
    const topic = uniqueName("sieve-ingester");
    const groupId = uniqueName("sieve-ingester-group");
    const dir = await mkdtemp(join(tmpdir(), "sieve-ingester-kafka-"));
    const store = new FsObjectStore(dir);
    const writer = await KafkaQueueWriter.connect({ brokers, topic, partitions: PARTITIONS });
    const services: { svc: IngesterService; registry: Registry }[] = [];
    const startOne = async (
      name: string,
    ): Promise<{ svc: IngesterService; registry: Registry }> => {
      const registry = new Registry();
      const svc = createIngester({
        config: testConfig({ instanceId: name, flushCheckIntervalMs: 3_600_000 }),
        consumer: new KafkaQueueConsumer({
          brokers,
          topic,
          groupId,
          partitions: PARTITIONS,
          sessionTimeoutMs: 10_000,
          heartbeatIntervalMs: 500,
        }),
        store,
        logger: testLogger,
        registry,
      });
      await svc.ingester.start();
      const one = { svc, registry };
      services.push(one);
      return one;
    };
    let seq = 0;
    const push = async (n: number): Promise<void> => {
      const recs = [];
      for (let i = 0; i < n; i++, seq++) {
        const e: TestEntry = {
          ts: T0 + BigInt(seq),
          line: `kafka line ${seq}`,
          md: { trace_id: `t${seq % 7}` },
        };
        recs.push(record("k", `{app="a${seq % 8}"}`, [e], PARTITIONS));
      }
      await writer.append(recs);
    };
    try {
      const a = await startOne("ingester-a");
      await push(200);
      await waitFor(
        async () => (await metric(a.registry, "sieve_ingester_records_consumed_total")) >= 200,
        {
          what: "ingester-a consumed 200 records",
        },
      );
      const b = await startOne("ingester-b");
      // Settled: each owns some, together all, none twice (a revoked partition leaves the
      // old owner only once it is flushed and committed).
      await waitFor(
        () => {
          const mine = a.svc.ingester.ownedPartitions;
          const theirs = b.svc.ingester.ownedPartitions;
          const all = [...mine, ...theirs].sort().join();
          return mine.length > 0 && theirs.length > 0 && all === "0,1,2,3";
        },
        { what: "both ingesters own partitions" },
      );
      expect(
        await metric(a.registry, "sieve_ingester_chunks_flushed_total", "revoked"),
      ).toBeGreaterThan(0);
      await push(200);
      // Everything consumed and flushed: both flush until the store holds the 400 lines.
      await waitFor(
        async () => {
          for (const { svc } of services) await svc.ingester.flushAll();
          return lineCounts(await readStore(store, "k", T0 - 1n)).size === 400;
        },
        { what: "400 lines in the store", intervalMs: 200 },
      );
      for (const { svc } of services.splice(0)) await svc.ingester.stop();
      const counts = lineCounts(await readStore(store, "k", T0 - 1n));
      expect(counts.size).toBe(400);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
    } finally {
      for (const { svc } of services) await svc.ingester.stop();
      await writer.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
