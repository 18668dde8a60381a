/**
 * The distributed path end to end: `sieve distributor`, two `sieve ingester`s in one Kafka
 * consumer group, `sieve bloom-gateway` and `sieve querier`, each its own process on
 * loopback, over the real Kafka broker (KAFKA_BROKERS) and the real S3-compatible server
 * (S3_ENDPOINT). A needle-in-a-haystack dataset goes in through the distributor as
 * snappy-compressed protobuf, as Loki's clients send it; needle queries through the querier
 * must answer exactly the pushed lines before the flush (the ingesters' heads over HTTP,
 * full chunks already in S3) and after `POST /flush` on both ingesters (S3 only, pruned by
 * the gateway's blooms), the same as a `sieve all` process (write-ahead log and filesystem
 * store) given the same data, and the same again with the gateway process stopped (the
 * querier fails open). Without KAFKA_BROKERS or S3_ENDPOINT every test
 * fails and says how to get the servers: they never skip.
 */
import { createHash, randomBytes } from "node:crypto";
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
import { encodePushRequest, type PushRequest } from "@sieve/proto";
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";
import snappy from "snappyjs";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster, metricSum, scrape, waitFor, type SieveChild } from "./cluster.test-helper.js";

// Six Node processes, Kafka and MinIO share two cores: start-up and ingestion dominate.
const SETUP_TIMEOUT_MS = 150_000;
const TEST_TIMEOUT_MS = 60_000;

// The haystack: every stream gets LINES lines, each trace id on PER_TRACE consecutive lines
// of one stream, so a needle lives in one series and one or two of its many small chunks.
const STREAMS = 50;
/** 683 traces of 3 lines, in 41 pushes of up to 50 lines (41 is prime: see INGESTER_CONFIG). */
const LINES = 2_049;
const PER_TRACE = 3;
const TOTAL = STREAMS * LINES;
/**
 * Lines of each stream per push request (all streams in every request). A head is cut
 * once its compressed size reaches the target after appending a queue record, so records
 * must be several times smaller than a chunk for the last lines to stay in the heads.
 */
const LINES_PER_PUSH = 50;
const PARTITIONS = 4;
const SPACING_MS = 500;

/**
 * Small chunks (bytes): 50 lines compress to about 1.7 KiB, so a head is cut after six or
 * seven pushes, each stream makes five or six chunks during ingestion (about 300 in the
 * store), and the rest stays in its head until the flush. A head is cut only after a whole
 * record, so were the pushes per stream a multiple of the pushes per chunk, every head
 * would be empty at the end: 41 pushes, a prime, leave a non-empty head whatever the
 * compression ratio.
 */
const INGESTER_CONFIG = {
  chunkTargetBytes: 10_000,
  chunkBlockBytes: 2048,
};
/** Loki's default tenant rate (4 MB/s, burst 6 MB) would refuse a 9 MB burst from one test. */
const DISTRIBUTOR_CONFIG = {
  limits: { ingestionRateBytes: 256 * 1024 * 1024, ingestionBurstBytes: 256 * 1024 * 1024 },
};

const RUN = randomBytes(4).toString("hex");
/** Start of the data: recent enough for the distributor's sample-age limit. */
const T0_MS = Date.now() - 25 * 60_000;
const QUERY_START = BigInt(T0_MS - 60_000) * 1_000_000n;
const QUERY_END = BigInt(T0_MS + LINES * SPACING_MS + 60_000) * 1_000_000n;

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(
      `${name} is not set: the distributed test needs a real Kafka broker and a real ` +
        "S3-compatible server. Run it via `sh scripts/test.sh` (npm test), or start them with " +
        "`sh scripts/kafka.sh start` and `sh scripts/minio.sh start` and export " +
        "KAFKA_BROKERS=127.0.0.1:9092 S3_ENDPOINT=http://127.0.0.1:9000 " +
        "AWS_ACCESS_KEY_ID=sieve-test AWS_SECRET_ACCESS_KEY=sieve-test-secret AWS_REGION=us-east-1",
    );
  }
  return value;
}

// ---- the dataset ---------------------------------------------------------------------

function streamLabels(s: number): Record<string, string> {
  return { app: "shop", env: "ci", pod: `pod-${String(s).padStart(2, "0")}` };
}

function selector(labels: Record<string, string>): string {
  return `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(", ")}}`;
}

/** A 32-hex-digit trace id, unique to this run. */
function traceId(seed: string, s: number, k: number): string {
  return createHash("sha256").update(`${seed}/${s}/${k}`).digest("hex").slice(0, 32);
}

function timestampMs(i: number): number {
  return T0_MS + i * SPACING_MS;
}

/** Nanoseconds of line `i` of stream `s` (streams differ in the last digits). */
function timestampNs(s: number, i: number): bigint {
  return BigInt(timestampMs(i)) * 1_000_000n + BigInt(s);
}

function lineText(s: number, i: number): string {
  const status = i % 17 === 0 ? 500 : 200;
  return `method=GET path=/api/orders/${(i * 7919) % 10_007} status=${status} took_ms=${(i * 31) % 250} pod=pod-${s} msg="request served"`;
}

/** One pushed line as the querier reports it: stream labels with metadata, time, line. */
function key(labels: Record<string, string>, ts: string, line: string): string {
  const sorted = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${JSON.stringify(sorted)} ${ts} ${line}`;
}

/** Every line of trace `k` of stream `s`, in the form of {@link key}, sorted. */
function expectedLines(s: number, k: number): string[] {
  const out: string[] = [];
  for (let i = k * PER_TRACE; i < Math.min((k + 1) * PER_TRACE, LINES); i++) {
    // The distributor names the service from `app` and finds no level in these lines
    // (Loki's service_name and log level discovery).
    const labels = {
      ...streamLabels(s),
      service_name: "shop",
      trace_id: traceId(RUN, s, k),
      detected_level: "unknown",
    };
    out.push(key(labels, String(timestampNs(s, i)), lineText(s, i)));
  }
  return out.sort();
}

/** Push request `r`: lines [r*LINES_PER_PUSH, (r+1)*LINES_PER_PUSH) of every stream. */
function pushBody(r: number): Uint8Array {
  const request: PushRequest = { streams: [] };
  for (let s = 0; s < STREAMS; s++) {
    const entries = [];
    for (let i = r * LINES_PER_PUSH; i < Math.min((r + 1) * LINES_PER_PUSH, LINES); i++) {
      const ms = timestampMs(i);
      entries.push({
        timestamp: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 + s },
        line: lineText(s, i),
        structuredMetadata: [
          { name: "trace_id", value: traceId(RUN, s, Math.floor(i / PER_TRACE)) },
        ],
      });
    }
    request.streams.push({ labels: selector(streamLabels(s)), entries });
  }
  return snappy.compress(encodePushRequest(request));
}

/** Pushes the whole dataset to a distributor (`sieve distributor` or `sieve all`). */
async function pushAll(url: string): Promise<void> {
  for (let r = 0; r * LINES_PER_PUSH < LINES; r++) {
    const res = await fetch(`${url}/loki/api/v1/push`, {
      method: "POST",
      headers: { "content-type": "application/x-protobuf" },
      body: pushBody(r),
    });
    if (res.status !== 204) {
      throw new Error(`push ${r} to ${url}: ${res.status} ${await res.text()}`);
    }
  }
}

interface Needle {
  readonly name: string;
  readonly id: string;
  /** Sorted {@link key}s; empty for an absent id. */
  readonly expected: readonly string[];
}

/**
 * The sample: the last trace of every stream (likely still in an ingester's head before
 * the flush), early and middle traces of some streams (in full chunks flushed to the store
 * during ingestion), and ids that were never pushed.
 */
function needles(): Needle[] {
  const out: Needle[] = [];
  const last = Math.floor((LINES - 1) / PER_TRACE);
  for (let s = 0; s < STREAMS; s++) {
    out.push({ name: `last of ${s}`, id: traceId(RUN, s, last), expected: expectedLines(s, last) });
  }
  for (const [s, k] of [
    [0, 0],
    [7, 5],
    [13, 101],
    [29, 333],
    [41, 500],
    [49, 640],
  ] as const) {
    out.push({ name: `trace ${k} of ${s}`, id: traceId(RUN, s, k), expected: expectedLines(s, k) });
  }
  for (let a = 0; a < 3; a++) {
    out.push({ name: `absent ${a}`, id: traceId(`absent-${RUN}`, a, a), expected: [] });
  }
  return out;
}

// ---- querying ------------------------------------------------------------------------

interface SieveStats {
  readonly chunksInRange: number;
  readonly chunksPrunedByBlooms: number;
  readonly chunksFetched: number;
  readonly ingesterLines: number;
  readonly bloomGateway: unknown;
}

interface Answer {
  readonly lines: string[];
  readonly stats: SieveStats;
}

async function needleQuery(url: string, id: string): Promise<Answer> {
  const params = new URLSearchParams({
    query: `{app="shop"} | trace_id="${id}"`,
    start: String(QUERY_START),
    end: String(QUERY_END),
    limit: "1000",
    direction: "forward",
  });
  const res = await fetch(`${url}/loki/api/v1/query_range?${params.toString()}`);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`query_range for ${id}: ${res.status} ${text}`);
  const body = JSON.parse(text) as {
    data: {
      resultType: string;
      result: { stream: Record<string, string>; values: [string, string][] }[];
      stats: { sieve: SieveStats };
    };
  };
  expect(body.data.resultType).toBe("streams");
  const lines = body.data.result
    .flatMap((r) => r.values.map(([ts, line]) => key(r.stream, ts, line)))
    .sort();
  return { lines, stats: body.data.stats.sieve };
}

/** Queries every needle and checks each answer is exactly its lines; answers them by name. */
async function checkNeedles(url: string, sample: readonly Needle[]): Promise<Map<string, Answer>> {
  const answers = new Map<string, Answer>();
  for (const needle of sample) {
    const answer = await needleQuery(url, needle.id);
    expect(answer.lines, `${needle.name} (${needle.id}) from ${url}`).toEqual(needle.expected);
    answers.set(needle.name, answer);
  }
  return answers;
}

function sum(answers: Iterable<Answer>, field: keyof SieveStats): number {
  let total = 0;
  for (const a of answers) total += a.stats[field] as number;
  return total;
}

// ---- the cluster -----------------------------------------------------------------------

const cluster = new Cluster();
let dir: string | undefined;
let s3: S3Client | undefined;
let bucket: string;
let kafka: Kafka | undefined;
let topic: string;
let groupId: string;
let topicCreated = false;
let setupError: Error | undefined;
let distributor: SieveChild;
let ingesters: SieveChild[] = [];
let gateway: SieveChild;
let querier: SieveChild;
let all: SieveChild;
/** Partitions of each member of the ingesters' group once it settled. */
let assignments: number[][] = [];
const sample = needles();
const beforeFlush = new Map<string, Answer>();

/** The group's members and their partitions, once every partition is owned by two members. */
async function settledAssignments(): Promise<number[][] | undefined> {
  const admin = kafka!.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([groupId]);
    const group = groups[0];
    if (group?.state !== "Stable" || group.members.length !== 2) return undefined;
    const owned = group.members.map((m) => {
      const decoded = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      return [...(decoded?.assignment[topic] ?? [])].sort((a, b) => a - b);
    });
    const union = new Set(owned.flat());
    if (owned.some((p) => p.length === 0) || union.size !== PARTITIONS) return undefined;
    return owned;
  } finally {
    await admin.disconnect();
  }
}

/** Sums one ingester metric over every process in `urls`, each. */
async function gauge(urls: readonly string[], name: string): Promise<number[]> {
  return Promise.all(urls.map(async (u) => metricSum(await scrape(u), name)));
}

async function appended(urls: readonly string[]): Promise<number[]> {
  return gauge(urls, "sieve_ingester_entries_appended_total");
}

/** Every entry appended, and every chunk cut so far written to the store. */
async function ingested(urls: readonly string[]): Promise<true | undefined> {
  const total = (await appended(urls)).reduce((a, b) => a + b, 0);
  const flushing = (await gauge(urls, "sieve_ingester_chunks_flushing")).reduce((a, b) => a + b, 0);
  return total === TOTAL && flushing === 0 ? true : undefined;
}

beforeAll(async () => {
  try {
    const brokers = requiredEnv("KAFKA_BROKERS").split(",");
    const endpoint = requiredEnv("S3_ENDPOINT");
    dir = await mkdtemp(join(tmpdir(), "sieve-distributed-"));

    bucket = `sieve-distributed-${RUN}`;
    s3 = new S3Client({
      endpoint,
      forcePathStyle: true,
      region: process.env.AWS_REGION ?? "us-east-1",
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));

    topic = `sieve-distributed-${RUN}`;
    groupId = `sieve-distributed-${RUN}`;
    kafka = new Kafka({ clientId: "sieve-distributed-test", brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      // Made here so the ingesters can subscribe before the distributor has connected.
      await admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
      });
      topicCreated = true;
    } finally {
      await admin.disconnect();
    }

    const distributed = join(dir, "distributed.yaml");
    await writeFile(
      distributed,
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
        distributor: DISTRIBUTOR_CONFIG,
        ingester: INGESTER_CONFIG,
      }),
    );
    const single = join(dir, "all.yaml");
    await writeFile(
      single,
      toYaml({
        queue: { partitions: PARTITIONS },
        distributor: DISTRIBUTOR_CONFIG,
        ingester: INGESTER_CONFIG,
      }),
    );

    const started = await Promise.all([
      cluster.start({ target: "distributor", configFile: distributed }),
      // Distinct instance ids (by environment, as an operator would) name each ingester's
      // index segments and bloom blocks in the shared bucket.
      cluster.start({
        target: "ingester",
        name: "ingester-1",
        configFile: distributed,
        env: { SIEVE_INGESTER_INSTANCE_ID: "ingester-1" },
      }),
      cluster.start({
        target: "ingester",
        name: "ingester-2",
        configFile: distributed,
        env: { SIEVE_INGESTER_INSTANCE_ID: "ingester-2" },
      }),
      cluster.start({ target: "bloom-gateway", configFile: distributed }),
      cluster.start({
        target: "all",
        configFile: single,
        args: ["--data-dir", join(dir, "all-data")],
      }),
    ]);
    [distributor, gateway, all] = [started[0], started[3], started[4]];
    ingesters = [started[1], started[2]];
    querier = await cluster.start({
      target: "querier",
      configFile: distributed,
      env: {
        SIEVE_INGESTER_URLS: ingesters.map((i) => i.url).join(","),
        SIEVE_BLOOM_GATEWAY_URLS: gateway.url,
      },
    });

    // Pushing before both ingesters own partitions would let one consume everything.
    assignments = await waitFor(
      "both ingesters to own partitions",
      settledAssignments,
      60_000,
      250,
    );

    await Promise.all([pushAll(distributor.url), pushAll(all.url)]);
    const ingesterUrls = ingesters.map((i) => i.url);
    await waitFor(
      `the ingesters to take in all ${TOTAL} entries`,
      () => ingested(ingesterUrls),
      60_000,
      250,
    );
    await waitFor(
      `sieve all to take in all ${TOTAL} entries`,
      () => ingested([all.url]),
      60_000,
      250,
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    setupError = new Error(`setup failed: ${message}\n${cluster.output()}`);
  }
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  await cluster.stopAll(5_000);
  if (s3 !== undefined) {
    const pages = paginateListObjectsV2({ client: s3 }, { Bucket: bucket });
    try {
      for await (const page of pages) {
        const objects = (page.Contents ?? []).map((o) => ({ Key: o.Key }));
        if (objects.length > 0) {
          await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects } }));
        }
      }
      await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
    } catch {
      // The bucket was never made (setup failed first): nothing to remove.
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

function ready(): void {
  if (setupError !== undefined) throw setupError;
}

/** Runs `body`, adding every child's output to a failure, so a red test says what happened. */
async function withOutput(body: () => Promise<void>): Promise<void> {
  ready();
  try {
    await body();
  } catch (error) {
    if (error instanceof Error) error.message += `\n${cluster.output()}`;
    throw error;
  }
}

describe("distributor, two ingesters on Kafka, bloom gateway and querier as processes", () => {
  test(
    "both ingesters own partitions of the topic and received data",
    () =>
      withOutput(async () => {
        expect(assignments).toHaveLength(2);
        expect(assignments.flat().sort((a, b) => a - b)).toEqual([...Array(PARTITIONS).keys()]);
        const counts = await appended(ingesters.map((i) => i.url));
        expect(counts[0]).toBeGreaterThan(0);
        expect(counts[1]).toBeGreaterThan(0);
        expect(counts[0]! + counts[1]!).toBe(TOTAL);
        // Small chunks: both already flushed full chunks to the bucket during ingestion.
        for (const i of ingesters) {
          expect(
            metricSum(await scrape(i.url), "sieve_ingester_chunks_flushed_total"),
          ).toBeGreaterThan(0);
        }
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "before the flush, needle queries answer exactly the pushed lines (ingesters and store)",
    () =>
      withOutput(async () => {
        const answers = await checkNeedles(querier.url, sample);
        for (const [name, answer] of answers) beforeFlush.set(name, answer);
        // The last lines of every stream were still in the ingesters' heads: some needles
        // were answered without reading a single chunk, so over HTTP from the ingesters.
        const fromIngesters = sample.filter((n) => {
          const a = answers.get(n.name)!;
          return n.expected.length > 0 && a.stats.chunksFetched === 0;
        });
        expect(fromIngesters.length).toBeGreaterThan(0);
        expect(sum(answers.values(), "ingesterLines")).toBeGreaterThan(0);
        const heads = await gauge(
          ingesters.map((i) => i.url),
          "sieve_ingester_heads_in_memory",
        );
        expect(heads[0]! + heads[1]!).toBeGreaterThan(0);
        // Early traces were in full chunks already flushed: read from S3 through the gateway.
        const early = answers.get("trace 0 of 0")!;
        expect(early.stats.chunksFetched).toBeGreaterThan(0);
        expect(early.stats.bloomGateway).not.toBeNull();
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "before the flush, a metric query is pushed down to both ingesters over HTTP and counts every line once",
    () =>
      withOutput(async () => {
        const ask = async (path: string, params: Record<string, string>) => {
          const res = await fetch(
            `${querier.url}${path}?${new URLSearchParams(params).toString()}`,
          );
          const text = await res.text();
          if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
          return JSON.parse(text) as {
            data: { result: { value?: [number, string]; values?: [number, string][] }[] };
          };
        };
        const queries = async (): Promise<number[]> =>
          Promise.all(
            ingesters.map(async (i) =>
              metricSum(await scrape(i.url), "sieve_ingester_queries_total", 'outcome="ok"'),
            ),
          );
        const before = await queries();
        // The windows (t - 1m, t] of these steps tile (QUERY_START, QUERY_START + 21 m]: the data.
        const start = QUERY_START + 60n * 1_000_000_000n;
        const range = await ask("/loki/api/v1/query_range", {
          query: `sum(count_over_time({app="shop"}[1m]))`,
          start: String(start),
          end: String(start + 1200n * 1_000_000_000n),
          step: "60",
        });
        const counted = range.data.result[0]!.values!.reduce((n, [, v]) => n + Number(v), 0);
        expect(counted).toBe(TOTAL);
        const instant = await ask("/loki/api/v1/query", {
          query: `sum(count_over_time({app="shop"}[30m]))`,
          time: String(QUERY_END),
        });
        expect(instant.data.result[0]!.value![1]).toBe(String(TOTAL));
        // Both ingesters answered the pushed-down calls (their heads hold the last lines).
        const after = await queries();
        after.forEach((n, k) => {
          expect(n).toBeGreaterThanOrEqual(before[k]! + 2);
        });
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "after POST /flush on both ingesters, the same lines come from S3, pruned by blooms",
    () =>
      withOutput(async () => {
        for (const i of ingesters) {
          const res = await fetch(`${i.url}/flush`, { method: "POST" });
          expect(res.status, `POST ${i.name}/flush`).toBe(204);
        }
        for (const name of ["sieve_ingester_heads_in_memory", "sieve_ingester_chunks_flushing"]) {
          expect(
            await gauge(
              ingesters.map((i) => i.url),
              name,
            ),
            name,
          ).toEqual([0, 0]);
        }
        const answers = await checkNeedles(querier.url, sample);
        const present = sample
          .filter((n) => n.expected.length > 0)
          .map((n) => answers.get(n.name)!);
        const absent = sample
          .filter((n) => n.expected.length === 0)
          .map((n) => answers.get(n.name)!);
        // Nothing is left in memory: every line now comes from chunks in the bucket.
        expect(sum(answers.values(), "ingesterLines")).toBe(0);
        for (const a of present) {
          expect(a.stats.chunksFetched).toBeGreaterThan(0);
          expect(a.stats.bloomGateway).not.toBeNull();
        }
        // Many small chunks, and the blooms rule out nearly all of them.
        const inRange = sum(answers.values(), "chunksInRange");
        const pruned = sum(answers.values(), "chunksPrunedByBlooms");
        expect(
          Math.min(...[...answers.values()].map((a) => a.stats.chunksInRange)),
        ).toBeGreaterThan(STREAMS * 5);
        expect(pruned / inRange).toBeGreaterThanOrEqual(0.95);
        for (const a of absent) {
          expect(a.lines).toEqual([]);
          expect(a.stats.chunksPrunedByBlooms).toBeGreaterThan(0.95 * a.stats.chunksInRange);
        }
        // The querier asked the gateway process over HTTP, and nothing failed open.
        const metrics = await scrape(gateway.url);
        expect(
          metricSum(
            metrics,
            "sieve_bloom_gateway_request_duration_seconds_count",
            'status_code="200"',
          ),
        ).toBeGreaterThan(0);
        expect(metricSum(metrics, "sieve_bloom_gateway_failed_open_chunks_total")).toBe(0);
        // The same lines as before the flush, needle by needle.
        for (const needle of sample) {
          expect(answers.get(needle.name)!.lines).toEqual(beforeFlush.get(needle.name)!.lines);
        }
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "sieve all (write-ahead log, filesystem store) answers the same lines",
    () =>
      withOutput(async () => {
        const unflushed = await checkNeedles(all.url, sample);
        const res = await fetch(`${all.url}/flush`, { method: "POST" });
        expect(res.status).toBe(204);
        const flushed = await checkNeedles(all.url, sample);
        for (const needle of sample) {
          const distributedLines = beforeFlush.get(needle.name)?.lines;
          expect(unflushed.get(needle.name)!.lines).toEqual(distributedLines);
          expect(flushed.get(needle.name)!.lines).toEqual(distributedLines);
        }
        expect(sum(flushed.values(), "ingesterLines")).toBe(0);
        expect(
          sum(flushed.values(), "chunksPrunedByBlooms") / sum(flushed.values(), "chunksInRange"),
        ).toBeGreaterThanOrEqual(0.95);
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "with the gateway process gone, the querier fails open: same lines, nothing pruned",
    () =>
      withOutput(async () => {
        expect(await gateway.stop()).toBe(0);
        const few = sample.filter((n, i) => i % 10 === 0 || n.expected.length === 0);
        const answers = await checkNeedles(querier.url, few);
        for (const needle of few) {
          const a = answers.get(needle.name)!;
          expect(a.lines).toEqual(beforeFlush.get(needle.name)!.lines);
          expect(a.stats.chunksPrunedByBlooms).toBe(0);
          expect(a.stats.chunksFetched).toBe(a.stats.chunksInRange);
          const bloom = a.stats.bloomGateway as { failedOpen: Record<string, number> } | null;
          const failedOpen = Object.values(bloom?.failedOpen ?? {}).reduce((x, y) => x + y, 0);
          expect(failedOpen, JSON.stringify(bloom)).toBe(a.stats.chunksInRange);
        }
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "SIGTERM stops every process cleanly",
    () =>
      withOutput(async () => {
        const codes = await cluster.stopAll();
        expect(codes).toEqual({
          querier: 0,
          all: 0,
          "bloom-gateway": 0,
          "ingester-2": 0,
          "ingester-1": 0,
          distributor: 0,
        });
      }),
    TEST_TIMEOUT_MS,
  );
});
