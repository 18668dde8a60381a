/**
 * The tail across processes: `sieve distributor`, two `sieve ingester`s in one Kafka
 * consumer group and `sieve querier`, over the real Kafka broker (KAFKA_BROKERS) and S3
 * server (S3_ENDPOINT). A `ws` client tails through the querier, which holds the tail on
 * both ingesters over HTTP (`POST /ingester/v1/tail`): it gets the recent lines, then every
 * line pushed to streams on either ingester, each stream in order, none lost or repeated
 * across a flush of both. Without the servers the test fails and says so: it never skips.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  S3Client,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import WebSocket from "ws";
import { Cluster, metricSum, scrape, waitFor, type SieveChild } from "./cluster.test-helper.js";

const RUN = randomBytes(4).toString("hex");
const PARTITIONS = 4;
const STREAMS = 4;
const cluster = new Cluster();
let dir: string | undefined;
let s3: S3Client | undefined;
let kafka: Kafka | undefined;
let bucket = "";
let topic = "";
let groupId = "";
let topicCreated = false;
let distributor: SieveChild;
let ingesters: SieveChild[] = [];
let querier: SieveChild;
let setupError: Error | undefined;

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(
      `${name} is not set: this test needs a real Kafka broker and S3-compatible server ` +
        "(`sh scripts/kafka.sh start`, `sh scripts/minio.sh start`, then KAFKA_BROKERS, " +
        "S3_ENDPOINT and the AWS_* variables, as scripts/test.sh sets them)",
    );
  }
  return value;
}

async function settledAssignments(): Promise<true | undefined> {
  const admin = kafka!.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([groupId]);
    const group = groups[0];
    if (group?.state !== "Stable" || group.members.length !== 2) return undefined;
    const owned = group.members.map(
      (m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? [],
    );
    return owned.every((p) => p.length > 0) && new Set(owned.flat()).size === PARTITIONS
      ? true
      : undefined;
  } finally {
    await admin.disconnect();
  }
}

/** Pushes line `text(s)` to every stream `s`, at `tsMs` (+ s ns), through the distributor. */
async function pushRound(tsMs: number, text: (s: number) => string): Promise<void> {
  const streams = Array.from({ length: STREAMS }, (_, s) => ({
    stream: { app: "ct", pod: `p${s}` },
    values: [[(BigInt(tsMs) * 1_000_000n + BigInt(s)).toString(), text(s)]],
  }));
  const response = await fetch(`${distributor.url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ streams }),
  });
  expect(response.status, await response.text()).toBe(204);
}

async function appended(): Promise<number> {
  const each = await Promise.all(
    ingesters.map(async (i) =>
      metricSum(await scrape(i.url), "sieve_ingester_entries_appended_total"),
    ),
  );
  return each.reduce((a, b) => a + b, 0);
}

beforeAll(async () => {
  try {
    const brokers = requiredEnv("KAFKA_BROKERS").split(",");
    const endpoint = requiredEnv("S3_ENDPOINT");
    dir = await mkdtemp(join(tmpdir(), "sieve-tail-cluster-"));
    bucket = `sieve-tail-${RUN}`;
    s3 = new S3Client({
      endpoint,
      forcePathStyle: true,
      region: process.env.AWS_REGION ?? "us-east-1",
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    topic = `sieve-tail-${RUN}`;
    groupId = `sieve-tail-${RUN}`;
    kafka = new Kafka({ clientId: "sieve-tail-test", brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
      });
      topicCreated = true;
    } finally {
      await admin.disconnect();
    }
    const config = join(dir, "cluster.yaml");
    await writeFile(
      config,
      toYaml({
        storage: {
          backend: "s3",
          s3: {
            bucket,
            endpoint,
            region: process.env.AWS_REGION ?? "us-east-1",
            forcePathStyle: true,
          },
        },
        queue: { backend: "kafka", partitions: PARTITIONS, kafka: { brokers, topic, groupId } },
        ingester: { workers: 1 },
        querier: { workers: 1 },
      }),
    );
    const started = await Promise.all([
      cluster.start({ target: "distributor", configFile: config }),
      cluster.start({
        target: "ingester",
        name: "ingester-1",
        configFile: config,
        env: { SIEVE_INGESTER_INSTANCE_ID: "tail-ingester-1" },
      }),
      cluster.start({
        target: "ingester",
        name: "ingester-2",
        configFile: config,
        env: { SIEVE_INGESTER_INSTANCE_ID: "tail-ingester-2" },
      }),
    ]);
    distributor = started[0];
    ingesters = [started[1], started[2]];
    querier = await cluster.start({
      target: "querier",
      configFile: config,
      env: { SIEVE_INGESTER_URLS: ingesters.map((i) => i.url).join(",") },
    });
    await waitFor("both ingesters to own partitions", settledAssignments, 60_000, 250);
  } catch (error) {
    setupError = new Error(`setup failed: ${(error as Error).message}\n${cluster.output()}`);
  }
}, 150_000);

afterAll(async () => {
  await cluster.stopAll(5_000);
  if (s3 !== undefined) {
    try {
      for await (const page of paginateListObjectsV2({ client: s3 }, { Bucket: bucket })) {
        const objects = (page.Contents ?? []).map((o) => ({ Key: o.Key }));
        if (objects.length > 0) {
          await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects } }));
        }
      }
      await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
    } catch {
      // never made: nothing to remove
    }
    s3.destroy();
  }
  if (kafka !== undefined && topicCreated) {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.deleteTopics({ topics: [topic] });
      await admin.deleteGroups([groupId]).catch(() => undefined);
    } finally {
      await admin.disconnect();
    }
  }
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("tail through sieve querier → sieve ingester (HTTP)", () => {
  test("the recent lines, then every line of both ingesters, none lost across a flush", async () => {
    if (setupError !== undefined) throw setupError;
    const t0 = Date.now() - 60_000;
    await pushRound(t0, (s) => `history ${s}`);
    await waitFor("the history to be ingested", async () =>
      (await appended()) >= STREAMS ? true : undefined,
    );

    const url = new URL("/loki/api/v1/tail", querier.url.replace(/^http/, "ws"));
    url.searchParams.set("query", '{app="ct"}');
    const ws = new WebSocket(url);
    const lines: { pod: string; line: string }[] = [];
    ws.on("message", (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as {
        streams: { stream: Record<string, string>; values: [string, string][] }[];
      };
      for (const s of frame.streams)
        for (const v of s.values) lines.push({ pod: s.stream.pod!, line: v[1] });
    });
    const closed = new Promise<number>((resolve) =>
      ws.once("close", (code) => {
        resolve(code);
      }),
    );
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => {
        resolve();
      });
      ws.once("error", reject);
    });
    await waitFor("the history lines", () =>
      Promise.resolve(lines.length >= STREAMS ? true : undefined),
    );
    // The history, oldest first (the pods' lines differ by their last nanoseconds).
    expect(lines.map((l) => l.line)).toEqual(["history 0", "history 1", "history 2", "history 3"]);

    const ROUNDS = 30;
    for (let r = 0; r < ROUNDS; r++) {
      await pushRound(t0 + 1000 + r, (s) => `live ${s} ${r}`);
      if (r === ROUNDS / 2) {
        // Both ingesters cut and flush every head: the tail goes on, nothing lost.
        await Promise.all(
          ingesters.map(async (i) => {
            const flushed = await fetch(`${i.url}/flush`, { method: "POST" });
            expect(flushed.status).toBe(204);
          }),
        );
      }
    }
    await waitFor(
      "every live line",
      () => Promise.resolve(lines.length >= STREAMS * (ROUNDS + 1) ? true : undefined),
      60_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lines).toHaveLength(STREAMS * (ROUNDS + 1));
    for (let s = 0; s < STREAMS; s++) {
      const ofPod = lines.filter((l) => l.pod === `p${s}`).map((l) => l.line);
      expect(ofPod).toEqual([
        `history ${s}`,
        ...Array.from({ length: ROUNDS }, (_, r) => `live ${s} ${r}`),
      ]);
    }
    // Both ingesters held the tail: streams live on both (four partitions, two owners).
    const owners = await Promise.all(
      ingesters.map(async (i) =>
        metricSum(await scrape(i.url), "sieve_ingester_entries_appended_total"),
      ),
    );
    expect(owners.every((n) => n > 0)).toBe(true);
    ws.close(1000);
    expect(await closed).toBe(1000);
  }, 120_000);

  test("an ingester going away ends the tail with Loki's close reason", async () => {
    if (setupError !== undefined) throw setupError;
    const url = new URL("/loki/api/v1/tail", querier.url.replace(/^http/, "ws"));
    url.searchParams.set("query", '{app="ct"}');
    const ws = new WebSocket(url);
    const closed = new Promise<{ code: number; reason: string }>((resolve) => {
      ws.once("close", (code, reason) => {
        resolve({ code, reason: reason.toString() });
      });
    });
    // A line pushed once the tail is open arrives: both ingesters hold it.
    const seen: string[] = [];
    ws.on("message", (data: Buffer) => {
      seen.push(data.toString());
    });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => {
        resolve();
      });
      ws.once("error", reject);
    });
    await waitFor("the tail to carry a new line", async () => {
      await pushRound(Date.now(), (s) => `probe ${s}`);
      return seen.some((f) => f.includes("probe")) ? true : undefined;
    });
    // A graceful stop ends the tails it answers, and is not held up by them.
    expect(await ingesters[1]!.stop(10_000)).toBe(0);
    expect(await closed).toEqual({ code: 1011, reason: "all ingesters closed the connection" });
  }, 60_000);
});
