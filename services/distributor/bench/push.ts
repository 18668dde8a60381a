/**
 * `pnpm bench:push`: lines/s and MB/s (raw line bytes) through HTTP into the queue, for
 * protobuf+snappy and JSON bodies and OTLP protobuf (`/otlp/v1/logs`, the same lines as
 * one resource a stream with its labels as attributes), into the write-ahead log and, when KAFKA_BROKERS is set,
 * into Kafka. Each request is a batch of 1000 lines of about 200 bytes with `trace_id`
 * structured metadata, in 4 streams; `--connections` keep-alive connections over loopback
 * push as fast as answers come back (the client is a child process). "MB per server CPU-s"
 * divides the line bytes by this process's CPU time (all its threads: event loop, fsync,
 * GC): on a shared machine it moves far less than MB/s. Prints a table of medians over the
 * runs and writes every run as JSON under bench/results/.
 *
 *   pnpm bench:push [--runs 3] [--seconds 5] [--connections 8] [--threads <decode workers>]
 *
 * `--threads 0` prepares every push on the event loop (the path before decode workers).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fork } from "node:child_process";
import { once } from "node:events";
import { logLevel } from "kafkajs";
import { pino } from "pino";
import { Registry } from "prom-client";
import { compress } from "snappyjs";
import { encodeOtlpLogsProtobuf, encodePushRequest } from "@sieve/proto";
import type { OtlpLogs, PushRequest } from "@sieve/proto";
import { KafkaQueueWriter, openWal } from "@sieve/queue";
import type { QueueWriter } from "@sieve/queue";
import { DEFAULT_CONFIG, type DistributorConfig } from "../src/config.js";
import { createDistributorServer } from "../src/http.js";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    seconds: { type: "string", default: "5" },
    connections: { type: "string", default: "8" },
    threads: { type: "string", default: String(DEFAULT_CONFIG.decodeThreads) },
  },
});
const RUNS = Number(values.runs);
const DURATION_MS = Number(values.seconds) * 1000;
const CONNECTIONS = Number(values.connections);
const LINES = 1000;
const STREAMS = 4;
const PARTITIONS = 4;
const BODIES = 16; // distinct bodies cycled through, so streams and lines vary

// Limits out of the way: the bench measures the path, not the rate limiter.
const config: DistributorConfig = {
  ...DEFAULT_CONFIG,
  decodeThreads: Number(values.threads),
  limits: {
    ...DEFAULT_CONFIG.limits,
    ingestionRateBytes: 1e12,
    ingestionBurstBytes: 1e12,
    perStreamRateBytes: 1e12,
    perStreamBurstBytes: 1e12,
    // BENCH_DISCOVERY=off: without Loki's service name and level discovery, to weigh them.
    ...(process.env.BENCH_DISCOVERY === "off" && {
      discoverServiceName: [],
      discoverLogLevels: false,
    }),
  },
};

/** One batch: STREAMS streams of LINES/STREAMS lines of ~200 bytes, with a trace_id each. */
function batch(b: number): {
  streams: { labels: Record<string, string>; lines: [bigint, string, string][] }[];
  lineBytes: number;
} {
  const now = BigInt(Date.now()) * 1_000_000n;
  let lineBytes = 0;
  const streams = Array.from({ length: STREAMS }, (_, s) => {
    const lines = Array.from({ length: LINES / STREAMS }, (_, i): [bigint, string, string] => {
      const trace = randomBytes(16).toString("hex");
      let line = `level=info ts=${new Date().toISOString()} caller=server.go:${100 + i} msg="request served" method=GET path=/api/v1/items/${b * 1000 + i} status=200 duration_ms=${(i * 7) % 500} trace=${trace.slice(0, 8)} `;
      line += "x".repeat(Math.max(0, 200 - line.length));
      lineBytes += Buffer.byteLength(line);
      return [now + BigInt(b * LINES + s * 1000 + i), line, trace];
    });
    return { labels: { app: "bench", stream: String((b * STREAMS + s) % 64), env: "prod" }, lines };
  });
  return { streams, lineBytes };
}

const batches = Array.from({ length: BODIES }, (_, b) => batch(b));
const lineBytesPerRequest = batches.reduce((n, b) => n + b.lineBytes, 0) / BODIES;

function protobufBody(b: ReturnType<typeof batch>): Uint8Array {
  const request: PushRequest = {
    streams: b.streams.map((s) => ({
      labels: `{${Object.entries(s.labels)
        .map(([k, v]) => `${k}="${v}"`)
        .join(", ")}}`,
      entries: s.lines.map(([ns, line, trace]) => ({
        timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
        line,
        structuredMetadata: [{ name: "trace_id", value: trace }],
      })),
    })),
  };
  return compress(encodePushRequest(request));
}

function jsonBody(b: ReturnType<typeof batch>): Uint8Array {
  return Buffer.from(
    JSON.stringify({
      streams: b.streams.map((s) => ({
        stream: s.labels,
        values: s.lines.map(([ns, line, trace]) => [String(ns), line, { trace_id: trace }]),
      })),
    }),
  );
}

/** The batch as an OTLP request: a resource a stream, `service.name` and indexed k8s names. */
function otlpBody(b: ReturnType<typeof batch>): Uint8Array {
  const logs: OtlpLogs = {
    resourceLogs: b.streams.map((s) => ({
      resource: {
        attributes: [
          { key: "service.name", value: { kind: "string", value: s.labels.app! } },
          { key: "k8s.pod.name", value: { kind: "string", value: s.labels.stream! } },
          { key: "k8s.namespace.name", value: { kind: "string", value: s.labels.env! } },
        ],
        droppedAttributesCount: 0,
      },
      scopeLogs: [
        {
          scope: { name: "bench", version: "", attributes: [], droppedAttributesCount: 0 },
          logRecords: s.lines.map(([ns, line, trace]) => ({
            timeUnixNano: ns,
            observedTimeUnixNano: 0n,
            severityNumber: 9,
            severityText: "",
            body: { kind: "string", value: line },
            attributes: [],
            droppedAttributesCount: 0,
            flags: 0,
            traceId: Uint8Array.from(Buffer.from(trace, "hex")),
            spanId: new Uint8Array(0),
            eventName: "",
          })),
        },
      ],
    })),
  };
  return encodeOtlpLogsProtobuf(logs);
}

const PUSH = { path: "/loki/api/v1/push", ok: 204 };
const formats = [
  {
    name: "protobuf+snappy",
    contentType: "application/x-protobuf",
    bodies: batches.map(protobufBody),
    ...PUSH,
  },
  { name: "json", contentType: "application/json", bodies: batches.map(jsonBody), ...PUSH },
  {
    name: "otlp protobuf",
    contentType: "application/x-protobuf",
    bodies: batches.map(otlpBody),
    path: "/otlp/v1/logs",
    ok: 200,
  },
];

interface Queue {
  name: string;
  open(): Promise<{ writer: QueueWriter; close(): Promise<void> }>;
}
const queues: Queue[] = [
  {
    name: "wal",
    async open() {
      const dir = mkdtempSync(join(tmpdir(), "sieve-bench-push-"));
      const wal = await openWal({ dir, partitions: PARTITIONS });
      return {
        writer: wal.writer,
        async close() {
          await wal.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
];
const brokers = process.env.KAFKA_BROKERS;
if (brokers !== undefined && brokers !== "") {
  queues.push({
    name: "kafka",
    async open() {
      const writer = await KafkaQueueWriter.connect({
        brokers: brokers.split(","),
        topic: `sieve-bench-push-${Date.now()}`,
        partitions: PARTITIONS,
        logLevel: logLevel.NOTHING,
      });
      return { writer, close: () => writer.close() };
    },
  });
} else {
  console.log("KAFKA_BROKERS is not set: the Kafka column is skipped (sh scripts/kafka.sh start).");
}

interface Run {
  mbPerCpuSecond: number;
  linesPerSec: number;
  mbPerSec: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  failed: number;
}

interface ClientResult {
  ok: number;
  failed: number;
  firstError: string;
  elapsedMs: number;
  p50Ms: number;
  p99Ms: number;
}

async function measure(queue: Queue, format: (typeof formats)[number]): Promise<Run> {
  const opened = await queue.open();
  const app = await createDistributorServer({
    config,
    queue: opened.writer,
    logger: pino({ level: "warn" }),
    registry: new Registry(),
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  try {
    const client = fork(new URL("./push-client.mjs", import.meta.url), {
      serialization: "advanced",
    });
    client.send({
      url,
      contentType: format.contentType,
      path: format.path,
      ok: format.ok,
      bodies: format.bodies,
      connections: CONNECTIONS,
      durationMs: DURATION_MS,
    });
    const cpuBefore = process.cpuUsage();
    const [result] = (await once(client, "message")) as [ClientResult];
    const cpu = process.cpuUsage(cpuBefore);
    await once(client, "exit");
    if (result.firstError !== "")
      console.log(`  ${queue.name} ${format.name}: ${result.firstError}`);
    const seconds = result.elapsedMs / 1000;
    return {
      linesPerSec: (result.ok * LINES) / seconds,
      mbPerSec: (result.ok * lineBytesPerRequest) / seconds / 1e6,
      requestsPerSec: result.ok / seconds,
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      failed: result.failed,
      // This process is only the server (the client is another process): its CPU time,
      // all threads, is the push path's cost, and a load-independent figure.
      mbPerCpuSecond: (result.ok * lineBytesPerRequest) / ((cpu.user + cpu.system) / 1e6) / 1e6,
    };
  } finally {
    await app.close();
    await opened.close();
  }
}

const runs = new Map<string, Run[]>();
for (let r = 0; r < RUNS; r++) {
  for (const queue of queues) {
    for (const format of formats) {
      const key = `${queue.name} ${format.name}`;
      const run = await measure(queue, format);
      runs.set(key, [...(runs.get(key) ?? []), run]);
      process.stderr.write(".");
    }
  }
}
process.stderr.write("\n");

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const rows = [...runs].map(([name, rs]) => ({
  name,
  linesPerSec: median(rs.map((r) => r.linesPerSec)),
  mbPerSec: median(rs.map((r) => r.mbPerSec)),
  requestsPerSec: median(rs.map((r) => r.requestsPerSec)),
  p50Ms: median(rs.map((r) => r.p50Ms)),
  p99Ms: median(rs.map((r) => r.p99Ms)),
  mbPerCpuSecond: median(rs.map((r) => r.mbPerCpuSecond)),
  failed: rs.reduce((n, r) => n + r.failed, 0),
}));

console.log(
  `\nbatches of ${LINES} lines (${(lineBytesPerRequest / LINES).toFixed(0)} B each, trace_id metadata) in ${STREAMS} streams, ${CONNECTIONS} connections, ${RUNS} runs of ${DURATION_MS / 1000} s, medians\n`,
);
console.log(
  "| queue, body | lines/s | MB/s (raw lines) | MB per server CPU-s | requests/s | p50 ms | p99 ms | failed |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const r of rows) {
  console.log(
    `| ${r.name} | ${Math.round(r.linesPerSec).toLocaleString("en")} | ${r.mbPerSec.toFixed(1)} | ${r.mbPerCpuSecond.toFixed(1)} | ${r.requestsPerSec.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.failed} |`,
  );
}

const root = new URL("../../../", import.meta.url);
const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`push-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "push",
      linesPerRequest: LINES,
      lineBytes: lineBytesPerRequest / LINES,
      streamsPerRequest: STREAMS,
      connections: CONNECTIONS,
      seconds: DURATION_MS / 1000,
      runs: RUNS,
      kafka: brokers !== undefined && brokers !== "",
      machine,
      medians: rows,
      all: Object.fromEntries(runs),
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
