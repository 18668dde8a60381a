/**
 * Test data for delete processing, written as an ingester flush writes it with the real
 * libraries (chunks, one bloom block per flush built by SeriesBloomBuilder, one index
 * segment per day, optionally the flush manifest that lists the segments), and the real
 * querier with the real in-process bloom gateway to read it back.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG as GATEWAY_CONFIG, BloomGateway } from "@sieve/bloom-gateway";
import type { Entry } from "@sieve/chunk";
import { encodeManifest, manifestKey } from "@sieve/ingester";
import { DEFAULT_CONFIG, createQuerier } from "@sieve/querier";
import { FsObjectStore, type ObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import { writeFlush as writeFlushAs } from "../testdata.test-helper.js";

/** A stream to write: its labels and entries. */
export interface TestStream {
  readonly labels: Record<string, string>;
  readonly entries: readonly Entry[];
}

/** A temporary FsObjectStore, removed by `close`. */
export async function tempStore(): Promise<{ store: FsObjectStore; close: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-deletes-"));
  return { store: new FsObjectStore(dir), close: () => rm(dir, { recursive: true, force: true }) };
}

let flushes = 0;

/** What {@link writeFlush} wrote. */
export interface Flushed {
  readonly segments: string[];
  readonly chunks: string[];
  readonly manifest: string | undefined;
}

/**
 * One flush of `streams` (entries cut every `perChunk`): chunks, the bloom block, the
 * flush manifest when `partition` is given (left in place: a live manifest), segments.
 * The compactor's writer (../testdata.test-helper.ts) with fixed ids and small blocks.
 */
export async function writeFlush(
  store: ObjectStore,
  tenant: string,
  streams: readonly TestStream[],
  perChunk: number,
  partition?: number,
): Promise<Flushed> {
  const flush = ++flushes;
  const id = `${String(1_700_000_000_000 + flush).padStart(15, "0")}-test-00000000`;
  let manifest: string | undefined;
  const written = await writeFlushAs(store, tenant, streams, {
    entriesPerChunk: perChunk,
    blockTargetBytes: 256,
    id,
    bloomKey: `${tenant}/blooms/test/${id}`,
    ...(partition !== undefined && {
      // A live flush as a fenced ingester leaves it: the manifest (version 2, with the
      // segments' bytes) before the segments.
      beforeSegments: async (segments, bloomKey) => {
        manifest = manifestKey(partition, 1, flush);
        await store.put(
          manifest,
          encodeManifest({
            partition,
            epoch: 1,
            seq: flush,
            writer: "test",
            createdMs: 0,
            segments: segments.map((seg) => seg.key),
            segmentBytes: segments.map((seg) => seg.bytes),
            blooms: [bloomKey],
            streams: [],
          }),
        );
      },
    }),
  });
  return { segments: written.segments, chunks: written.chunks, manifest };
}

/** An entry. */
export function entry(ts: bigint, line: string, md: Record<string, string> = {}): Entry {
  return {
    timestamp: ts,
    line,
    structuredMetadata: Object.entries(md).map(([name, value]) => ({ name, value })),
  };
}

/** The real querier (no ingesters, the real gateway, no delete cache) over `store`. */
export function querierOver(store: ObjectStore) {
  const gateway = new BloomGateway(
    GATEWAY_CONFIG,
    store,
    pino({ level: "silent" }),
    new Registry(),
  );
  return createQuerier({
    config: { ...DEFAULT_CONFIG, workers: 0, deleteRequestsCacheMs: 0 },
    store,
    chunkFilter: gateway,
  });
}

/** The lines a log query answers over [start, end), sorted; and its stats. */
export async function linesOf(
  store: ObjectStore,
  tenant: string,
  query: string,
  start: bigint,
  end: bigint,
): Promise<{ lines: string[]; pruned: number; fetched: number }> {
  const r = await querierOver(store).selectLogs({
    tenant,
    query,
    start,
    end,
    limit: 5000,
    direction: "forward",
  });
  return {
    lines: r.entries.map((e) => e.line).sort(),
    pruned: r.stats.chunksPrunedByBlooms,
    fetched: r.stats.chunksFetched,
  };
}
