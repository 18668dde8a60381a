import { IndexError, readSeriesBloom } from "@sieve/index";
import type { BloomBlockStore, BloomRecord, BloomRecordLocation } from "@sieve/index";
import { StorageError, isNotFound } from "@sieve/storage";
import { countedUpTo } from "@sieve/kit";
import { LRUCache } from "lru-cache";
import { BlockRecordError, LoadedBlock } from "./block.js";
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
  /** Read from the object store by this call (its block, or its record on the fallback path). */
  | "miss"
  /** Joined a read another call had started (single flight). */
  | "inflight";

/** Counters of a {@link BloomCache}, since it was made. */
export interface BloomCacheStats {
  hits: number;
  misses: number;
  /** Calls that waited for another call's read instead of reading. */
  inflight: number;
  /** Bytes held (block bytes and filter bits plus a fixed overhead a record). */
  bytes: number;
  /** Entries held: whole blocks and, from the fallback path, single series' blooms. */
  entries: number;
  /** Entries dropped to stay under the byte budget. */
  evictions: number;
  /** Block objects read whole from the store. */
  blockLoads: number;
  /** Series records read one by one (blocks past `maxBlockBytes`, or damaged ones). */
  recordReads: number;
}

/** Why a block is read record by record instead of whole. */
export type FallbackReason =
  /** Larger than `maxBlockBytes` (or a quarter of the budget). */
  | "oversized"
  /** Its footer or index is damaged, or the object is shorter than it says. */
  | "damaged";

/** Options of a {@link BloomCache}. */
export interface BloomCacheOptions {
  /** Byte budget; the least recently used blocks and blooms go first. */
  readonly maxBytes: number;
  /**
   * Largest block loaded whole. A larger one, or one over a quarter of `maxBytes` (its
   * bytes and its decoded filters are both held until every record is decoded), is read
   * one record per series instead, each record cached alone.
   */
  readonly maxBlockBytes: number;
  /** Called after each read from the store, with its duration and outcome. */
  readonly onRead?: (seconds: number, outcome: "ok" | FailOpenReason) => void;
  /** Called once per block the cache decides to read record by record. */
  readonly onFallback?: (key: string, reason: FallbackReason, detail: string) => void;
  /** Called when the budget evicts an entry (what was cut from it may be held elsewhere). */
  readonly onEvict?: () => void;
}

/** Bytes counted for a single-record entry besides its bit arrays: key, filter object, list links. */
const ENTRY_OVERHEAD_BYTES = 200;
/** Block keys remembered as read-by-record (blocks never change, so the verdict holds). */
const FALLBACK_KEYS = 65_536;
/** The smallest block worth a whole read: header, an empty index and the footer. */
const MIN_BLOCK_BYTES = 40;

/** The LRU key of a whole block (a single record's key starts with `r\n`). */
function blockKey(key: string): string {
  return `b\n${key}`;
}

/** A cache entry: a whole block, or one series' bloom read alone on the fallback path. */
type Entry =
  | { readonly kind: "block"; readonly block: LoadedBlock }
  | { readonly kind: "record"; readonly bloom: BloomRecord };

/** What loading a block found: the block, or that its series are read record by record. */
type BlockLoad = LoadedBlock | "records";

function readError(error: unknown): BloomReadError {
  const reason: FailOpenReason = isNotFound(error)
    ? "block_not_found"
    : error instanceof StorageError && error.code === "invalid_range"
      ? "corrupt_bloom"
      : "store_error";
  return new BloomReadError(reason, (error as Error).message, { cause: error });
}

/**
 * Bloom blocks in memory, in an LRU (`lru-cache` with `maxSize`) under a byte budget. A
 * series' bloom is cut from its block: on a miss the whole block object is fetched once
 * (`head` for its size, one read), its footer and index checked, and each series' filter
 * decoded on first use (see {@link LoadedBlock}). Concurrent calls for the same block share
 * one load (single flight) through a map of pending loads kept beside the LRU: `lru-cache`'s
 * own `fetch` stores a pending load as an entry, which a full cache can evict (aborting it
 * for every waiter) and which then counts no eviction.
 *
 * A block past the size bound, or whose footer or index is damaged, is read as before this
 * cache held blocks: one range read per series record, each decoded bloom its own entry,
 * single flight per record; the block's key is remembered so later calls go straight there.
 * Failed reads are not cached: the next call tries again.
 */
export class BloomCache {
  private readonly lru: LRUCache<string, Entry>;
  private readonly pending = new Map<string, Promise<BlockLoad>>();
  private readonly pendingRecords = new Map<string, Promise<BloomRecord>>();
  private readonly byRecord = new LRUCache<string, FallbackReason>(countedUpTo(FALLBACK_KEYS));
  private readonly blockLimit: number;
  private hits = 0;
  private misses = 0;
  private inflight = 0;
  private evictions = 0;
  private blockLoads = 0;
  private recordReads = 0;

  constructor(
    private readonly store: BloomBlockStore,
    private readonly options: BloomCacheOptions,
  ) {
    this.blockLimit = Math.min(options.maxBlockBytes, Math.floor(options.maxBytes / 4));
    this.lru = new LRUCache<string, Entry>({
      maxSize: options.maxBytes,
      sizeCalculation: (entry) =>
        entry.kind === "block"
          ? entry.block.bytes
          : entry.bloom.filter.byteLength + ENTRY_OVERHEAD_BYTES,
      dispose: (_value, _key, reason) => {
        if (reason !== "evict") return;
        this.evictions++;
        options.onEvict?.();
      },
    });
  }

  /**
   * The block at `key` when it is in memory and read whole (one LRU lookup, which makes it
   * the most recently used); undefined when its blooms must be had through {@link get}.
   * A caller testing many series of one block looks it up once and cuts each from it.
   */
  held(key: string): LoadedBlock | undefined {
    if (this.byRecord.has(key)) return undefined;
    const cached = this.lru.get(blockKey(key));
    return cached?.kind === "block" ? cached.block : undefined;
  }

  /**
   * The bloom of `fingerprint` at `location` from `block`, which {@link held} answered for
   * `location.key` (a hit, counted). Throws a {@link BloomReadError} when its record is
   * damaged.
   */
  cutHeld(block: LoadedBlock, location: BloomRecordLocation, fingerprint: bigint): BloomRecord {
    this.hits++;
    return this.cut(block, location, fingerprint);
  }

  /** Counts `n` hits on held blocks whose blooms the caller kept from earlier cuts. */
  countHits(n: number): void {
    this.hits += n;
  }

  /**
   * The bloom of `fingerprint` at `location`, from memory or read once from the store.
   * Throws a {@link BloomReadError} when it cannot be had.
   */
  async get(
    location: BloomRecordLocation,
    fingerprint: bigint,
  ): Promise<{ bloom: BloomRecord; source: CacheSource }> {
    if (this.byRecord.has(location.key)) return this.getRecord(location, fingerprint);
    const entryKey = blockKey(location.key);
    const cached = this.lru.get(entryKey);
    if (cached?.kind === "block") {
      this.hits++;
      return { bloom: this.cut(cached.block, location, fingerprint), source: "hit" };
    }
    const started = this.pending.get(location.key);
    const source: CacheSource = started === undefined ? "miss" : "inflight";
    const load = started ?? this.startLoad(location.key);
    const count = (): void => {
      if (source === "miss") this.misses++;
      else this.inflight++;
    };
    let loaded;
    try {
      loaded = await load;
    } catch (error) {
      count();
      throw error;
    }
    // On the fallback path the record read is what serves the call, and what is counted.
    if (loaded === "records") return this.getRecord(location, fingerprint);
    count();
    return { bloom: this.cut(loaded, location, fingerprint), source };
  }

  /**
   * Reads the block at `key` into memory ahead of use, unless it is held or read record by
   * record, and decodes every series' bloom in it (a query then decodes nothing: on the 1 GB
   * `bench:peers` data a wide needle's first run decoded 250 records, 5 ms); true when it
   * is held after. Throws a {@link BloomReadError} when it cannot be read.
   */
  async load(key: string): Promise<boolean> {
    if (this.byRecord.has(key)) return false;
    const loaded = await (this.pending.get(key) ?? this.held(key) ?? this.startLoad(key));
    if (loaded === "records") return false;
    const entry = this.lru.peek(blockKey(key));
    if (entry?.kind !== "block" || entry.block !== loaded) return false;
    // Set again so that lru-cache counts the filters decoded in place of the bytes.
    if (loaded.decodeAll() > 0) this.lru.set(blockKey(key), { kind: "block", block: loaded });
    return true;
  }

  /** Bytes the block at `key` holds now (0 when it is not held). */
  heldBytes(key: string): number {
    const entry = this.lru.peek(blockKey(key));
    return entry?.kind === "block" ? entry.block.bytes : 0;
  }

  /** Starts the one read of the block at `key`; it is kept once read (single flight). */
  private startLoad(key: string): Promise<BlockLoad> {
    const load = this.loadBlock(key);
    this.pending.set(key, load);
    void load
      .then((loaded) => {
        // A block past the whole budget is answered but not kept (lru-cache refuses it).
        if (loaded !== "records") this.lru.set(blockKey(key), { kind: "block", block: loaded });
      })
      .catch(() => undefined)
      .finally(() => this.pending.delete(key));
    return load;
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
      blockLoads: this.blockLoads,
      recordReads: this.recordReads,
    };
  }

  /** Drops every entry (loads in flight still complete). */
  clear(): void {
    this.lru.clear();
  }

  /** Cuts one series' bloom from a held block, and resizes the block's entry when it grew. */
  private cut(block: LoadedBlock, location: BloomRecordLocation, fingerprint: bigint): BloomRecord {
    const decoded = block.decodedRecords;
    let got;
    try {
      got = block.record(location, fingerprint);
    } catch (error) {
      if (!(error instanceof BlockRecordError)) throw error;
      throw new BloomReadError("corrupt_bloom", error.message, { cause: error });
    }
    if (block.decodedRecords !== decoded) {
      const entryKey = blockKey(location.key);
      // lru-cache sizes an entry when it is set: set a new holder to count what was decoded,
      // unless the block has been evicted meanwhile (it is not brought back).
      const held = this.lru.peek(entryKey);
      if (held?.kind === "block" && held.block === block)
        this.lru.set(entryKey, { kind: "block", block });
    }
    return got;
  }

  private async loadBlock(key: string): Promise<BlockLoad> {
    const started = performance.now();
    const done = (outcome: "ok" | FailOpenReason) =>
      this.options.onRead?.((performance.now() - started) / 1000, outcome);
    const fallBack = (reason: FallbackReason, detail: string): "records" => {
      this.byRecord.set(key, reason);
      this.options.onFallback?.(key, reason, detail);
      return "records";
    };
    let bytes: Uint8Array;
    try {
      const { size } = await this.store.head(key);
      if (size > this.blockLimit) {
        return fallBack("oversized", `${size} bytes, the limit is ${this.blockLimit}`);
      }
      if (size < MIN_BLOCK_BYTES) return fallBack("damaged", `a block of ${size} bytes`);
      bytes = await this.store.getRange(key, 0, size);
      this.blockLoads++;
      if (bytes.length !== size) {
        done("ok");
        return fallBack("damaged", `read ${bytes.length} of ${size} bytes`);
      }
    } catch (error) {
      const wrapped = readError(error);
      done(wrapped.reason);
      throw wrapped;
    }
    done("ok");
    try {
      return LoadedBlock.open(bytes);
    } catch (error) {
      if (!(error instanceof IndexError)) throw error;
      return fallBack("damaged", error.message);
    }
  }

  /** The fallback path: one series' record read alone, cached alone, single flight per record. */
  private async getRecord(
    location: BloomRecordLocation,
    fingerprint: bigint,
  ): Promise<{ bloom: BloomRecord; source: CacheSource }> {
    const key = `r\n${location.key}\n${location.offset}\n${location.length}\n${fingerprint}`;
    const cached = this.lru.get(key);
    if (cached?.kind === "record") {
      this.hits++;
      return { bloom: cached.bloom, source: "hit" };
    }
    const running = this.pendingRecords.get(key);
    if (running !== undefined) {
      this.inflight++;
      return { bloom: await running, source: "inflight" };
    }
    this.misses++;
    const read = this.loadRecord(location, fingerprint);
    this.pendingRecords.set(key, read);
    try {
      const bloom = await read;
      // A record past the whole budget is answered but not kept (lru-cache refuses it).
      this.lru.set(key, { kind: "record", bloom });
      return { bloom, source: "miss" };
    } finally {
      this.pendingRecords.delete(key);
    }
  }

  private async loadRecord(
    location: BloomRecordLocation,
    fingerprint: bigint,
  ): Promise<BloomRecord> {
    const started = performance.now();
    const done = (outcome: "ok" | FailOpenReason) =>
      this.options.onRead?.((performance.now() - started) / 1000, outcome);
    let result;
    try {
      this.recordReads++;
      result = await readSeriesBloom(this.store, location, fingerprint);
    } catch (error) {
      const wrapped = readError(error);
      done(wrapped.reason);
      throw wrapped;
    }
    if (result.status !== "ok") {
      done("corrupt_bloom");
      const detail = result.status === "corrupt" ? result.error.message : "no bloom in the block";
      throw new BloomReadError("corrupt_bloom", detail);
    }
    done("ok");
    const { filter, ngrams, metadataTokens } = result;
    return { filter, ngrams, metadataTokens };
  }
}
