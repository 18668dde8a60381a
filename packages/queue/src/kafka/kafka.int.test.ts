import { logLevel } from "kafkajs";
import { afterEach, describe, expect, it } from "vitest";
import type { ConsumedRecord, DeliveryFailure, OutgoingRecord } from "../queue.js";
import { kafkaBrokers, uniqueName, waitFor } from "../testing.js";
import { KafkaQueueConsumer } from "./consumer.js";
import { KafkaQueueWriter } from "./writer.js";

const PARTITIONS = 4;
// kafkajs logs every retriable error response (coordinator loading, rebalancing) at ERROR.
const QUIET = logLevel.NOTHING;
const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function writer(topic: string, partitions = PARTITIONS): Promise<KafkaQueueWriter> {
  const w = await KafkaQueueWriter.connect({
    brokers: kafkaBrokers(),
    topic,
    partitions,
    logLevel: QUIET,
  });
  closers.push(() => w.close());
  return w;
}

interface Member {
  readonly consumer: KafkaQueueConsumer;
  readonly records: ConsumedRecord[];
  readonly calls: string[];
}

async function member(topic: string, groupId: string): Promise<Member> {
  const consumer = new KafkaQueueConsumer({
    brokers: kafkaBrokers(),
    topic,
    partitions: PARTITIONS,
    groupId,
    heartbeatIntervalMs: 300,
    maxWaitTimeMs: 200,
    logLevel: QUIET,
  });
  closers.push(() => consumer.stop());
  const records: ConsumedRecord[] = [];
  const calls: string[] = [];
  await consumer.start(
    (batch) => {
      for (const r of batch.records) expect(r.partition).toBe(batch.partition);
      records.push(...batch.records);
      return Promise.resolve();
    },
    {
      assigned: (p) => {
        calls.push(`assigned ${p.join(",")}`);
        return Promise.resolve();
      },
      revoked: (p) => {
        calls.push(`revoked ${p.join(",")}`);
        return Promise.resolve();
      },
    },
  );
  return { consumer, records, calls };
}

/** Record n of a test: key = 8-byte fingerprint, partition from it as the distributor does. */
function record(n: number): OutgoingRecord {
  const key = Buffer.alloc(8);
  key.writeBigUInt64BE((BigInt(n) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn);
  return {
    partition: Number(key.readBigUInt64BE() % BigInt(PARTITIONS)),
    key,
    value: Buffer.from(`line ${n}`),
  };
}

function text(r: { value: Uint8Array }): string {
  return Buffer.from(r.value).toString();
}

describe("Kafka queue (real broker)", () => {
  it("round-trips records to the partition chosen by key, in order, with dense offsets", async () => {
    const topic = uniqueName();
    const w = await writer(topic);
    const sent = Array.from({ length: 200 }, (_, n) => record(n));
    // Concurrent appends, each durable on its own.
    await Promise.all([0, 50, 100, 150].map((from) => w.append(sent.slice(from, from + 50))));
    const m = await member(topic, uniqueName("group"));
    await waitFor(() => m.records.length >= 200, { what: "200 records" });
    expect(m.records).toHaveLength(200);
    for (let p = 0; p < PARTITIONS; p++) {
      const got = m.records.filter((r) => r.partition === p);
      expect(got.map((r) => r.offset)).toEqual([...Array(got.length).keys()]);
      for (const r of got) {
        const n = Number(text(r).slice(5));
        expect(Buffer.from(r.key).equals(Buffer.from(sent[n]!.key))).toBe(true);
        expect(sent[n]!.partition).toBe(p);
      }
    }
    expect(new Set(m.records.map(text)).size).toBe(200);
    // Within a partition, one append's records keep their order.
    const first = m.records
      .filter((r) => r.partition === 0 && Number(text(r).slice(5)) < 50)
      .map(text);
    expect(first).toEqual(
      sent
        .slice(0, 50)
        .filter((r) => r.partition === 0)
        .map(text),
    );
  });

  it("resumes a group from committed offsets, and from the earliest record where none", async () => {
    const topic = uniqueName();
    const groupId = uniqueName("group");
    const w = await writer(topic);
    await w.append(Array.from({ length: 40 }, (_, n) => record(n)));
    const a = await member(topic, groupId);
    await waitFor(() => a.records.length >= 40, { what: "40 records" });
    const counts = [0, 1, 2, 3].map((p) => a.records.filter((r) => r.partition === p).length);
    expect(counts.every((c) => c > 2)).toBe(true);
    // Commit part of partitions 0 and 1; nothing for 2 and 3.
    await a.consumer.commit(0, 2);
    await a.consumer.commit(1, counts[1]!);
    await a.consumer.stop();

    const b = await member(topic, groupId);
    const expected = counts[0]! - 2 + counts[2]! + counts[3]!;
    await waitFor(() => b.records.length >= expected, { what: `${expected} records` });
    expect(b.records.filter((r) => r.partition === 0).map((r) => r.offset)).toEqual(
      [...Array(counts[0]! - 2).keys()].map((i) => i + 2),
    );
    expect(b.records.filter((r) => r.partition === 1)).toEqual([]);
    expect(b.records.filter((r) => r.partition === 2).map((r) => r.offset)[0]).toBe(0);
  });

  it("tells the owned partitions' high watermarks and committed offsets", async () => {
    const topic = uniqueName();
    const w = await writer(topic);
    await w.append(Array.from({ length: 40 }, (_, n) => record(n)));
    const m = await member(topic, uniqueName("group"));
    await waitFor(() => m.records.length >= 40 && m.consumer.assignment.length === PARTITIONS, {
      what: "40 records",
    });
    const counts = [0, 1, 2, 3].map((p) => m.records.filter((r) => r.partition === p).length);
    await m.consumer.commit(0, 2);
    const positions = await m.consumer.positions();
    expect([...positions.keys()].sort()).toEqual([0, 1, 2, 3]);
    expect(positions.get(0)).toEqual({ end: counts[0], committed: 2 });
    // Nothing committed: a consumer starts at the earliest record kept, offset 0.
    expect(positions.get(1)).toEqual({ end: counts[1], committed: 0 });
  });

  it("splits partitions between two members and calls revoked/assigned on rebalance", async () => {
    const topic = uniqueName();
    const groupId = uniqueName("group");
    const w = await writer(topic);
    const a = await member(topic, groupId);
    await waitFor(() => a.consumer.assignment.length === PARTITIONS, { what: "a owns all" });
    expect(a.calls).toEqual(["assigned 0,1,2,3"]);

    const b = await member(topic, groupId);
    // Until a's revocation (which may run alongside its rejoin: consumer.ts) is done, a
    // still lists what it held while b lists its new share: wait for the split itself.
    const owned = () => [...a.consumer.assignment, ...b.consumer.assignment].sort();
    await waitFor(
      () =>
        a.consumer.assignment.length > 0 &&
        b.consumer.assignment.length > 0 &&
        owned().join() === "0,1,2,3",
      { what: "the partitions split between both members" },
    );
    await waitFor(() => a.calls.length >= 3, { what: "a revoked and reassigned" });
    expect(a.calls[1]).toBe("revoked 0,1,2,3");
    expect(a.calls[2]).toBe(`assigned ${a.consumer.assignment.join(",")}`);
    expect(b.calls).toEqual([`assigned ${b.consumer.assignment.join(",")}`]);

    // Each member now receives exactly its own partitions' records.
    await w.append(Array.from({ length: 80 }, (_, n) => record(n)));
    await waitFor(() => a.records.length + b.records.length >= 80, { what: "80 records" });
    expect(a.records.every((r) => a.consumer.assignment.includes(r.partition))).toBe(true);
    expect(b.records.every((r) => b.consumer.assignment.includes(r.partition))).toBe(true);
    expect(a.records.length + b.records.length).toBe(80);

    // When b leaves, it revokes what it owned and a takes everything back.
    const bOwned = b.consumer.assignment.join(",");
    await b.consumer.stop();
    expect(b.calls.at(-1)).toBe(`revoked ${bOwned}`);
    await waitFor(() => a.consumer.assignment.length === PARTITIONS, { what: "a owns all again" });
  });

  it("rejects a topic with another partition count and oversized records, with typed errors", async () => {
    const topic = uniqueName();
    const w = await writer(topic);
    await expect(writer(topic, PARTITIONS + 1)).rejects.toMatchObject({
      code: "partitions_mismatch",
    });
    const small = await KafkaQueueWriter.connect({
      brokers: kafkaBrokers(),
      topic,
      partitions: PARTITIONS,
      maxRecordBytes: 16,
      logLevel: QUIET,
    });
    closers.push(() => small.close());
    await expect(
      small.append([{ partition: 0, key: Buffer.alloc(8), value: Buffer.alloc(9) }]),
    ).rejects.toMatchObject({ code: "record_too_large" });
    await expect(
      w.append([{ partition: PARTITIONS, key: Buffer.alloc(8), value: Buffer.alloc(1) }]),
    ).rejects.toMatchObject({
      code: "invalid_partition",
    });
  });
});

describe("Kafka consumer delivery failures (real broker)", () => {
  it("retries a failing `assigned` callback; its partitions' batches wait for it and none is skipped", async () => {
    const topic = uniqueName();
    const w = await writer(topic);
    await w.append(Array.from({ length: 40 }, (_, n) => record(n)));
    const consumer = new KafkaQueueConsumer({
      brokers: kafkaBrokers(),
      topic,
      partitions: PARTITIONS,
      groupId: uniqueName("group"),
      maxWaitTimeMs: 200,
      retryBackoffMs: 20,
      logLevel: QUIET,
    });
    closers.push(() => consumer.stop());
    const records: ConsumedRecord[] = [];
    const failures: DeliveryFailure[] = [];
    const recovered: number[] = [];
    let assignedAttempts = 0;
    let assignedOk = false;
    const deliveredBeforeAssigned: number[] = [];
    await consumer.start(
      (batch) => {
        if (!assignedOk) deliveredBeforeAssigned.push(batch.partition);
        records.push(...batch.records);
        return Promise.resolve();
      },
      {
        assigned: () => {
          if (++assignedAttempts <= 3) {
            return Promise.reject(new Error("object store unavailable: connect ECONNREFUSED"));
          }
          assignedOk = true;
          return Promise.resolve();
        },
        failed: (f) => failures.push(f),
        recovered: (p) => recovered.push(p),
      },
    );
    await waitFor(() => records.length >= 40, { what: "40 records" });
    expect(deliveredBeforeAssigned).toEqual([]);
    expect(new Set(records.map(text)).size).toBe(40);
    expect(assignedAttempts).toBe(4);
    expect(failures).toHaveLength(3 * PARTITIONS);
    expect(failures.every((f) => f.stage === "assigned" && f.retrying)).toBe(true);
    expect(recovered.sort()).toEqual([0, 1, 2, 3]);
  });

  it("retries a failing handler; a non-retriable failure halts only its partition", async () => {
    const topic = uniqueName();
    const w = await writer(topic);
    await w.append(Array.from({ length: 40 }, (_, n) => record(n)));
    const consumer = new KafkaQueueConsumer({
      brokers: kafkaBrokers(),
      topic,
      partitions: PARTITIONS,
      groupId: uniqueName("group"),
      maxWaitTimeMs: 200,
      retryBackoffMs: 20,
      logLevel: QUIET,
    });
    closers.push(() => consumer.stop());
    const records: ConsumedRecord[] = [];
    const failures: DeliveryFailure[] = [];
    const calls = [0, 0, 0, 0];
    await consumer.start(
      (batch) => {
        const n = ++calls[batch.partition]!;
        if (batch.partition === 0) return Promise.reject(new TypeError("a bug"));
        if (batch.partition === 1 && n <= 2) return Promise.reject(new Error("store timeout"));
        records.push(...batch.records);
        return Promise.resolve();
      },
      { failed: (f) => failures.push(f) },
    );
    const others = Array.from({ length: 40 }, (_, n) => record(n)).filter((r) => r.partition !== 0);
    await waitFor(() => records.length >= others.length, { what: "partitions 1-3" });
    expect(calls[0]).toBe(1);
    expect(failures.filter((f) => f.partition === 0)).toMatchObject([
      { stage: "handler", retrying: false },
    ]);
    expect(failures.filter((f) => f.partition === 1).map((f) => f.retrying)).toEqual([true, true]);
    expect(records.some((r) => r.partition === 0)).toBe(false);
  });
});
