// Pushes through the distributor into a real Kafka broker (scripts/kafka.sh; KAFKA_BROKERS),
// from the real clients, and reads every line back with the Kafka consumer.
import { logLevel } from "kafkajs";
import winston from "winston";
import LokiTransport from "winston-loki";
import { afterEach, describe, expect, it } from "vitest";
import { fingerprintKey, partitionOf } from "@sieve/labels";
import { KafkaQueueConsumer, KafkaQueueWriter } from "@sieve/queue";
import { kafkaBrokers, uniqueName } from "@sieve/queue/testing";
import { readUntil, startDistributor } from "./harness.test-helper.js";
import type { Harness, ReadRecord } from "./harness.test-helper.js";

const PARTITIONS = 4;
// kafkajs logs retriable broker responses (rebalances) at ERROR.
const QUIET = logLevel.NOTHING;
const closers: (() => Promise<void>)[] = [];
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const close of closers.splice(0).reverse()) await close();
});

const count = (records: readonly ReadRecord[]) => records.reduce((n, r) => n + r.entries.length, 0);

async function kafka(): Promise<{ writer: KafkaQueueWriter; consumer: KafkaQueueConsumer }> {
  const topic = uniqueName("sieve-distributor");
  const writer = await KafkaQueueWriter.connect({
    brokers: kafkaBrokers(),
    topic,
    partitions: PARTITIONS,
    logLevel: QUIET,
  });
  closers.push(() => writer.close());
  const consumer = new KafkaQueueConsumer({
    brokers: kafkaBrokers(),
    topic,
    partitions: PARTITIONS,
    groupId: uniqueName("sieve-distributor-group"),
    maxWaitTimeMs: 200,
    heartbeatIntervalMs: 300,
    logLevel: QUIET,
  });
  return { writer, consumer };
}

describe("push into Kafka", () => {
  it("winston-loki (protobuf + snappy) and JSON lines all arrive, keyed and partitioned by fingerprint", async () => {
    const { writer, consumer } = await kafka();
    h = await startDistributor({ queue: writer });
    const transport = new LokiTransport({
      host: h.url,
      labels: { app: "kafka-test" },
      json: false,
      interval: 0.05,
      format: winston.format.printf((info) => String(info.message)),
    });
    const logger = winston.createLogger({
      // winston-loki extends its own copy of winston-transport: the same class, another copy.
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
      transports: [transport],
    });
    const sent: string[] = [];
    for (let i = 0; i < 100; i++) {
      sent.push(`winston ${i} ✓`);
      logger.info(`winston ${i} ✓`);
    }
    const ns = BigInt(Date.now()) * 1_000_000n;
    for (let s = 0; s < 8; s++) {
      const values = [0, 1, 2].map((i) => [
        String(ns + BigInt(i)),
        `json ${s}.${i}`,
        { trace_id: `t${s}` },
      ]);
      sent.push(...values.map((v) => v[1] as string));
      const res = await fetch(`${h.url}/loki/api/v1/push`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ streams: [{ stream: { app: "json", shard: String(s) }, values }] }),
      });
      expect(res.status).toBe(204);
    }
    await transport.flush();
    const records = await readUntil(consumer, (r) => count(r) >= sent.length, 60_000);
    expect(records.flatMap((r) => r.entries.map((e) => e.line)).sort()).toEqual(sent.sort());
    for (const r of records) {
      expect([...r.key]).toEqual([...fingerprintKey(r.fingerprint)]);
      expect(r.partition).toBe(partitionOf(r.fingerprint, PARTITIONS));
    }
    const jsonRecords = records.filter((r) => r.labels.startsWith('{app="json"'));
    expect(new Set(jsonRecords.map((r) => r.labels)).size).toBe(8);
    for (const r of jsonRecords) {
      expect(r.entries.map((e) => e.structuredMetadata[0]?.name)).toEqual([
        "trace_id",
        "trace_id",
        "trace_id",
      ]);
    }
    await transport.close();
    logger.close();
  });
});
