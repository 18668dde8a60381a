/**
 * The distributed path end to end, started as a user starts it: `sh scripts/cluster.sh
 * start` (two distributors, two ingesters in one Kafka consumer group, two bloom gateways,
 * two queriers, each its own process with deploy/sieve/common.yaml and its role's file,
 * and nginx with deploy/nginx/routes.conf as the one entry port), on the suite's Kafka
 * broker (KAFKA_BROKERS) and S3-compatible server (S3_ENDPOINT), with this run's own
 * bucket, topic and small chunks laid over the configs (CLUSTER_CONFIG_FILE).
 *
 * A needle-in-a-haystack dataset goes in through the entry port as snappy-compressed
 * protobuf, as Loki's clients send it (and one JSON push); needle queries through the
 * entry port must answer exactly the pushed lines before the flush (the ingesters' heads
 * over HTTP, full chunks already in S3) and after `POST /flush` on both ingesters (S3
 * only, pruned by the gateways' blooms), and the same again with the gateways stopped (the
 * queriers fail open). Then the handover: one ingester is SIGKILLed and the other takes
 * its partitions and replays what it had not flushed; one is paused (SIGSTOP) past the
 * handover, lines are pushed meanwhile, and it is resumed (SIGCONT). In both cases every
 * acknowledged line is answered exactly once through the entry port and stored exactly
 * once in the bucket (read back chunk by chunk, as a querier sees it). Without
 * KAFKA_BROKERS or S3_ENDPOINT every test fails and says how to get the servers: they
 * never skip.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DeleteBucketCommand,
  DeleteObjectsCommand,
  S3Client,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import { decodeChunk } from "@sieve/chunk";
import { readIndex } from "@sieve/index";
import { encodePushRequest, type PushRequest } from "@sieve/proto";
import { S3ObjectStore } from "@sieve/storage";
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";
import snappy from "snappyjs";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { NativeCluster, metricSum, scrape, waitFor } from "./cluster.test-helper.js";
import {
  analysePromql,
  dashboardQueries,
  familyOf,
  metricTypes,
  repoText,
} from "./deploy.test-helper.js";
import { alive } from "./cluster/state.js";
import { REPO_ROOT } from "./cluster/topology.js";
import { loadSieveConfig } from "./config.js";

// Eight Node processes, nginx, Kafka and MinIO share two cores: start-up and ingestion dominate.
const SETUP_TIMEOUT_MS = 150_000;
const TEST_TIMEOUT_MS = 60_000;

// The haystack: every stream gets LINES lines, each trace id on PER_TRACE consecutive lines
// of one stream, so a needle lives in one series and one or two of its many small chunks.
const STREAMS = 25;
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
/** The topic's partitions, as deploy/sieve/common.yaml has them. */
const PARTITIONS = loadSieveConfig({ file: [join(REPO_ROOT, "deploy/sieve/common.yaml")], env: {} })
  .queue.partitions;
const SPACING_MS = 500;

/**
 * Small chunks (bytes): 50 lines compress to about 1.7 KiB, so a head is cut after six or
 * seven pushes, each stream makes five or six chunks during ingestion (about 150 in the
 * store), and the rest stays in its head until the flush. A head is cut only after a whole
 * record, so were the pushes per stream a multiple of the pushes per chunk, every head
 * would be empty at the end: 41 pushes, a prime, leave a non-empty head whatever the
 * compression ratio.
 */
const INGESTER_CONFIG = {
  chunkTargetBytes: 10_000,
  chunkBlockBytes: 2048,
};
/**
 * The ingesters' group: a member that misses heartbeats for 6 s (Kafka's smallest session)
 * loses its partitions, so the handover tests wait seconds, not the configs' 10.
 */
const KAFKA_GROUP = { sessionTimeoutMs: 6000, heartbeatIntervalMs: 500 };

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
    [19, 333],
    [21, 500],
    [24, 640],
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

// ---- the handover batches --------------------------------------------------------------

/** Streams of a handover batch: enough to land on every partition, so on both ingesters. */
const BATCH_STREAMS = 16;

/** Lines pushed for one handover step, under their own `app`. */
interface Batch {
  readonly app: string;
  /** Every line's text (unique in the run), as pushed. */
  readonly texts: readonly string[];
}

/**
 * Pushes `count` new lines to the streams of app `app` through `url` (protobuf+snappy),
 * acknowledged; `tag` makes the texts unique, and the lines are `offsetMs` after a minute ago.
 */
async function pushBatch(
  url: string,
  app: string,
  tag: string,
  count: number,
  offsetMs = 0,
): Promise<Batch> {
  const texts: string[] = [];
  const request: PushRequest = { streams: [] };
  const t0 = Date.now() - 60_000 + offsetMs;
  for (let s = 0; s < BATCH_STREAMS; s++) {
    const entries = [];
    for (let k = s; k < count; k += BATCH_STREAMS) {
      const text = `${app} ${tag} line ${k} of run ${RUN}`;
      texts.push(text);
      const ms = t0 + k;
      entries.push({
        timestamp: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 },
        line: text,
        structuredMetadata: [],
      });
    }
    request.streams.push({ labels: selector({ app, pod: `pod-${s}` }), entries });
  }
  const res = await fetch(`${url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "content-type": "application/x-protobuf" },
    body: snappy.compress(encodePushRequest(request)),
  });
  if (res.status !== 204)
    throw new Error(`push of ${app} ${tag}: ${res.status} ${await res.text()}`);
  return { app, texts };
}

/** Every line of `app` a query through `url` answers, sorted, repeats kept. */
async function answered(url: string, app: string): Promise<string[]> {
  const params = new URLSearchParams({
    query: `{app="${app}"}`,
    start: String(BigInt(Date.now() - 3_600_000) * 1_000_000n),
    end: String(BigInt(Date.now() + 60_000) * 1_000_000n),
    limit: "5000",
    direction: "forward",
  });
  const res = await fetch(`${url}/loki/api/v1/query_range?${params.toString()}`);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`query for ${app}: ${res.status} ${text}`);
  const body = JSON.parse(text) as { data: { result: { values: [string, string][] }[] } };
  return body.data.result.flatMap((r) => r.values.map(([, line]) => line)).sort();
}

// ---- the cluster -----------------------------------------------------------------------

let dir: string | undefined;
let cluster: NativeCluster | undefined;
let s3: S3Client | undefined;
let store: S3ObjectStore | undefined;
let kafka: Kafka | undefined;
const bucket = `sieve-cluster-${RUN}`;
const topic = `sieve-cluster-${RUN}`;
const groupId = `sieve-cluster-${RUN}`;
let setupError: Error | undefined;
let entry: string;
/** Partitions of each member of the ingesters' group once it settled. */
let assignments: number[][] = [];
const sample = needles();
const beforeFlush = new Map<string, Answer>();
/** The JSON push's lines. */
const JSON_LINES = Array.from({ length: 5 }, (_, k) => `json client line ${k} of run ${RUN}`);
/** Every line acknowledged so far, beyond the haystack, by app. */
const acknowledged = new Map<string, readonly string[]>([["json-client", JSON_LINES]]);

/** The members' partitions once the group is stable with `members` members owning them all. */
async function settled(members: number): Promise<number[][] | undefined> {
  const admin = kafka!.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([groupId]);
    const group = groups[0];
    if (group?.state !== "Stable" || group.members.length !== members) return undefined;
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

const total = (counts: readonly number[]): number => counts.reduce((a, b) => a + b, 0);

/** Every entry appended, and every chunk cut so far written to the store. */
async function ingested(urls: readonly string[], expected: number): Promise<true | undefined> {
  const flushing = total(await gauge(urls, "sieve_ingester_chunks_flushing"));
  return total(await appended(urls)) === expected && flushing === 0 ? true : undefined;
}

function ingesterUrls(): string[] {
  return cluster!.urls("ingester");
}

/** POST /flush on every ingester, directly (the entry point does not route it). */
async function flushAll(): Promise<void> {
  for (const url of ingesterUrls()) {
    const res = await fetch(`${url}/flush`, { method: "POST" });
    expect(res.status, `POST ${url}/flush`).toBe(204);
  }
}

/**
 * Every line in the bucket as a querier sees it (the merged index, then every chunk it
 * lists, decoded with its checksum checked), with how many times it is stored.
 */
async function storedLines(): Promise<Map<string, number>> {
  const from = BigInt(T0_MS - 3_600_000) * 1_000_000n;
  const through = BigInt(Date.now() + 3_600_000) * 1_000_000n;
  const counts = new Map<string, number>();
  for (const series of await readIndex(store!, "fake", from, through)) {
    for (const chunk of series.chunks) {
      const decoded = decodeChunk(await store!.get(chunk.key), chunk.ref.checksum);
      for (const e of decoded.entries) counts.set(e.line, (counts.get(e.line) ?? 0) + 1);
    }
  }
  return counts;
}

/**
 * Flushes both ingesters, then checks the bucket holds every acknowledged line (the
 * haystack and every batch so far) exactly once, and nothing else.
 */
async function checkStoredOnce(): Promise<void> {
  await flushAll();
  const stored = await storedLines();
  const expected = new Set<string>();
  for (let s = 0; s < STREAMS; s++) for (let i = 0; i < LINES; i++) expected.add(lineText(s, i));
  for (const texts of acknowledged.values()) for (const t of texts) expected.add(t);
  const twice = [...stored].filter(([, n]) => n > 1);
  expect({ storedTwice: twice.length, first: twice.slice(0, 5) }).toEqual({
    storedTwice: 0,
    first: [],
  });
  expect([...expected].filter((t) => !stored.has(t))).toEqual([]);
  expect([...stored.keys()].filter((t) => !expected.has(t))).toEqual([]);
}

beforeAll(async () => {
  try {
    const brokers = requiredEnv("KAFKA_BROKERS");
    const endpoint = requiredEnv("S3_ENDPOINT");
    const region = process.env.AWS_REGION ?? "us-east-1";
    dir = await mkdtemp(join(tmpdir(), "sieve-distributed-"));
    s3 = new S3Client({ endpoint, forcePathStyle: true, region });
    store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true, region });
    kafka = new Kafka({
      clientId: "sieve-distributed-test",
      brokers: brokers.split(","),
      logLevel: logLevel.NOTHING,
    });

    // Over the cluster configs, only what this run must own (bucket, topic, group) and
    // what the test needs (small chunks, a short session).
    const overlay = join(dir, "test.yaml");
    await writeFile(
      overlay,
      toYaml({
        storage: { s3: { bucket } },
        queue: { kafka: { topic, groupId, ...KAFKA_GROUP } },
        ingester: INGESTER_CONFIG,
      }),
    );
    const entryPort = await NativeCluster.freePorts();
    cluster = new NativeCluster(join(dir, "cluster"), {
      CLUSTER_PORT: String(entryPort),
      CLUSTER_KAFKA_BROKERS: brokers,
      CLUSTER_S3_ENDPOINT: endpoint,
      CLUSTER_CONFIG_FILE: overlay,
      CLUSTER_READY_TIMEOUT_S: "90",
      CLUSTER_STOP_GRACE_S: "20",
    });
    entry = (await cluster.start()).entryUrl;

    // Pushing before both ingesters own partitions would let one consume everything.
    assignments = await waitFor("both ingesters to own partitions", () => settled(2), 60_000, 250);

    await pushAll(entry);
    const json = await fetch(`${entry}/loki/api/v1/push`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        streams: [
          {
            stream: { app: "json-client" },
            values: JSON_LINES.map((line, k) => [String(BigInt(T0_MS + k) * 1_000_000n), line]),
          },
        ],
      }),
    });
    if (json.status !== 204) throw new Error(`JSON push: ${json.status} ${await json.text()}`);
    await waitFor(
      `the ingesters to take in all ${TOTAL + JSON_LINES.length} entries`,
      () => ingested(ingesterUrls(), TOTAL + JSON_LINES.length),
      60_000,
      250,
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    setupError = new Error(`setup failed: ${message}\n${cluster?.output() ?? ""}`);
  }
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  if (cluster !== undefined) {
    // A paused process would hold its stop until killed: resume it first.
    for (const p of readStateSafe()) {
      try {
        process.kill(p, "SIGCONT");
      } catch {
        // already gone
      }
    }
    await cluster.run("stop");
  }
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
      // The bucket was never made (setup failed first): nothing to remove.
    }
    s3.destroy();
  }
  if (kafka !== undefined) {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.deleteGroups([groupId]).catch(() => undefined);
    } finally {
      await admin.disconnect();
    }
  }
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}, 90_000);

/** The pids the cluster started, or none when it never did. */
function readStateSafe(): number[] {
  try {
    return cluster!.state().processes.map((p) => p.pid);
  } catch {
    return [];
  }
}

/** Runs `body`, adding every process's log to a failure, so a red test says what happened. */
async function withOutput(body: () => Promise<void>): Promise<void> {
  if (setupError !== undefined) throw setupError;
  try {
    await body();
  } catch (error) {
    if (error instanceof Error) error.message += `\n${cluster!.output()}`;
    throw error;
  }
}

describe("the cluster of scripts/cluster.sh: two of each role behind nginx", () => {
  test(
    "both ingesters own partitions of the topic and received data",
    () =>
      withOutput(async () => {
        expect(assignments).toHaveLength(2);
        expect(assignments.flat().sort((a, b) => a - b)).toEqual([...Array(PARTITIONS).keys()]);
        const counts = await appended(ingesterUrls());
        expect(counts[0]).toBeGreaterThan(0);
        expect(counts[1]).toBeGreaterThan(0);
        expect(total(counts)).toBe(TOTAL + JSON_LINES.length);
        // Small chunks: both already flushed full chunks to the bucket during ingestion.
        for (const url of ingesterUrls()) {
          expect(
            metricSum(await scrape(url), "sieve_ingester_chunks_flushed_total"),
          ).toBeGreaterThan(0);
        }
        // Both distributors took pushes: the entry point balances them.
        for (const url of cluster!.urls("distributor")) {
          expect(
            metricSum(await scrape(url), "sieve_distributor_lines_received_total"),
          ).toBeGreaterThan(0);
        }
        // The internal APIs are not reachable through the entry point.
        const flush = await fetch(`${entry}/flush`, { method: "POST" });
        expect(flush.status).toBe(404);
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "the delete API through the entry port is the compactor's: added, listed, cancelled",
    () =>
      withOutput(async () => {
        const url = `${entry}/loki/api/v1/delete`;
        const form = new URLSearchParams({
          query: '{app="shop"} |= "never pushed"',
          start: String(Math.floor(T0_MS / 1000)),
        });
        const added = await fetch(`${url}?${form.toString()}`, { method: "POST" });
        expect(added.status, await added.clone().text()).toBe(204);
        const id = added.headers.get("x-delete-request-id");
        expect(id).toMatch(/^[0-9a-f]{8}$/);
        const listed = (await (await fetch(url)).json()) as { request_id: string }[];
        expect(listed.map((r) => r.request_id)).toEqual([id]);
        const compactor = cluster!.urls("compactor")[0]!;
        expect(
          metricSum(await scrape(compactor), "sieve_compactor_delete_requests_received_total"),
        ).toBe(1);
        const cancelled = await fetch(`${url}?request_id=${id}`, { method: "DELETE" });
        expect(cancelled.status).toBe(204);
        expect(await (await fetch(url)).json()).toEqual([]);
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "before the flush, needle queries through the entry port answer exactly the pushed lines",
    () =>
      withOutput(async () => {
        const answers = await checkNeedles(entry, sample);
        for (const [name, answer] of answers) beforeFlush.set(name, answer);
        // The last lines of every stream were still in the ingesters' heads: some needles
        // were answered without reading a single chunk, so over HTTP from the ingesters.
        const fromIngesters = sample.filter((n) => {
          const a = answers.get(n.name)!;
          return n.expected.length > 0 && a.stats.chunksFetched === 0;
        });
        expect(fromIngesters.length).toBeGreaterThan(0);
        expect(sum(answers.values(), "ingesterLines")).toBeGreaterThan(0);
        // Early traces were in full chunks already flushed: read from S3 through a gateway.
        const early = answers.get("trace 0 of 0")!;
        expect(early.stats.chunksFetched).toBeGreaterThan(0);
        expect(early.stats.bloomGateway).not.toBeNull();
        expect(await answered(entry, "json-client")).toEqual([...JSON_LINES].sort());
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "before the flush, a metric query through the entry port counts every line once",
    () =>
      withOutput(async () => {
        const ask = async (path: string, params: Record<string, string>) => {
          const res = await fetch(`${entry}${path}?${new URLSearchParams(params).toString()}`);
          const text = await res.text();
          if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
          return JSON.parse(text) as {
            data: { result: { value?: [number, string]; values?: [number, string][] }[] };
          };
        };
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
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "after POST /flush on both ingesters, the same lines come from S3, pruned by blooms",
    () =>
      withOutput(async () => {
        await flushAll();
        for (const name of ["sieve_ingester_heads_in_memory", "sieve_ingester_chunks_flushing"]) {
          expect(await gauge(ingesterUrls(), name), name).toEqual([0, 0]);
        }
        const answers = await checkNeedles(entry, sample);
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
        // The queriers asked the gateway processes over HTTP, and nothing failed open.
        let asked = 0;
        for (const url of cluster!.urls("bloom-gateway")) {
          const metrics = await scrape(url);
          asked += metricSum(
            metrics,
            "sieve_bloom_gateway_request_duration_seconds_count",
            'status_code="200"',
          );
          expect(metricSum(metrics, "sieve_bloom_gateway_failed_open_chunks_total")).toBe(0);
        }
        expect(asked).toBeGreaterThan(0);
        for (const needle of sample) {
          expect(answers.get(needle.name)!.lines).toEqual(beforeFlush.get(needle.name)!.lines);
        }
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "with both gateway processes gone, the queriers fail open: same lines, nothing pruned",
    () =>
      withOutput(async () => {
        for (const name of ["bloom-gateway-1", "bloom-gateway-2"]) {
          cluster!.signal(name, "SIGTERM");
          await cluster!.exited(name);
        }
        const few = sample.filter((n, i) => i % 10 === 0 || n.expected.length === 0);
        const answers = await checkNeedles(entry, few);
        for (const needle of few) {
          const a = answers.get(needle.name)!;
          expect(a.lines).toEqual(beforeFlush.get(needle.name)!.lines);
          expect(a.stats.chunksPrunedByBlooms).toBe(0);
          expect(a.stats.chunksFetched).toBe(a.stats.chunksInRange);
        }
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "an ingester SIGKILLed: the other takes its partitions and replays what it had not flushed; every line answered and stored once",
    () =>
      withOutput(async () => {
        const [u1, u2] = ingesterUrls() as [string, string];
        const before = await appended([u1, u2]);
        const batch = await pushBatch(entry, "killed", "held", 400);
        acknowledged.set(batch.app, batch.texts);
        await waitFor("the batch in both ingesters' heads", async () =>
          total(await appended([u1, u2])) === total(before) + 400 ? true : undefined,
        );
        const after = await appended([u1, u2]);
        const lost = after[0]! - before[0]!;
        expect(lost).toBeGreaterThan(0);
        expect(after[1]! - before[1]!).toBeGreaterThan(0);

        cluster!.signal("ingester-1", "SIGKILL");
        await cluster!.exited("ingester-1");
        const alone = await waitFor(
          "ingester-2 to own every partition",
          () => settled(1),
          60_000,
          250,
        );
        expect(alone[0]).toEqual([...Array(PARTITIONS).keys()]);
        // ingester-2 replays ingester-1's partitions from its last commit (the flush above):
        // exactly the lines ingester-1 held unflushed, no more.
        await waitFor("ingester-2 to replay ingester-1's lines", async () =>
          (await appended([u2]))[0]! >= after[1]! + lost ? true : undefined,
        );
        expect((await appended([u2]))[0]!).toBe(after[1]! + lost);

        // `start` again brings back what is not running (ingester-1, the gateways), as
        // `docker compose up` would; the queriers ask every ingester, so answers wait for it.
        await cluster!.start();
        await waitFor("both ingesters to own partitions again", () => settled(2), 60_000, 250);
        expect(await answered(entry, "killed")).toEqual([...batch.texts].sort());
        for (const needle of sample.filter((n, i) => i % 10 === 0)) {
          expect((await needleQuery(entry, needle.id)).lines).toEqual(needle.expected);
        }
        await checkStoredOnce();
      }),
    TEST_TIMEOUT_MS + 60_000,
  );

  test(
    "an ingester paused (SIGSTOP) past the handover, then resumed: every line answered and stored once",
    () =>
      withOutput(async () => {
        const [u1, u2] = ingesterUrls() as [string, string];
        const before = await appended([u1, u2]);
        const held = await pushBatch(entry, "paused", "held", 400);
        await waitFor("the batch in both ingesters' heads", async () =>
          total(await appended([u1, u2])) === total(before) + 400 ? true : undefined,
        );
        const after = await appended([u1, u2]);
        const stale = after[0]! - before[0]!;
        expect(stale).toBeGreaterThan(0);

        // ingester-1 stops with unflushed heads, as in a long GC pause or a frozen VM.
        cluster!.signal("ingester-1", "SIGSTOP");
        let during: Batch;
        try {
          await waitFor("ingester-2 to own every partition", () => settled(1), 60_000, 250);
          await waitFor("ingester-2 to replay the paused ingester's lines", async () =>
            (await appended([u2]))[0]! >= after[1]! + stale ? true : undefined,
          );
          // The same streams go on receiving lines, now on ingester-2 alone: its heads
          // differ from the paused one's, so their chunks can never coincide.
          during = await pushBatch(entry, "paused", "during", 400, 1000);
          await waitFor("ingester-2 to take the lines pushed meanwhile", async () =>
            (await appended([u2]))[0]! >= after[1]! + stale + 400 ? true : undefined,
          );
        } finally {
          // Resumed, it still holds heads of partitions it no longer owns.
          cluster!.signal("ingester-1", "SIGCONT");
        }
        acknowledged.set("paused", [...held.texts, ...during.texts]);
        await waitFor("both ingesters to own partitions again", () => settled(2), 60_000, 250);
        await waitFor("both ingesters ready", async () => {
          const answers = await Promise.all([u1, u2].map((u) => fetch(`${u}/ready`)));
          return answers.every((r) => r.status === 200) ? true : undefined;
        });
        // Resumed, it may flush what it held (on revocation, or at the forced flush
        // below, whichever way its consumer learns it was replaced): none of it may become
        // visible a second time.
        // The handover is over once the flushes it started have landed (a line of a
        // partition handed over mid-flush is in neither owner's heads until then).
        await waitFor("the handover's flushes to land", async () =>
          total(await gauge([u1, u2], "sieve_ingester_chunks_flushing")) === 0 ? true : undefined,
        );
        const expected = [...acknowledged.get("paused")!].sort();
        // The queriers drop exact duplicates, so the answer can be exact even when a line is
        // stored twice: the bucket says whether it is.
        expect(await answered(entry, "paused"), "before the flush").toEqual(expected);
        await checkStoredOnce();
        expect(await answered(entry, "paused"), "after the flush").toEqual(expected);
      }),
    TEST_TIMEOUT_MS + 60_000,
  );

  test(
    "every metric the Grafana dashboard queries is exported by a role of the running cluster",
    () =>
      withOutput(async () => {
        const roles = ["distributor", "ingester", "bloom-gateway", "querier", "compactor"];
        const urls = roles.flatMap((role) => cluster!.urls(role));
        const types = new Map<string, string>();
        for (const url of urls)
          for (const [k, v] of metricTypes(await scrape(url))) types.set(k, v);
        const dashboard = JSON.parse(repoText("deploy/grafana/dashboards/sieve.json")) as never;
        const names = dashboardQueries(dashboard).flatMap((q) =>
          analysePromql(q.expr).metrics.map((m) => m.name),
        );
        expect(names.length).toBeGreaterThan(7);
        const missing = names.filter((name) => familyOf(types, name) === undefined);
        expect(missing).toEqual([]);
      }),
    TEST_TIMEOUT_MS,
  );

  test(
    "cluster.sh stop ends every process; status then says so",
    () =>
      withOutput(async () => {
        const processes = cluster!.state().processes;
        expect(processes.map((p) => p.name).sort()).toEqual(
          [
            "gateway",
            "compactor",
            ...["distributor", "ingester", "bloom-gateway", "querier"].flatMap((r) => [
              `${r}-1`,
              `${r}-2`,
            ]),
          ].sort(),
        );
        const stopped = await cluster!.run("stop");
        expect(stopped.code, stopped.output).toBe(0);
        // Every instance stopped on SIGTERM, none had to be killed.
        expect(stopped.output).not.toMatch(/SIGKILL/);
        for (const p of processes) expect(alive(p), p.name).toBe(false);
        expect((await cluster!.run("status")).code).toBe(1);
      }),
    TEST_TIMEOUT_MS,
  );
});
