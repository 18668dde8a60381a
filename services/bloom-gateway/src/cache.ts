import type { AnyFilter } from "@sieve/bloom";
import { readSeriesBloom } from "@sieve/index";
import type { BloomBlockStore, BloomRecordLocation } from "@sieve/index";
import { StorageError, isNotFound } from "@sieve/storage";
import { LRUCache } from "lru-cache";
import type { FailOpenReason } from "./reasons.js";

/** Why a bloom could not be loaded; `reason` is the fail-open reason the gateway counts. */
export class BloomReadError extends Error {
  override readonly name = "BloomReadError";

  constructor(
    readonly reason: FailOpenReason,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(detail, options);
  }
}

/** How a {@link BloomCache.get} was served. */
export type CacheSource =
  /** From memory. */
  | "hit"
  /** Read from the object store by this call. */
  | "miss"
  /** Joined a read another call had started (single flight). */
  | "inflight";

/** Counters of a {@link BloomCache}, since it was made. */
export interface BloomCacheStats {
  hits: number;
  misses: number;
  /** Calls that waited for another call's read instead of reading. */
  inflight: number;
  /** Bytes held (filter bits plus a fixed overhead an entry). */
  bytes: number;
  entries: number;
  /** Entries dropped to stay under the byte budget. */
  evictions: number;
}

/** Options of a {@link BloomCache}. */
export interface BloomCacheOptions {
  /** Byte budget; the least recently used blooms go first. */
  readonly maxBytes: number;
  /** Called after each read from the store, with its duration and outcome. */
  readonly onRead?: (seconds: number, outcome: "ok" | FailOpenReason) => void;
}

/** Bytes counted for an entry besides its bit arrays: key, filter object, list links. */
const ENTRY_OVERHEAD_BYTES = 200;

/**
 * Decoded series blooms, keyed by record (block key, offset, length, fingerprint), in an
 * LRU under a byte budget (`lru-cache` with `maxSize`). Concurrent calls for the same
 * record share one read (single flight) through a map of pending reads kept beside the
 * LRU: `lru-cache`'s own `fetch` stores a pending read as an entry, which a full cache can
 * evict (aborting the read for every waiter) and which then counts no eviction. Failed
 * reads are not cached: the next call tries again.
 */
export class BloomCache {
  private readonly lru: LRUCache<string, AnyFilter>;
  private readonly pending = new Map<string, Promise<AnyFilter>>();
  private hits = 0;
  private misses = 0;
  private inflight = 0;
  private evictions = 0;

  constructor(
    private readonly store: BloomBlockStore,
    private readonly options: BloomCacheOptions,
  ) {
    this.lru = new LRUCache<string, AnyFilter>({
      maxSize: options.maxBytes,
      sizeCalculation: (filter) => filter.byteLength + ENTRY_OVERHEAD_BYTES,
      dispose: (_value, _key, reason) => {
        if (reason === "evict") this.evictions++;
      },
    });
  }

  /**
   * The bloom of `fingerprint` at `location`, from memory or read once from the store.
   * Throws a {@link BloomReadError} when it cannot be had.
   */
  async get(
    location: BloomRecordLocation,
    fingerprint: bigint,
  ): Promise<{ filter: AnyFilter; source: CacheSource }> {
    const key = `${location.key}\n${location.offset}\n${location.length}\n${fingerprint}`;
    const cached = this.lru.get(key);
    if (cached !== undefined) {
      this.hits++;
      return { filter: cached, source: "hit" };
    }
    const running = this.pending.get(key);
    if (running !== undefined) {
      this.inflight++;
      return { filter: await running, source: "inflight" };
    }
    this.misses++;
    const read = this.load(location, fingerprint);
    this.pending.set(key, read);
    try {
      const filter = await read;
      // A record past the whole budget is answered but not kept (lru-cache refuses it).
      this.lru.set(key, filter);
      return { filter, source: "miss" };
    } finally {
      this.pending.delete(key);
    }
  }

  /** The cache's counters now. */
  stats(): BloomCacheStats {
    return {
      hits: this.hits,
      misses: this.misses,
      inflight: this.inflight,
      bytes: this.lru.calculatedSize,
      entries: this.lru.size,
      evictions: this.evictions,
    };
  }

  /** Drops every entry (reads in flight still complete). */
  clear(): void {
    this.lru.clear();
  }

  private async load(location: BloomRecordLocation, fingerprint: bigint): Promise<AnyFilter> {
    const started = performance.now();
    const done = (outcome: "ok" | FailOpenReason) =>
      this.options.onRead?.((performance.now() - started) / 1000, outcome);
    let result;
    try {
      result = await readSeriesBloom(this.store, location, fingerprint);
    } catch (error) {
      const reason: FailOpenReason = isNotFound(error)
        ? "block_not_found"
        : error instanceof StorageError && error.code === "invalid_range"
          ? "corrupt_bloom"
          : "store_error";
      done(reason);
      throw new BloomReadError(reason, (error as Error).message, { cause: error });
    }
    if (result.status !== "ok") {
      done("corrupt_bloom");
      const detail = result.status === "corrupt" ? result.error.message : "no bloom in the block";
      throw new BloomReadError("corrupt_bloom", detail);
    }
    done("ok");
    return result.filter;
  }
}
