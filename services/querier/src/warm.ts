/**
 * A querier made ready for queries before it takes them (Loki's `query_ready_num_days`):
 * the index segments of the last days, decoded into the segment cache, and the bloom
 * blocks they name loaded into a gateway that runs in this thread. Without it the first
 * needle after a start read and decoded them itself (75 ms where a later one took 3).
 */
import type { BloomLocation, IndexedSeries, SegmentChunk } from "@sieve/index";
import type { BloomTest } from "@sieve/logql";
import type { FilterSeries } from "@sieve/proto";
import { DEFAULT_QUERY_LIMITS } from "./config.js";
import { QueryContext, type QuerierParts } from "./context.js";
import { readSeries } from "./plan.js";

const DAY_NS = 86_400_000_000_000n;

/** Series a warm-up sends to the gateway in one request (under its `maxSeriesPerRequest`). */
const SERIES_PER_REQUEST = 1000;

/** A test every bloom is read for and no series passes but by a false positive. */
/** One series' chunks with one bloom location, as a gateway is sent them. */
type Sent = FilterSeries & { chunks: SegmentChunk[] };

const READ_EVERY_BLOOM: BloomTest = { kind: "kv", name: "__sieve_warm__", value: "" };

/** What a warm-up loaded. */
export interface WarmReport {
  readonly tenants: number;
  readonly series: number;
  readonly chunks: number;
  /** Bloom blocks loaded (0 without a gateway in this thread). */
  readonly bloomBlocks: number;
  readonly ms: number;
}

/** Options of {@link warmQuerier}. */
export interface WarmOptions {
  /** The index of the last `days` × 24 hours (the segments of every day they touch). */
  readonly days: number;
  /** Bytes of bloom records (their index lengths) to load at most, newest blocks first. */
  readonly bloomBytes: number;
  /** Stops the warm-up; what it did not load is read at first use. */
  readonly signal?: AbortSignal;
  readonly nowMs?: number;
}

/**
 * Loads the index of the last `days` × 24 hours of each of `tenants` (a name that holds
 * no index loads nothing), then, when the querier's gateway runs in this thread, their bloom blocks,
 * newest first, up to `bloomBytes`. Reads fail as a query's do: the caller decides.
 */
export async function warmQuerier(
  parts: QuerierParts,
  tenants: readonly string[],
  options: WarmOptions,
): Promise<WarmReport> {
  const started = performance.now();
  const nowNs = BigInt(options.nowMs ?? Date.now()) * 1_000_000n;
  const from = nowNs - BigInt(options.days) * DAY_NS;
  const limits = { ...DEFAULT_QUERY_LIMITS, queryTimeoutMs: 0 };
  const blocks = new Map<string, { bytes: number; series: FilterSeries[] }>();
  let series = 0;
  let chunks = 0;
  for (const tenant of tenants) {
    options.signal?.throwIfAborted();
    const ctx = new QueryContext(limits);
    const found: IndexedSeries[] = await readSeries(parts, tenant, from, nowNs + DAY_NS, ctx);
    series += found.length;
    for (const s of found) {
      chunks += s.chunks.length;
      const byBloom = new Map<BloomLocation, Sent>();
      for (const c of s.chunks) {
        if (c.bloom.kind !== "block") continue;
        let sent = byBloom.get(c.bloom);
        if (sent === undefined) {
          sent = { fingerprint: s.fingerprint, labels: s.labels, bloom: c.bloom, chunks: [] };
          byBloom.set(c.bloom, sent);
          const key = `${tenant}\n${c.bloom.key}`;
          let block = blocks.get(key);
          if (block === undefined) blocks.set(key, (block = { bytes: 0, series: [] }));
          block.bytes += c.bloom.length;
          block.series.push(sent);
        }
        sent.chunks.push(c.listed);
      }
    }
  }
  let bloomBlocks = 0;
  if (parts.chunkFilter.answersWithSentRecords === true) {
    // Block names start with their flush's time: the newest first, while they fit.
    const newest = [...blocks].sort(([a], [b]) => (lastSegment(a) < lastSegment(b) ? 1 : -1));
    let budget = options.bloomBytes;
    const byTenant = new Map<string, FilterSeries[]>();
    for (const [key, block] of newest) {
      if (block.bytes > budget) break;
      budget -= block.bytes;
      bloomBlocks++;
      const tenant = key.slice(0, key.indexOf("\n"));
      byTenant.set(tenant, [...(byTenant.get(tenant) ?? []), ...block.series]);
    }
    for (const [tenant, all] of byTenant) {
      for (let i = 0; i < all.length; i += SERIES_PER_REQUEST) {
        options.signal?.throwIfAborted();
        await parts.chunkFilter.filterChunkRefs({
          tenant,
          from,
          through: nowNs + DAY_NS,
          test: READ_EVERY_BLOOM,
          series: all.slice(i, i + SERIES_PER_REQUEST),
        });
      }
    }
  }
  return {
    tenants: tenants.length,
    series,
    chunks,
    bloomBlocks,
    ms: performance.now() - started,
  };
}

function lastSegment(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}
