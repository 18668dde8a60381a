// `GET /loki/api/v1/patterns` end to end: lines of a few templates pushed into a real `sieve
// all` (ingester workers, patterns crossing their ports and the query workers' ports) and
// into a cluster (distributor, two ingesters on Kafka and MinIO, a querier asking both over
// HTTP), then exactly those patterns, with their levels and their line counts per step.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { Cluster, waitFor as waitForCluster } from "./cluster.test-helper.js";
import { spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

/**
 * A 10-minute boundary 20 to 30 minutes ago: steps (at multiples of themselves since the
 * epoch, as Loki's) of 1 and 2 minutes then start on it.
 */
const T0_MS = Math.floor((Date.now() - 20 * 60_000) / 600_000) * 600_000;
const T0_S = T0_MS / 1000;
/** Lines every 5 s for 3 minutes. */
const TICKS = 36;

const INFO = 'level=info msg="request served" path=<_> status=200 took_ms=<_>';
const ERROR = 'level=error msg="payment declined" order=<_> reason=insufficient_funds';
const SSH = "Accepted publickey for deploy from <_> port <_> ssh2";

const ns = (ms: number, extra = 0): string => String(BigInt(ms) * 1_000_000n + BigInt(extra));

/** The push bodies: pod a has both logfmt templates, pod b the info one, app other plain lines. */
function pushBody(): string {
  const a: [string, string][] = [];
  const b: [string, string][] = [];
  const other: [string, string][] = [];
  for (let k = 0; k < TICKS; k++) {
    const t = T0_MS + k * 5000;
    const info = `level=info msg="request served" path=/api/orders/${(k * 7919) % 10_007} status=200 took_ms=${(k * 31) % 250}`;
    a.push([ns(t), info]);
    b.push([ns(t, 1), info]);
    if (k % 3 === 0) {
      a.push([
        ns(t, 2),
        `level=error msg="payment declined" order=${1000 + k} reason=insufficient_funds`,
      ]);
    }
    if (k % 6 === 0) {
      other.push([ns(t), `Accepted publickey for deploy from 10.0.0.${k} port ${40_000 + k} ssh2`]);
    }
  }
  return JSON.stringify({
    streams: [
      { stream: { app: "pat", pod: "a" }, values: a },
      { stream: { app: "pat", pod: "b" }, values: b },
      { stream: { app: "other" }, values: other },
    ],
  });
}

interface PatternsAnswer {
  status: string;
  data: { pattern: string; level: string; samples: [number, number][] }[];
}

async function patterns(base: string, params: Record<string, string>): Promise<Response> {
  const url = new URL("/loki/api/v1/patterns", base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return fetch(url);
}

async function patternsJson(base: string, params: Record<string, string>): Promise<PatternsAnswer> {
  const res = await patterns(base, params);
  const text = await res.text();
  if (!res.ok) throw new Error(`patterns: ${res.status} ${text}`);
  return JSON.parse(text) as PatternsAnswer;
}

const RANGE = { start: ns(T0_MS - 60_000), end: ns(T0_MS + 5 * 60_000) };

/** The whole answer of `{app="pat"}` by minute, as the pushes make it. */
const EXPECTED_PAT: PatternsAnswer = {
  status: "success",
  data: [
    {
      pattern: ERROR,
      level: "error",
      samples: [
        [T0_S, 4],
        [T0_S + 60, 4],
        [T0_S + 120, 4],
      ],
    },
    {
      pattern: INFO,
      level: "info",
      samples: [
        [T0_S, 24],
        [T0_S + 60, 24],
        [T0_S + 120, 24],
      ],
    },
  ],
};

async function push(base: string): Promise<void> {
  const res = await fetch(new URL("/loki/api/v1/push", base), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: pushBody(),
  });
  expect(res.status).toBe(204);
}

/** Waits until `{app="pat"}` has every line counted, then checks each answer. */
async function checkAnswers(base: string, wait: typeof waitFor): Promise<void> {
  const all = await wait(
    async () => {
      const a = await patternsJson(base, { query: '{app="pat"}', ...RANGE, step: "60s" });
      const lines = a.data.flatMap((d) => d.samples).reduce((n, [, c]) => n + c, 0);
      return lines >= 2 * TICKS + TICKS / 3 ? a : undefined;
    },
    "every line counted in the patterns",
    60_000,
  );
  expect(all).toEqual(EXPECTED_PAT);

  // One stream: only its own lines.
  expect(await patternsJson(base, { query: '{app="pat", pod="b"}', ...RANGE, step: "60" })).toEqual(
    {
      status: "success",
      data: [
        {
          pattern: INFO,
          level: "info",
          samples: [
            [T0_S, 12],
            [T0_S + 60, 12],
            [T0_S + 120, 12],
          ],
        },
      ],
    },
  );

  // Plain lines, no level in them; steps of 2 minutes, and a range that cuts the last one.
  expect(
    await patternsJson(base, {
      query: '{app="other"}',
      start: ns(T0_MS),
      end: ns(T0_MS + 120_000),
      step: "2m",
    }),
  ).toEqual({
    status: "success",
    data: [{ pattern: SSH, level: "unknown", samples: [[T0_S, 4]] }],
  });

  // No stream matches: an empty list, as Loki answers.
  expect(await patternsJson(base, { query: '{app="none"}', ...RANGE })).toEqual({
    status: "success",
    data: [],
  });

  // Refusals in Loki's words.
  const noQuery = await patterns(base, { ...RANGE });
  expect(noQuery.status).toBe(400);
  expect(await noQuery.text()).toMatch(/^parse error/);
  const pipeline = await patterns(base, { query: '{app="pat"} |= "x"', ...RANGE });
  expect(pipeline.status).toBe(400);
  const badStep = await patterns(base, { query: '{app="pat"}', ...RANGE, step: "-1" });
  expect(badStep.status).toBe(400);
  expect(await badStep.text()).toContain("zero or negative query resolution step");
}

describe("patterns in sieve all", () => {
  let dir: string;
  let sieve: SieveProcess | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sieve-patterns-"));
    sieve = await spawnSieve(["all", "--data-dir", join(dir, "data")], {
      SIEVE_INGESTER_BLOOMS_PATTERNS_ENABLED: "true",
    });
  }, 60_000);

  afterAll(async () => {
    await sieve?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("learns the templates pushed, with their levels and counts per step", async () => {
    await push(sieve!.url);
    await checkAnswers(sieve!.url, waitFor);
  }, 90_000);

  it("learns nothing with patterns off (the default)", async () => {
    const off = await spawnSieve(["all", "--data-dir", join(dir, "off")]);
    try {
      await push(off.url);
      // The lines are in (a log query sees them), and no pattern is learned.
      await waitFor(async () => {
        const url = new URL("/loki/api/v1/query_range", off.url);
        url.searchParams.set("query", '{app="pat"}');
        url.searchParams.set("start", RANGE.start);
        url.searchParams.set("end", RANGE.end);
        url.searchParams.set("limit", "1000");
        const body = (await (await fetch(url)).json()) as {
          data: { result: { values: unknown[] }[] };
        };
        const n = body.data.result.reduce((a, s) => a + s.values.length, 0);
        return n === 2 * TICKS + TICKS / 3 ? true : undefined;
      }, "the lines to be queryable");
      expect(await patternsJson(off.url, { query: '{app="pat"}', ...RANGE })).toEqual({
        status: "success",
        data: [],
      });
    } finally {
      await off.stop();
    }
  }, 90_000);
});

describe("patterns in a cluster (querier → two ingesters over HTTP)", () => {
  const cluster = new Cluster();
  const run = randomBytes(4).toString("hex");
  let dir: string | undefined;
  let querier: string;
  let distributor: string;
  let setupError: Error | undefined;

  beforeAll(async () => {
    try {
      const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
      const endpoint = process.env.S3_ENDPOINT ?? "";
      if (brokers[0] === "" || endpoint === "") throw new Error("KAFKA_BROKERS and S3_ENDPOINT");
      dir = await mkdtemp(join(tmpdir(), "sieve-patterns-cluster-"));
      const bucket = `sieve-patterns-${run}`;
      const region = process.env.AWS_REGION ?? "us-east-1";
      const s3 = new S3Client({ endpoint, forcePathStyle: true, region });
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      s3.destroy();
      const topic = `sieve-patterns-${run}`;
      const kafka = new Kafka({
        clientId: "sieve-patterns-test",
        brokers,
        logLevel: logLevel.NOTHING,
      });
      const admin = kafka.admin();
      await admin.connect();
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic, numPartitions: 4, replicationFactor: 1 }],
        });
      } finally {
        await admin.disconnect();
      }
      const config = join(dir, "cluster.yaml");
      await writeFile(
        config,
        toYaml({
          storage: { backend: "s3", s3: { bucket, endpoint, region, forcePathStyle: true } },
          queue: { backend: "kafka", partitions: 4, kafka: { brokers, topic, groupId: topic } },
        }),
      );
      const [d, i1, i2] = await Promise.all([
        cluster.start({ target: "distributor", configFile: config }),
        cluster.start({
          target: "ingester",
          name: "ingester-1",
          configFile: config,
          env: {
            SIEVE_INGESTER_INSTANCE_ID: "ingester-1",
            SIEVE_INGESTER_BLOOMS_PATTERNS_ENABLED: "true",
          },
        }),
        cluster.start({
          target: "ingester",
          name: "ingester-2",
          configFile: config,
          env: {
            SIEVE_INGESTER_INSTANCE_ID: "ingester-2",
            SIEVE_INGESTER_BLOOMS_PATTERNS_ENABLED: "true",
          },
        }),
      ]);
      distributor = d.url;
      const q = await cluster.start({
        target: "querier",
        configFile: config,
        env: { SIEVE_INGESTER_URLS: `${i1.url},${i2.url}` },
      });
      querier = q.url;
      // Pushing before both ingesters own partitions would move partitions after the push:
      // the new owner learns only what it replays (patterns are not handed over).
      await waitForCluster(
        "both ingesters to own partitions",
        async () => {
          const a = kafka.admin();
          await a.connect();
          try {
            const group = (await a.describeGroups([topic])).groups[0];
            if (group?.state !== "Stable" || group.members.length !== 2) return undefined;
            const owned = group.members.map(
              (m) =>
                AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic]
                  ?.length ?? 0,
            );
            return owned.every((n) => n > 0) ? true : undefined;
          } finally {
            await a.disconnect();
          }
        },
        60_000,
        250,
      );
      for (const i of [i1, i2]) {
        await waitForCluster("the ingesters ready", async () =>
          (await fetch(`${i.url}/ready`)).ok ? true : undefined,
        );
      }
    } catch (error) {
      setupError = new Error(`setup failed: ${(error as Error).message}\n${cluster.output()}`);
    }
  }, 150_000);

  afterAll(async () => {
    await cluster.stopAll(5_000);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("merges the ingesters' patterns into the same answer", async () => {
    if (setupError !== undefined) throw setupError;
    await push(distributor);
    try {
      await checkAnswers(querier, waitFor);
    } catch (error) {
      if (error instanceof Error) error.message += `\n${cluster.output()}`;
      throw error;
    }
  }, 120_000);
});
