/**
 * The ingester process the crash tests SIGKILL: `node --import tsx crash.test-child.ts`,
 * configured by environment variables, tiny flush thresholds so that kills land inside
 * flushes. Prints `listening <url>` once ready.
 *
 *   CRASH_QUEUE=wal    CRASH_WAL_DIR: opens the write-ahead log, serves POST /append
 *                      (records as JSON, answered 204 once durable: "acknowledged")
 *   CRASH_QUEUE=kafka  KAFKA_BROKERS, CRASH_TOPIC, CRASH_GROUP: a group consumer
 *   CRASH_STORE=fs     CRASH_STORE_DIR
 *   CRASH_STORE=s3     S3_ENDPOINT, CRASH_BUCKET (credentials from the environment)
 *   CRASH_PARTITIONS   partition count
 *   CRASH_WORKERS      ingester worker threads (default 0: the ingester on the main thread)
 *   CRASH_INSTANCE_ID  the ingester's instanceId (default test-ingester)
 *   CRASH_CHUNK_IDLE_MS, CRASH_CHUNK_MAX_AGE_MS, CRASH_CHUNK_TARGET_BYTES  when heads
 *                      are cut (default 40 ms, 150 ms, 1 KB: kills land inside flushes;
 *                      larger ones keep lines in the heads)
 * SIGTERM stops gracefully (flush, commit) and exits 0.
 */
import Fastify from "fastify";
import { Registry } from "prom-client";
import { KafkaQueueConsumer, openWal } from "@sieve/queue";
import type { LocalWal, QueueConsumer } from "@sieve/queue";
import { openStore } from "@sieve/storage";
import type { ObjectStore, StoreConfig } from "@sieve/storage";
import { record, testConfig, testLogger } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";
import { createIngester, createIngesterWorkers } from "./http.js";

const env = process.env;
const partitions = Number(env.CRASH_PARTITIONS ?? "2");
let wal: LocalWal | undefined;
let consumer: QueueConsumer;
if (env.CRASH_QUEUE === "kafka") {
  consumer = new KafkaQueueConsumer({
    brokers: (env.KAFKA_BROKERS ?? "").split(","),
    topic: env.CRASH_TOPIC!,
    groupId: env.CRASH_GROUP!,
    partitions,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 500,
  });
} else {
  wal = await openWal({ dir: env.CRASH_WAL_DIR!, partitions, maxBatchRecords: 20 });
  consumer = wal.consumer;
}
const storeConfig: StoreConfig =
  env.CRASH_STORE === "s3"
    ? { backend: "s3", bucket: env.CRASH_BUCKET!, endpoint: env.S3_ENDPOINT!, forcePathStyle: true }
    : { backend: "filesystem", dir: env.CRASH_STORE_DIR! };
const store: ObjectStore = openStore(storeConfig);
const registry = new Registry();
const workers = Number(env.CRASH_WORKERS ?? "0");
const config = testConfig({
  workers,
  ...(env.CRASH_INSTANCE_ID !== undefined && { instanceId: env.CRASH_INSTANCE_ID }),
  chunkTargetBytes: Number(env.CRASH_CHUNK_TARGET_BYTES ?? "1024"),
  chunkBlockBytes: 512,
  chunkIdleMs: Number(env.CRASH_CHUNK_IDLE_MS ?? "40"),
  chunkMaxAgeMs: Number(env.CRASH_CHUNK_MAX_AGE_MS ?? "150"),
  flushCheckIntervalMs: 20,
  flushWriteConcurrency: 2,
});
const service =
  workers > 0
    ? createIngesterWorkers({
        config,
        consumer,
        store: storeConfig,
        logger: testLogger,
        registry,
        onFatal: (error) => {
          process.stderr.write(`ingester worker died: ${error.message}\n`);
          process.exit(1);
        },
      })
    : createIngester({ config, consumer, store, logger: testLogger, registry });
const app = Fastify();
await app.register(service.plugin());
if (wal !== undefined) {
  const writer = wal.writer;
  app.post("/append", async (request, reply) => {
    const body = request.body as {
      tenant: string;
      labels: string;
      entries: { ts: string; line: string; md: Record<string, string> }[];
    }[];
    const records = body.map((s) =>
      record(
        s.tenant,
        s.labels,
        s.entries.map((e): TestEntry => ({ ts: BigInt(e.ts), line: e.line, md: e.md })),
        partitions,
      ),
    );
    await writer.append(records);
    return reply.code(204).send();
  });
}
await service.ingester.start();
const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`listening ${url}\n`);
process.on("SIGTERM", () => {
  void (async () => {
    await service.ingester.stop();
    await wal?.close();
    await app.close();
    process.exit(0);
  })();
});
