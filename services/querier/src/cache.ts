import { LRUCache } from "lru-cache";

/** What one lookup did: a hit, or a load of `bytes` from the store. */
export interface CacheLookup<V> {
  readonly value: V;
  readonly hit: boolean;
}

/**
 * An LRU of immutable objects under a byte budget (lru-cache's `maxSize`), with
 * single-flight loading: concurrent lookups of a missing key share one load. Chunks and
 * index segments are named by content (chunk keys carry the checksum; segments are never
 * rewritten), so an entry never goes stale.
 */
export class ObjectCache<V extends object> {
  private readonly lru: LRUCache<string, V>;
  private readonly inflight = new Map<string, Promise<V>>();
  /** Lookups answered from memory (or from a load already in flight). */
  hits = 0;
  /** Lookups that loaded. */
  misses = 0;

  constructor(
    maxBytes: number,
    private readonly size: (value: V) => number,
  ) {
    this.lru = new LRUCache<string, V>({
      maxSize: maxBytes,
      // An object larger than the whole budget is served but not kept.
      sizeCalculation: (value) => Math.max(1, this.size(value)),
      maxEntrySize: maxBytes,
    });
  }

  /** The budget, bytes. */
  get maxBytes(): number {
    return this.lru.maxSize;
  }

  /** Bytes held. */
  get bytes(): number {
    return this.lru.calculatedSize;
  }

  /**
   * Weighs `value` again when it is still `key`'s entry: an entry that grew (a chunk reader
   * given more blocks) counts what it holds now, and the least recently used go.
   */
  reweigh(key: string, value: V): void {
    if (this.lru.peek(key) !== value) return;
    // lru-cache keeps an entry's size when the same value is set again: set it anew.
    this.lru.delete(key);
    this.lru.set(key, value);
  }

  /** Drops `key`'s entry (a load in flight still fills it). */
  forget(key: string): void {
    this.lru.delete(key);
  }

  /** Whether `key` is cached (not counted as a lookup, nor made recent). */
  has(key: string): boolean {
    return this.lru.has(key);
  }

  /** The cached value of `key`, or `load()`'s, shared with concurrent lookups. */
  async get(key: string, load: () => Promise<V>): Promise<CacheLookup<V>> {
    const cached = this.lru.get(key);
    if (cached !== undefined) {
      this.hits++;
      return { value: cached, hit: true };
    }
    const pending = this.inflight.get(key);
    if (pending !== undefined) {
      this.hits++;
      return { value: await pending, hit: true };
    }
    this.misses++;
    const loading = load().then(
      (value) => {
        this.inflight.delete(key);
        this.lru.set(key, value);
        return value;
      },
      (error: unknown) => {
        this.inflight.delete(key);
        throw error;
      },
    );
    this.inflight.set(key, loading);
    return { value: await loading, hit: false };
  }
}
