import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryWatermark, memoryMayHold } from "@sieve/kit";
import { openWal } from "@sieve/queue";
import type { LocalWal } from "@sieve/queue";
import { waitFor } from "@sieve/queue/testing";
import { FsObjectStore } from "@sieve/storage";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { IngesterConfig } from "./config.js";
import { IngesterError } from "./errors.js";
import { lineCounts, readStore, record, testConfig, testLogger } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";
import { createIngesterWorkers } from "./http.js";
import type { IngesterWorkersService } from "./http.js";

const PARTITIONS = 4;
const T0 = BigInt(Date.now()) * 1_000_000n;
const END = T0 + 3_600_000_000_000n;

let dir: string;
let wal: LocalWal;
let service: IngesterWorkersService | undefined;
let fatal: Error[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-ingest-workers-"));
  wal = await openWal({ dir: join(dir, "wal"), partitions: PARTITIONS });
  service = undefined;
  fatal = [];
});

afterEach(async () => {
  await service?.ingester.stop();
  await wal.close();
  await rm(dir, { recursive: true, force: true });
});

function start(overrides: Partial<IngesterConfig> = {}): IngesterWorkersService {
  service = createIngesterWorkers({
    config: testConfig({ workers: 2, flushCheckIntervalMs: 3_600_000, ...overrides }),
    consumer: wal.consumer,
    store: { backend: "filesystem", dir: join(dir, "objects") },
    logger: testLogger,
    registry: new Registry(),
    onFatal: (error) => fatal.push(error),
  });
  return service;
}

/** `n` entries of stream `name`, from `from`, a trace id shared by 10 lines. */
function entries(name: string, n: number, from = 0): TestEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    ts: T0 + BigInt((from + i) * 1000),
    line: `${name} line ${from + i} ${"x".repeat(100)}`,
    md: { trace_id: `${name}-${Math.floor((from + i) / 10)}` },
  }));
}

const STREAMS = Array.from({ length: 16 }, (_, i) => `svc-${i}`);

async function pushAll(n: number, from = 0): Promise<void> {
  await wal.writer.append(
    STREAMS.map((s) => record("team-a", `{service="${s}"}`, entries(s, n, from), PARTITIONS)),
  );
}

async function linesInMemory(ingester: IngesterWorkersService["ingester"]): Promise<number> {
  const streams = await ingester.query({
    tenant: "team-a",
    selector: `{service=~"svc-.*"}`,
    start: T0,
    end: END,
    direction: "forward",
    limit: 0,
  });
  return streams.reduce((n, s) => n + s.entries.length, 0);
}

function metricValue(text: string, name: string, label = ""): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) {
      if (label === "" || line.includes(label)) sum += Number(line.split(" ").pop());
    }
  }
  return sum;
}

describe("the ingester on worker threads", () => {
  it("spreads partitions, answers from every worker, flushes each line once", async () => {
    const started = start();
    const { ingester } = started;
    const metricsText = (): Promise<string> => started.metricsText();
    await ingester.start();
    expect(ingester.notReadyReason).toBeUndefined();
    await pushAll(50);
    await waitFor(async () => (await linesInMemory(ingester)) === 16 * 50 || undefined, {
      timeoutMs: 5000,
      what: "every line in memory",
    });
    // Both workers hold streams: each answers for its own partitions.
    const text = await metricsText();
    expect(metricValue(text, "sieve_ingester_entries_appended_total")).toBe(16 * 50);
    expect(metricValue(text, "sieve_ingester_records_consumed_total")).toBe(16);
    // Each worker's own heap, apart: both hold streams, so both hold more than nothing.
    for (const worker of ["0", "1"]) {
      const heap = (kind: string): number =>
        metricValue(text, "sieve_ingester_worker_heap_bytes", `worker="${worker}",kind="${kind}"`);
      expect(heap("used")).toBeGreaterThan(1_000_000);
      expect(heap("total")).toBeGreaterThanOrEqual(heap("used"));
    }

    const series = await ingester.series({ tenant: "team-a", start: T0, end: END });
    expect(series.map((s) => s.labels).sort()).toEqual(
      STREAMS.map((s) => `{service="${s}"}`).sort(),
    );

    // Each worker writes its own watermark slot: both hold lines from T0 on.
    const slots = new BigInt64Array(ingester.memory);
    expect(slots.length).toBe(2);
    for (const slot of slots) expect(slot).toBeGreaterThanOrEqual(T0);
    expect(memoryMayHold(ingester.memory, T0 + 1n)).toBe(true);

    await ingester.flushAll();
    // Flushed: no range can find a line in either worker's memory.
    expect(memoryMayHold(ingester.memory, MemoryWatermark.NONE)).toBe(false);
    const flushed = await metricsText();
    expect(metricValue(flushed, "sieve_ingester_chunks_flushed_total", 'reason="forced"')).toBe(16);
    await ingester.stop();
    const stored = lineCounts(
      await readStore(new FsObjectStore(join(dir, "objects")), "team-a", T0),
    );
    expect(stored.size).toBe(16 * 50);
    expect([...stored.values()].every((n) => n === 1)).toBe(true);
    expect(fatal).toEqual([]);
  });

  it("a restart over the same log stores nothing twice and loses nothing", async () => {
    const first = start();
    await first.ingester.start();
    await pushAll(20);
    await waitFor(async () => (await linesInMemory(first.ingester)) === 16 * 20 || undefined, {
      timeoutMs: 5000,
      what: "first lines in memory",
    });
    await first.ingester.flushAll();
    await pushAll(20, 20);
    await waitFor(async () => (await linesInMemory(first.ingester)) === 16 * 20 || undefined, {
      timeoutMs: 5000,
      what: "second lines in memory",
    });
    // A graceful stop flushes and commits the second batch (reason shutdown).
    await first.ingester.stop();
    service = undefined;

    const second = start();
    await second.ingester.start();
    await pushAll(20, 40);
    await waitFor(async () => (await linesInMemory(second.ingester)) === 16 * 20 || undefined, {
      timeoutMs: 5000,
      what: "third lines in memory",
    });
    await second.ingester.stop();
    const stored = lineCounts(
      await readStore(new FsObjectStore(join(dir, "objects")), "team-a", T0),
    );
    expect(stored.size).toBe(16 * 60);
    expect([...stored.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  });

  it("a flush covers every record acknowledged before it, through the workers' port", async () => {
    const { ingester } = start();
    await ingester.start();
    for (let i = 0; i < 10; i++) await pushAll(20, i * 20);
    await ingester.flushAll();
    const counts = lineCounts(
      await readStore(new FsObjectStore(join(dir, "objects")), "team-a", T0 - 1n),
    );
    expect(counts.size).toBe(STREAMS.length * 200);
    for (let p = 0; p < PARTITIONS; p++) expect(wal.consumer.committed(p)).toBe(wal.endOffset(p));
  });

  it("keeps the ingester's error codes across the thread", async () => {
    const { ingester } = start();
    await ingester.start();
    const error = await ingester
      .query({
        tenant: "team-a",
        selector: `{service=`,
        start: T0,
        end: END,
        direction: "forward",
        limit: 10,
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IngesterError);
    expect(error).toMatchObject({ code: "invalid_selector", status: 400 });
  });

  it("a query whose caller went away is `canceled`", async () => {
    const { ingester } = start();
    await ingester.start();
    const abort = new AbortController();
    abort.abort(new Error("client went away"));
    const error = await ingester
      .query(
        {
          tenant: "team-a",
          selector: `{service="svc-1"}`,
          start: T0,
          end: END,
          direction: "forward",
          limit: 10,
        },
        { signal: abort.signal },
      )
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "canceled", status: 499 });
  });
});
