import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryWatermark, memoryMayHold } from "@sieve/kit";
import { openWal } from "@sieve/queue";
import type { LocalWal } from "@sieve/queue";
import { waitFor } from "@sieve/queue/testing";
import { FsObjectStore } from "@sieve/storage";
import Fastify from "fastify";
import { Registry } from "prom-client";
import fc from "fast-check";
import { chunkMayContainToken, lineNgrams, readIndex, readSeriesBloom } from "@sieve/index";
import { decodeChunk } from "@sieve/chunk";
import { encodeQueryRequest, encodeSeriesRequest } from "@sieve/proto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { IngesterConfig } from "./config.js";
import { IngesterHttpClient } from "./client.js";
import { IngesterError } from "./errors.js";
import { lineCounts, readStore, record, testConfig, testLogger } from "./harness.test-helper.js";
import type { TestEntry } from "./harness.test-helper.js";
import { createIngester } from "./http.js";
import type { IngesterService } from "./http.js";
import { manifestKey, manifestPrefix } from "./manifest.js";
import { decodeOwnerRecord, ownerKey } from "./ownership.js";

const PARTITIONS = 4;
const T0 = BigInt(Date.now()) * 1_000_000n;

let dir: string;
let wal: LocalWal;
let store: FsObjectStore;
let registry: Registry;
let clock: number;
let service: IngesterService | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-ingester-"));
  wal = await openWal({ dir: join(dir, "wal"), partitions: PARTITIONS });
  store = new FsObjectStore(join(dir, "objects"));
  registry = new Registry();
  clock = Date.now();
  service = undefined;
});

afterEach(async () => {
  await service?.ingester.stop();
  await wal.close();
  await rm(dir, { recursive: true, force: true });
});

function start(overrides: Partial<IngesterConfig> = {}): IngesterService {
  service = createIngester({
    config: testConfig({ flushCheckIntervalMs: 3_600_000, ...overrides }),
    consumer: wal.consumer,
    store,
    logger: testLogger,
    registry,
    now: () => clock,
  });
  return service;
}

function entries(n: number, prefix: string, from = 0): TestEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    ts: T0 + BigInt((from + i) * 1000),
    line: `${prefix} line ${from + i} ${"x".repeat(150)}`,
    md: { trace_id: `${prefix}-trace-${Math.floor((from + i) / 10)}`, pod: `${prefix}-pod` },
  }));
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return m
    .filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))
    .reduce((sum, v) => sum + v.value, 0);
}

/**
 * Once everything is committed, a partition keeps at most the manifest of its newest flush
 * (the next decision drops it), and it is the one its ownership record lists.
 */
async function expectOnlyNewestManifest(p: number): Promise<void> {
  const listed = await store.list(manifestPrefix(p));
  expect(listed.length).toBeLessThanOrEqual(1);
  if (listed.length === 0) return;
  const record = decodeOwnerRecord(await store.get(ownerKey(p)));
  expect(record.flushes.map((f) => manifestKey(p, f.epoch, f.seq))).toEqual(listed);
}

describe("ingester on a write-ahead log and a file-system store", () => {
  it("consumes, serves unflushed lines, flushes on POST /flush, and the store reads back whole", async () => {
    const { ingester } = start();
    await ingester.start();
    await wal.writer.append([
      record("team-a", `{app="api", env="prod"}`, entries(50, "api"), PARTITIONS),
      record("team-a", `{app="web", env="prod"}`, entries(30, "web"), PARTITIONS),
      record("team-b", `{app="api", env="prod"}`, entries(20, "b"), PARTITIONS),
    ]);
    // Unflushed data is queryable, per tenant, within a second.
    const streams = await waitFor(
      async () => {
        const s = await ingester.query({
          tenant: "team-a",
          selector: `{env="prod"}`,
          start: T0,
          end: T0 + 10_000_000_000n,
          direction: "forward",
          limit: 0,
        });
        return s.reduce((n, x) => n + x.entries.length, 0) === 80 ? s : undefined;
      },
      { timeoutMs: 1000, what: "80 lines of team-a" },
    );
    expect(streams.map((s) => s.labels).sort()).toEqual([
      `{app="api", env="prod"}`,
      `{app="web", env="prod"}`,
    ]);
    const api = streams.find((s) => s.labels.includes("api"))!;
    expect(api.entries[0]).toEqual({
      timestamp: T0,
      line: `api line 0 ${"x".repeat(150)}`,
      structuredMetadata: { trace_id: "api-trace-0", pod: "api-pod" },
    });
    const backward = await ingester.query({
      tenant: "team-a",
      selector: `{app="api"}`,
      start: T0,
      end: T0 + 10_000_000_000n,
      direction: "backward",
      limit: 3,
    });
    expect(backward[0]!.entries.map((e) => e.timestamp)).toEqual([
      T0 + 49_000n,
      T0 + 48_000n,
      T0 + 47_000n,
    ]);
    const other = await ingester.series({ tenant: "team-b", start: T0, end: T0 + 1_000_000n });
    expect(other).toHaveLength(1);
    expect(await ingester.series({ tenant: "team-c", start: T0, end: T0 + 1_000_000n })).toEqual(
      [],
    );

    await ingester.flushAll();
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "forced" })).toBe(3);
    const a = await readStore(store, "team-a", T0 - 1n);
    expect(a.chunks).toBe(2);
    expect(a.bloomsInBlocks).toBe(2);
    expect(a.falseNegatives).toEqual([]);
    const counts = lineCounts(a);
    expect(counts.size).toBe(80);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    const b = await readStore(store, "team-b", T0 - 1n);
    expect(lineCounts(b).size).toBe(20);
    // Committed past everything, older manifests gone, nothing left in memory.
    for (let p = 0; p < PARTITIONS; p++) expect(wal.consumer.committed(p)).toBe(wal.endOffset(p));
    for (let p = 0; p < PARTITIONS; p++) await expectOnlyNewestManifest(p);
    expect(
      await ingester.query({
        tenant: "team-a",
        selector: `{env="prod"}`,
        start: T0,
        end: T0 + 10_000_000_000n,
        direction: "forward",
        limit: 0,
      }),
    ).toEqual([]);
  });

  it("tells the query workers how old its oldest entry in memory is: lowered as entries arrive, none once flushed", async () => {
    const { ingester } = start();
    const held = (end: bigint): boolean => memoryMayHold(ingester.memory, end);
    await ingester.start();
    // Recovered, holding nothing: no range can find a line in memory.
    expect(held(MemoryWatermark.NONE)).toBe(false);
    await wal.writer.append([record("t", `{app="a"}`, entries(5, "a", 10), PARTITIONS)]);
    await waitFor(() => (held(MemoryWatermark.NONE) ? true : undefined), {
      timeoutMs: 1000,
      what: "the watermark to move",
    });
    // The oldest entry is at T0 + 10 µs: a range ending there (exclusive) skips memory.
    expect(held(T0 + 10_000n)).toBe(false);
    expect(held(T0 + 10_001n)).toBe(true);
    // An older entry, to another stream, lowers it.
    await wal.writer.append([record("t", `{app="b"}`, entries(1, "b", 2), PARTITIONS)]);
    await waitFor(() => (held(T0 + 2_001n) ? true : undefined), {
      timeoutMs: 1000,
      what: "the older entry to lower the watermark",
    });
    expect(held(T0 + 2_000n)).toBe(false);
    await ingester.flushAll();
    expect(held(MemoryWatermark.NONE)).toBe(false);
    expect(lineCounts(await readStore(store, "t", T0 - 1n)).size).toBe(6);
  });

  it("counts a record cut from its head at once as in memory until its flush is written", async () => {
    // Writes wait until released: the cut chunk stays in memory, between cut and flush.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const gated = Object.create(store) as FsObjectStore;
    gated.put = async (key: string, data: Uint8Array) => {
      await released;
      return store.put(key, data);
    };
    service = createIngester({
      config: testConfig({ flushCheckIntervalMs: 3_600_000, chunkMaxUncompressedBytes: 4096 }),
      consumer: wal.consumer,
      store: gated,
      logger: testLogger,
      registry,
      now: () => clock,
    });
    const { ingester } = service;
    await ingester.start();
    // 50 entries of ~170 bytes: the head passes 4 KiB within this record and is cut.
    await wal.writer.append([record("t", `{app="big"}`, entries(50, "big", 7), PARTITIONS)]);
    await waitFor(
      async () =>
        (await metric("sieve_ingester_entries_appended_total")) === 50 ? true : undefined,
      { timeoutMs: 1000, what: "the record appended" },
    );
    expect(memoryMayHold(ingester.memory, T0 + 7_001n)).toBe(true);
    expect(memoryMayHold(ingester.memory, T0 + 7_000n)).toBe(false);
    release();
    await ingester.flushAll();
    expect(memoryMayHold(ingester.memory, MemoryWatermark.NONE)).toBe(false);
    expect(lineCounts(await readStore(store, "t", T0 - 1n)).size).toBe(50);
  });

  it("a flush covers every record acknowledged before it, consumed or not yet", async () => {
    const { ingester } = start();
    await ingester.start();
    const recs = Array.from({ length: 40 }, (_, i) =>
      record("t", `{app="a${i % 8}"}`, entries(25, `r${i}`), PARTITIONS),
    );
    // Appended in many writes, then flushed at once: the consumer is still behind.
    for (let i = 0; i < recs.length; i += 4) await wal.writer.append(recs.slice(i, i + 4));
    await ingester.flushAll();
    const counts = lineCounts(await readStore(store, "t", T0 - 1n));
    expect(counts.size).toBe(1000);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    for (let p = 0; p < PARTITIONS; p++) expect(wal.consumer.committed(p)).toBe(wal.endOffset(p));
  });

  it("a flush whose records cannot be consumed in time answers flush_behind, naming the partition", async () => {
    // The log says one more record than it can deliver: as a partition whose delivery stopped.
    const consumer = Object.create(wal.consumer) as typeof wal.consumer;
    consumer.positions = async () => {
      const real = await wal.consumer.positions();
      return new Map(
        [...real].map(([p, pos]) => [p, p === 1 ? { ...pos, end: pos.end + 1 } : pos]),
      );
    };
    service = createIngester({
      config: testConfig({ flushCheckIntervalMs: 3_600_000, flushAllWaitMs: 200 }),
      consumer,
      store,
      logger: testLogger,
      registry,
      now: () => clock,
    });
    await service.ingester.start();
    const t0 = performance.now();
    const refused = await service.ingester.flushAll().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(IngesterError);
    expect((refused as IngesterError).code).toBe("flush_behind");
    expect((refused as IngesterError).status).toBe(503);
    expect((refused as Error).message).toContain("partition 1 at offset 0 of 1 after 200 ms");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it("an entry that fills the symbol table starts the next chunk, and its bloom", async () => {
    const { ingester } = start({
      chunkTargetBytes: 256 * 1024 * 1024,
      chunkMaxUncompressedBytes: 1024 * 1024 * 1024,
    });
    await ingester.start();
    // 1 MiB metadata values, each distinct: the 64 MiB symbol table fills at about the 64th.
    const big = "x".repeat(1024 * 1024);
    for (let i = 0; i < 70; i++) {
      const e = { ts: T0 + BigInt(i) * 1000n, line: `line ${i}`, md: { blob: `${i}:${big}` } };
      await wal.writer.append([record("t", `{app="symbols"}`, [e], PARTITIONS)]);
    }
    await ingester.flushAll();
    const contents = await readStore(store, "t", T0 - 1n);
    expect(contents.chunks).toBe(2);
    expect(lineCounts(contents).size).toBe(70);
    // Every entry's metadata is in its chunk's bloom, the one that started the second too.
    expect(contents.bloomsInBlocks).toBe(2);
    expect(contents.falseNegatives.map((f) => f.slice(0, 120))).toEqual([]);
  });

  it("cuts full heads, drops exact duplicates, accepts out-of-order entries", async () => {
    const { ingester } = start({ chunkTargetBytes: 4096, chunkBlockBytes: 1024 });
    await ingester.start();
    const all = entries(200, "ooo");
    const shuffled = [...all].sort(() => Math.random() - 0.5);
    const recs = [];
    for (let i = 0; i < shuffled.length; i += 10) {
      const batch = shuffled.slice(i, i + 10);
      // Each record repeats its first entry: an exact duplicate in the same head.
      recs.push(record("t", `{app="ooo"}`, [...batch, batch[0]!], PARTITIONS));
    }
    // The first records again (a client retry).
    await wal.writer.append(recs);
    await wal.writer.append(recs.slice(0, 3));
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 23, {
      what: "23 records",
    });
    // Full heads are flushed in the background, without waiting for POST /flush.
    await waitFor(
      async () => (await metric("sieve_ingester_chunks_flushed_total", { reason: "full" })) > 0,
      { what: "a full chunk flushed" },
    );
    await ingester.flushAll();
    const contents = await readStore(store, "t", T0 - 1n);
    const counts = lineCounts(contents);
    expect(counts.size).toBe(200);
    // Duplicates are dropped within a head; a retry landing after a cut may store a line twice,
    // which the querier's exact-duplicate drop hides (as in Loki).
    expect(contents.chunks).toBeGreaterThanOrEqual(2);
    const retried = new Set(recs.length > 0 ? shuffled.slice(0, 30).map((e) => e.line) : []);
    for (const [line, n] of counts) if (n > 1) expect(retried.has(line)).toBe(true);
    expect(contents.falseNegatives).toEqual([]);
    expect(
      await metric("sieve_ingester_entries_dropped_total", { reason: "duplicate" }),
    ).toBeGreaterThanOrEqual(20);
  });

  it("keeps every chunk of a stream cut within one millisecond, whatever their sizes", async () => {
    // Chunks of one stream and time range whose sections have the same sizes had the same
    // key (their CRC-32C: see chunkChecksum), and each flushed overwrote the one before. An
    // OpenTelemetry SDK stamps logs in milliseconds: the OTLP test lost 300 lines so, 1 run
    // in 15. Here each record fills a chunk of its own, one letter's lines at one timestamp.
    const { ingester } = start({ chunkTargetBytes: 64 });
    await ingester.start();
    const letters = ["a", "b", "c", "d", "e", "f"];
    await wal.writer.append(
      letters.map((letter) =>
        record(
          "t",
          `{app="ms"}`,
          Array.from({ length: 50 }, (_, i) => ({
            ts: T0,
            line: letter.repeat(120),
            md: { step: String(i), order: letter },
          })),
          PARTITIONS,
        ),
      ),
    );
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 6, {
      what: "6 records",
    });
    await ingester.flushAll();
    const contents = await readStore(store, "t", T0 - 1n);
    expect(contents.chunks).toBe(6);
    expect(new Set(contents.series[0]!.chunks.map((c) => c.key)).size).toBe(6);
    const orders = contents.streams
      .values()
      .next()
      .value!.entries.map((e) => e.structuredMetadata.find((m) => m.name === "order")!.value);
    expect([...new Set(orders)].sort()).toEqual(letters);
    expect(orders).toHaveLength(300);
  });

  it("flushes idle and too-old heads on the periodic check", async () => {
    const { ingester } = start({ chunkIdleMs: 60_000, chunkMaxAgeMs: 120_000 });
    await ingester.start();
    await wal.writer.append([record("t", `{app="idle"}`, entries(5, "idle"), PARTITIONS)]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 1);
    clock += 60_000;
    await wal.writer.append([record("t", `{app="old"}`, entries(5, "old"), PARTITIONS)]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 2);
    await ingester.tick();
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "idle" })).toBe(1);
    // Keep "old" busy so it is not idle, and pass its max age.
    for (let i = 0; i < 3; i++) {
      clock += 40_000;
      await wal.writer.append([record("t", `{app="old"}`, entries(1, "old", 10 + i), PARTITIONS)]);
      await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 3 + i);
    }
    await ingester.tick();
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "max_age" })).toBe(1);
    expect(lineCounts(await readStore(store, "t", T0 - 1n)).size).toBe(13);
  });

  it("keeps heads within the memory budget: the largest are cut (reason memory), nothing lost", async () => {
    const budget = 256 * 1024;
    const { ingester } = start({ memoryBudgetBytes: budget });
    await ingester.start();
    // 40 streams × 200 lines of ~190 bytes: ~1.5 MB of heads against a 256 KiB budget.
    const recs = [];
    for (let round = 0; round < 4; round++) {
      for (let s = 0; s < 40; s++) {
        recs.push(record("t", `{app="m${s}"}`, entries(50, `m${s}`, round * 50), PARTITIONS));
      }
    }
    await wal.writer.append(recs);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 160, {
      what: "160 records",
    });
    await waitFor(
      async () => (await metric("sieve_ingester_chunks_flushed_total", { reason: "memory" })) > 0,
      { what: "chunks flushed for memory" },
    );
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "full" })).toBe(0);
    // Measured at most a sixteenth of the budget after it was passed, and cut to 3/4 of it.
    expect(await metric("sieve_ingester_head_bytes")).toBeLessThanOrEqual(budget);
    await ingester.flushAll();
    const counts = lineCounts(await readStore(store, "t", T0 - 1n));
    expect(counts.size).toBe(40 * 200);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it("cuts a head at chunkMaxUncompressedBytes, however well it compresses", async () => {
    const { ingester } = start({ chunkMaxUncompressedBytes: 8 * 1024 });
    await ingester.start();
    // The same line again and again compresses ~20×: only the raw bound cuts it. A head is
    // measured after each record, as against chunkTargetBytes.
    const same = Array.from({ length: 400 }, (_, i) => ({
      ts: T0 + BigInt(i),
      line: "the same line ".repeat(10),
    }));
    const recs = [];
    for (let i = 0; i < same.length; i += 10) {
      recs.push(record("t", `{app="raw"}`, same.slice(i, i + 10), PARTITIONS));
    }
    await wal.writer.append(recs);
    await waitFor(
      async () => (await metric("sieve_ingester_chunks_flushed_total", { reason: "full" })) >= 5,
      { what: "five full chunks" },
    );
    await ingester.flushAll();
    const contents = await readStore(store, "t", T0 - 1n);
    expect([...contents.streams.values()][0]!.entries).toHaveLength(400);
  });

  it("flushes with reason shutdown on stop, and commits", async () => {
    const { ingester } = start();
    await ingester.start();
    await wal.writer.append([record("t", `{app="s"}`, entries(7, "s"), PARTITIONS)]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 1);
    await ingester.stop();
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "shutdown" })).toBe(1);
    expect(lineCounts(await readStore(store, "t", T0 - 1n)).size).toBe(7);
    for (let p = 0; p < PARTITIONS; p++) {
      expect(wal.consumer.committed(p)).toBe(wal.endOffset(p));
      await expectOnlyNewestManifest(p);
    }
  });

  it("serves over HTTP: the contract's routes, tenant check, /ready, /metrics, /flush", async () => {
    const svc = start();
    await svc.ingester.start();
    const app = Fastify();
    await app.register(svc.plugin());
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      await wal.writer.append([
        record("team-a", `{app="api"}`, entries(10, "h"), PARTITIONS),
        record("team-b", `{app="api"}`, entries(4, "hb"), PARTITIONS),
      ]);
      await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 2);
      const client = new IngesterHttpClient({ urls: [url, url] });
      const got = await client.query({
        tenant: "team-a",
        selector: `{app="api"}`,
        start: T0,
        end: T0 + 1_000_000_000n,
        direction: "forward",
        limit: 5,
      });
      // Two URLs (the same ingester twice): answers are concatenated.
      expect(got).toHaveLength(2);
      expect(got[0]!.entries.map((e) => e.line)).toEqual(entries(5, "h").map((e) => e.line));
      expect(got[0]!.entries[0]!.structuredMetadata).toEqual({
        trace_id: "h-trace-0",
        pod: "h-pod",
      });
      // With the query, the pipeline filters before the limit: the last line is found though
      // it is not among the first 5 (Loki's ingesters also run the query's pipeline).
      const needle = await client.query({
        tenant: "team-a",
        selector: `{app="api"} |= "h line 9 " | pod="h-pod"`,
        start: T0,
        end: T0 + 1_000_000_000n,
        direction: "forward",
        limit: 5,
      });
      expect(needle[0]!.entries.map((e) => e.line)).toEqual([entries(10, "h")[9]!.line]);
      const series = await client.series({ tenant: "team-b", start: T0, end: T0 + 1_000_000_000n });
      expect(series.map((s) => s.labels)).toEqual([`{app="api"}`, `{app="api"}`]);

      const post = (path: string, tenant: string, body: Uint8Array) =>
        fetch(`${url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/x-protobuf", "x-scope-orgid": tenant },
          body,
        });
      const query = { start: 0n, end: 1n, direction: "forward", limit: 0 } as const;
      const mismatch = await post(
        "/ingester/v1/query",
        "team-b",
        encodeQueryRequest({ tenant: "team-a", selector: `{app="api"}`, ...query }),
      );
      expect(mismatch.status).toBe(400);
      expect(((await mismatch.json()) as { code: string }).code).toBe("tenant_mismatch");
      const bad = await post(
        "/ingester/v1/query",
        "team-a",
        encodeQueryRequest({ tenant: "team-a", selector: `{app=`, ...query }),
      );
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { code: string }).code).toBe("invalid_selector");
      const badNumber = await post(
        "/ingester/v1/series",
        "team-a",
        encodeSeriesRequest({ tenant: "team-a", start: 1n, end: 0n }),
      );
      expect(badNumber.status).toBe(400);

      expect((await fetch(`${url}/ready`)).status).toBe(200);
      const flush = await fetch(`${url}/flush`, { method: "POST" });
      expect(flush.status).toBe(204);
      // 204 means durable: the store has it now.
      expect(lineCounts(await readStore(store, "team-a", T0 - 1n)).size).toBe(10);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toContain(`sieve_ingester_chunks_flushed_total{reason="forced"} 2`);
      expect(metrics).toMatch(/sieve_ingester_bloom_bytes_total \d+/);
      expect(metrics).toContain("sieve_ingester_flush_duration_seconds_bucket");
      expect(metrics).toContain("sieve_ingester_heads_in_memory 0");
    } finally {
      await app.close();
    }
  });

  it("bounds a query: too many entries is a typed error", async () => {
    const { ingester } = start({ maxEntriesPerQuery: 10 });
    await ingester.start();
    await wal.writer.append([record("t", `{app="big"}`, entries(11, "big"), PARTITIONS)]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 1);
    const req = {
      tenant: "t",
      selector: `{app="big"}`,
      start: T0,
      end: T0 + 1_000_000_000n,
      direction: "forward" as const,
      limit: 0,
    };
    await expect(ingester.query(req)).rejects.toMatchObject({ code: "too_many_entries" });
    await expect(ingester.query({ ...req, limit: 10 })).resolves.toHaveLength(1);
    await expect(
      ingester.query({ ...req, selector: 'sum(rate({a="b"}[1m]))' }),
    ).rejects.toBeInstanceOf(IngesterError);
  });

  it("sizes each tenant's blooms for its own false-positive rate", async () => {
    const { ingester } = start({ overrides: { strict: { falsePositiveRate: 0.0001 } } });
    await ingester.start();
    // The same lines and ids for both tenants: 400 distinct trace ids.
    await wal.writer.append([
      record("loose", `{app="a"}`, entries(4000, "fp"), PARTITIONS),
      record("strict", `{app="a"}`, entries(4000, "fp"), PARTITIONS),
    ]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 2);
    await ingester.flushAll();
    const bloomBytes = async (tenant: string): Promise<number> => {
      const contents = await readStore(store, tenant, T0 - 1n);
      expect(contents.falseNegatives).toEqual([]);
      const bloom = contents.series[0]!.chunks[0]!.bloom;
      if (bloom.kind !== "block") throw new Error(`${tenant}: no bloom`);
      return bloom.length;
    };
    const loose = await bloomBytes("loose");
    const strict = await bloomBytes("strict");
    // Bits per token: -ln(fp)/ln²2, 9.6 at 0.01 and 19.2 at 0.0001.
    expect(strict / loose).toBeGreaterThan(1.6);
    expect(strict / loose).toBeLessThan(2.4);
  });

  it("turns blooms off per tenant and records them as missing", async () => {
    const { ingester } = start({ overrides: { quiet: { bloomsEnabled: false } } });
    await ingester.start();
    await wal.writer.append([record("quiet", `{app="q"}`, entries(5, "q"), PARTITIONS)]);
    await waitFor(async () => (await metric("sieve_ingester_records_consumed_total")) === 1);
    await ingester.flushAll();
    const contents = await readStore(store, "quiet", T0 - 1n);
    expect(contents.chunks).toBe(1);
    expect(contents.bloomsInBlocks).toBe(0);
    expect(contents.series[0]!.chunks[0]!.bloom).toEqual({ kind: "missing", reason: "disabled" });
  });

  it("no false negatives at chunk level on random data, with n-grams for one tenant", async () => {
    const { ingester } = start({
      chunkTargetBytes: 1024,
      chunkBlockBytes: 256,
      overrides: { grams: { ngramLength: 3, ngramSkip: 1 } },
    });
    await ingester.start();
    const word = fc.string({ minLength: 1, maxLength: 8 });
    const entryArb = fc.record({
      line: fc.string({ minLength: 0, maxLength: 80 }),
      md: fc.dictionary(fc.constantFrom("trace_id", "user", "pod", "ünï"), word, { maxKeys: 3 }),
      dt: fc.integer({ min: -50, max: 1000 }),
    });
    const run = fc.record({
      streams: fc.array(
        fc.array(fc.array(entryArb, { minLength: 1, maxLength: 12 }), {
          minLength: 1,
          maxLength: 8,
        }),
        {
          minLength: 1,
          maxLength: 4,
        },
      ),
      grams: fc.boolean(),
    });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(run, async ({ streams, grams }) => {
        const tenant = grams ? "grams" : `plain-${n}`;
        n++;
        const recs = [];
        let ts = T0;
        for (let s = 0; s < streams.length; s++) {
          for (const batch of streams[s]!) {
            const es: TestEntry[] = batch.map((e) => {
              ts += BigInt(e.dt);
              return { ts, line: e.line, md: e.md };
            });
            recs.push(record(tenant, `{run="${n}", s="${s}"}`, es, PARTITIONS));
          }
        }
        const consumed = await metric("sieve_ingester_records_consumed_total");
        await wal.writer.append(recs);
        await waitFor(
          async () =>
            (await metric("sieve_ingester_records_consumed_total")) === consumed + recs.length,
        );
        await ingester.flushAll();
        const contents = await readStore(store, tenant, T0 - 100_000n);
        expect(contents.falseNegatives).toEqual([]);
        const settings = grams ? { length: 3, skip: 1 } : undefined;
        for (const series of await readIndex(store, tenant, T0 - 100_000n, T0 + 10_000_000_000n)) {
          for (const c of series.chunks) {
            if (c.bloom.kind !== "block") continue;
            const bloom = await readSeriesBloom(store, c.bloom, series.fingerprint);
            if (bloom.status !== "ok") throw new Error(bloom.status);
            // The index and the bloom's own record both say which n-grams it holds.
            expect(c.bloom.ngrams).toEqual(settings);
            expect(bloom.ngrams).toEqual(settings);
            if (!grams) continue;
            const covered = { ...c.ref, prefixed: c.prefixed };
            for (const e of decodeChunk(await store.get(c.key)).entries) {
              for (const g of lineNgrams(e.line, { length: 3, skip: 1 })) {
                expect(chunkMayContainToken(bloom, covered, g), `${c.key} ${g}`).toBe(true);
              }
            }
          }
        }
      }),
      { numRuns: 15 },
    );
    expect(await metric("sieve_ingester_chunks_flushed_total", { reason: "full" })).toBeGreaterThan(
      0,
    );
  });
});
