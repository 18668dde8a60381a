/**
 * Shared by the ingester's tests: queue records as the distributor writes them, and a
 * checker that reads a store the way a querier does (index segments, then every chunk
 * and bloom they point to) and fails on any visible chunk without its object.
 */
import { decodeChunk } from "@sieve/chunk";
import type { Entry } from "@sieve/chunk";
import { chunkMayContain, readIndex, readSeriesBloom } from "@sieve/index";
import type { IndexedSeries } from "@sieve/index";
import { fingerprint, fingerprintKey, labelsString, parseLabels, partitionOf } from "@sieve/labels";
import { encodeQueueRecord } from "@sieve/proto";
import type { OutgoingRecord } from "@sieve/queue";
import type { ObjectStore } from "@sieve/storage";
import pino from "pino";
import { DEFAULT_CONFIG } from "./config.js";
import type { IngesterConfig } from "./config.js";

/** A silent logger for tests (set LOG_LEVEL=debug to see the ingester's logs). */
export const testLogger = pino({ level: process.env.LOG_LEVEL ?? "silent" });

/** A config for tests: tiny thresholds, given overrides. */
export function testConfig(overrides: Partial<IngesterConfig> = {}): IngesterConfig {
  return {
    ...DEFAULT_CONFIG,
    instanceId: "test-ingester",
    flushCheckIntervalMs: 50,
    ...overrides,
  };
}

/** One entry to push. */
export interface TestEntry {
  readonly ts: bigint;
  readonly line: string;
  readonly md?: Readonly<Record<string, string>>;
}

/** A queue record of one stream, as the distributor writes it, on the stream's partition. */
export function record(
  tenant: string,
  labels: string,
  entries: readonly TestEntry[],
  partitions: number,
): OutgoingRecord {
  const canonical = labelsString(parseLabels(labels));
  const fp = fingerprint(canonical);
  return {
    partition: partitionOf(fp, partitions),
    key: fingerprintKey(fp),
    value: encodeQueueRecord({
      tenant,
      labels: canonical,
      fingerprint: fp,
      entries: entries.map((e) => ({
        timestampNs: e.ts,
        line: e.line,
        structuredMetadata: Object.entries(e.md ?? {}).map(([name, value]) => ({ name, value })),
      })),
    }),
  };
}

/** A stored stream as read back: its labels and every entry of every visible chunk. */
export interface StoredStream {
  readonly labels: string;
  readonly entries: Entry[];
}

/** What {@link readStore} found. */
export interface StoreContents {
  readonly series: IndexedSeries[];
  /** By fingerprint (hex). */
  readonly streams: Map<string, StoredStream>;
  readonly chunks: number;
  readonly bloomsInBlocks: number;
  /** `name=value` pairs whose chunk's bloom said "absent" (must stay empty). */
  readonly falseNegatives: string[];
}

const FAR_FUTURE = BigInt(Date.now() + 86_400_000) * 1_000_000n;

/**
 * Reads everything a querier would see for `tenant` between `from` and a day from now: the
 * merged index, every chunk (decoded with its checksum checked; a missing object throws)
 * and every bloom in a block, testing every metadata pair of every entry against its
 * chunk's bloom.
 */
export async function readStore(
  store: ObjectStore,
  tenant: string,
  from: bigint,
): Promise<StoreContents> {
  const series = await readIndex(store, tenant, from, FAR_FUTURE);
  const streams = new Map<string, StoredStream>();
  let chunks = 0;
  let bloomsInBlocks = 0;
  const falseNegatives: string[] = [];
  for (const s of series) {
    const entries: Entry[] = [];
    for (const c of s.chunks) {
      const bytes = await store.get(c.key); // not_found here = a visible chunk without its object
      const decoded = decodeChunk(bytes, c.ref.checksum);
      chunks++;
      if (decoded.entries.length !== c.entries) {
        throw new Error(`${c.key}: ${decoded.entries.length} entries, index says ${c.entries}`);
      }
      entries.push(...decoded.entries);
      if (c.bloom.kind !== "block") continue;
      bloomsInBlocks++;
      const bloom = await readSeriesBloom(store, c.bloom, s.fingerprint);
      if (bloom.status !== "ok") throw new Error(`${c.bloom.key}: bloom ${bloom.status}`);
      const covered = {
        from: c.ref.from,
        through: c.ref.through,
        checksum: c.ref.checksum,
        prefixed: c.prefixed,
      };
      for (const e of decoded.entries) {
        for (const { name, value } of e.structuredMetadata) {
          if (!chunkMayContain(bloom, covered, name, value))
            falseNegatives.push(`${c.key} ${name}=${value}`);
        }
      }
    }
    streams.set(s.fingerprint.toString(16), { labels: s.labels, entries });
  }
  return { series, streams, chunks, bloomsInBlocks, falseNegatives };
}

/** Every stored line of a tenant, with how many times each is stored. */
export function lineCounts(contents: StoreContents): Map<string, number> {
  const counts = new Map<string, number>();
  for (const s of contents.streams.values()) {
    for (const e of s.entries) counts.set(e.line, (counts.get(e.line) ?? 0) + 1);
  }
  return counts;
}
