/**
 * A querier made ready for queries before it takes them (Loki's `query_ready_num_days`):
 * the index segments of the last days, decoded into the segment cache, and the bloom
 * blocks they name read into a gateway that runs in this thread. Without it the first
 * needle after a start read and decoded them itself (88 ms of execution where a later one
 * took 1–3). It loads through the caches alone, not through a query: the query path's
 * code and counters see only queries.
 */
import type { QuerierParts } from "./context.js";
import { cachedSegment, listedSegments } from "./plan.js";

const DAY_NS = 86_400_000_000_000n;

/** What a warm-up loaded. */
export interface WarmReport {
  readonly tenants: number;
  readonly segments: number;
  readonly series: number;
  /** Bloom blocks read (0 without a gateway in this thread). */
  readonly bloomBlocks: number;
  readonly ms: number;
}

/** Options of {@link warmQuerier}. */
export interface WarmOptions {
  /** The index of the last `days` × 24 hours (the segments of every day they touch). */
  readonly days: number;
  /** Bytes of bloom blocks to hold at most, newest blocks first. */
  readonly bloomBytes: number;
  /** Stops the warm-up; what it did not load is read at first use. */
  readonly signal?: AbortSignal;
  readonly nowMs?: number;
}

/**
 * Loads the index of the last `days` × 24 hours of each of `tenants` (a name that holds
 * no index loads nothing), then, when the querier's gateway can load ahead, the bloom
 * blocks those segments name, newest first, up to `bloomBytes`. Store failures throw.
 */
export async function warmQuerier(
  parts: QuerierParts,
  tenants: readonly string[],
  options: WarmOptions,
): Promise<WarmReport> {
  const started = performance.now();
  const nowNs = BigInt(options.nowMs ?? Date.now()) * 1_000_000n;
  const from = nowNs - BigInt(options.days) * DAY_NS;
  const { signal } = options;
  const blocks = new Set<string>();
  let segments = 0;
  let series = 0;
  for (const tenant of tenants) {
    for (const key of await listedSegments(parts, tenant, from, nowNs + DAY_NS, signal)) {
      signal?.throwIfAborted();
      const segment = await cachedSegment(parts, tenant, key);
      if (segment === undefined) continue;
      segments++;
      series += segment.series.length;
      for (const s of segment.series) {
        for (const c of s.chunks) if (c.bloom.kind === "block") blocks.add(c.bloom.key);
      }
    }
  }
  let bloomBlocks = 0;
  const { chunkFilter } = parts;
  if (chunkFilter.loadBlocks !== undefined && options.bloomBytes > 0) {
    // Block names start with their flush's time (the key's last part): the newest first.
    const newest = [...blocks].sort((a, b) => (lastPart(a) < lastPart(b) ? 1 : -1));
    bloomBlocks = await chunkFilter.loadBlocks(newest, options.bloomBytes);
  }
  return {
    tenants: tenants.length,
    segments,
    series,
    bloomBlocks,
    ms: performance.now() - started,
  };
}

function lastPart(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}
