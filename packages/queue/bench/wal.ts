/**
 * `pnpm --filter @sieve/queue bench`: append throughput of the write-ahead log (and of
 * Kafka when KAFKA_BROKERS is set) for batches of 1000 records of ~200 bytes, the shape
 * of one push request of 1000 lines. MB/s counts record bytes (key + value).
 * Prints a table of medians over the runs and writes every run as JSON under bench/results/.
 *
 *   pnpm --filter @sieve/queue bench [--runs 3] [--budget-ms 3000] [--dir .cache/bench-wal]
 *
 * Scenarios: one caller appending batch after batch (each append waits for its fsync),
 * and 8 concurrent callers (group commit shares each fsync). The log lives under --dir,
 * on the repository's disk by default: /tmp may be tmpfs, where fsync costs nothing.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KafkaQueueWriter, openWal } from "../src/index.js";
import type { OutgoingRecord, QueueWriter } from "../src/index.js";

const root = new URL("../../../", import.meta.url);
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    "budget-ms": { type: "string", default: "3000" },
    dir: { type: "string", default: new URL(".cache/bench-wal", root).pathname },
  },
});
const RUNS = Number(values.runs);
const BUDGET_MS = Number(values["budget-ms"]);
const PARTITIONS = 4;
const BATCH = 1000;
const RECORD_BYTES = 200;

/** `count` batches of BATCH records (8-byte key, 192-byte value), partition by key. */
function batches(count: number): OutgoingRecord[][] {
  return Array.from({ length: count }, (_, b) =>
    Array.from({ length: BATCH }, (_, i) => {
      const key = Buffer.alloc(8);
      key.writeUInt32BE(b * BATCH + i, 4);
      const value = Buffer.alloc(RECORD_BYTES - 8, 97 + (i % 26));
      return { partition: (b * BATCH + i) % PARTITIONS, key, value };
    }),
  );
}

interface Run {
  readonly appendsPerSec: number;
  readonly recordsPerSec: number;
  readonly mbPerSec: number;
  readonly syncsPerAppend?: number;
}

/** Appends from `callers` concurrent loops until the budget is spent. */
async function measure(
  writer: QueueWriter,
  callers: number,
  work: OutgoingRecord[][],
): Promise<Run> {
  let appends = 0;
  const start = performance.now();
  const deadline = start + BUDGET_MS;
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let i = c; performance.now() < deadline; i += callers) {
        await writer.append(work[i % work.length]!);
        appends++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return {
    appendsPerSec: appends / seconds,
    recordsPerSec: (appends * BATCH) / seconds,
    mbPerSec: (appends * BATCH * RECORD_BYTES) / seconds / 1e6,
  };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const work = batches(64);
const scenarios: {
  name: string;
  callers: number;
  open: () => Promise<{ writer: QueueWriter; syncs?: () => number; close: () => Promise<void> }>;
}[] = [];
for (const callers of [1, 8]) {
  scenarios.push({
    name: `wal, ${callers} caller${callers > 1 ? "s" : ""}`,
    callers,
    open: async () => {
      const dir = join(values.dir, `run-${callers}`);
      rmSync(dir, { recursive: true, force: true });
      const wal = await openWal({ dir, partitions: PARTITIONS });
      return {
        writer: wal.writer,
        syncs: () => wal.stats.syncs / wal.stats.appends,
        close: async () => {
          await wal.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  });
}
const brokers = process.env.KAFKA_BROKERS;
if (brokers !== undefined && brokers !== "") {
  for (const callers of [1, 8]) {
    scenarios.push({
      name: `kafka, ${callers} caller${callers > 1 ? "s" : ""}`,
      callers,
      open: async () => {
        const writer = await KafkaQueueWriter.connect({
          brokers: brokers.split(","),
          topic: `sieve-bench-${Date.now()}-${callers}`,
          partitions: PARTITIONS,
        });
        return { writer, close: () => writer.close() };
      },
    });
  }
}

const runs = new Map<string, Run[]>(scenarios.map((s) => [s.name, []]));
for (let r = 0; r < RUNS; r++) {
  for (const s of scenarios) {
    const opened = await s.open();
    // One untimed append first, so the run measures steady state.
    await opened.writer.append(work[0]!);
    const run = await measure(opened.writer, s.callers, work);
    runs.get(s.name)!.push({ ...run, ...(opened.syncs ? { syncsPerAppend: opened.syncs() } : {}) });
    await opened.close();
    process.stderr.write(".");
  }
}
process.stderr.write("\n");

const rows = scenarios.map((s) => {
  const rs = runs.get(s.name)!;
  return {
    name: s.name,
    appendsPerSec: median(rs.map((r) => r.appendsPerSec)),
    recordsPerSec: median(rs.map((r) => r.recordsPerSec)),
    mbPerSec: median(rs.map((r) => r.mbPerSec)),
    syncsPerAppend:
      rs[0]?.syncsPerAppend === undefined ? undefined : median(rs.map((r) => r.syncsPerAppend!)),
  };
});

console.log(
  `\nqueue append: batches of ${BATCH} records of ${RECORD_BYTES} bytes over ${PARTITIONS} partitions, median of ${RUNS} runs of ${BUDGET_MS} ms, Node ${process.version}\n`,
);
console.log("| writer | appends/s | records/s | MB/s | fsyncs per partition append |");
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.appendsPerSec.toFixed(1)} | ${Math.round(r.recordsPerSec)} | ${r.mbPerSec.toFixed(1)} | ${r.syncsPerAppend === undefined ? "" : r.syncsPerAppend.toFixed(2)} |`,
  );
}

const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`queue-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "queue",
      batch: BATCH,
      recordBytes: RECORD_BYTES,
      partitions: PARTITIONS,
      runs: RUNS,
      machine,
      medians: rows,
      all: Object.fromEntries(runs),
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
