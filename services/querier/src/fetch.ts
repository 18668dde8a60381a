/**
 * Chunk fetching (a bounded pool of fetches ahead of the reader, through the chunk cache,
 * which holds each chunk as a checked {@link ChunkReader}: its footer, checksums and
 * symbol sections are read once, not by every query) and reading (only the blocks that can
 * hold what the query needs).
 *
 * A query whose metadata test can refuse a block reads a chunk by ranges: its end first
 * (footer and symbol filter, a few KB, as the store's `getTail`); when the filter says the
 * chunk holds none of what the test needs, nothing more (a chunk a bloom kept by false
 * positive, nearly always); else the symbol sections before it, then only the blocks that
 * may hold the needle and overlap the query's range. A chunk written before the filter
 * (format version 2) is read to its whole tail first (on the peers bench's data, 90 KB
 * of 260). Other queries read chunks whole, in one call.
 */
import { ChunkReader, type ChunkRef, type Entry, type SymbolFilter } from "@sieve/chunk";
import {
  chunkFilters,
  evaluateMetadataTest,
  type BloomTest,
  type ChunkFilters,
} from "@sieve/logql";
import type { QuerierParts, QueryContext } from "./context.js";
import { storeError } from "./index-read.js";
import type { PlannedChunk } from "./plan.js";
import type { QueryStats } from "./stats.js";

/** The first read of a chunk's tail of a series not read yet, at most, bytes. */
export const FIRST_TAIL_BYTES = 128 * 1024;
/**
 * The first read of a chunk's end (footer and symbol filter: about a byte a distinct
 * metadata name or value, 5.5 KB on the peers bench's chunks), at most, bytes.
 */
export const FIRST_END_BYTES = 16 * 1024;
/** Tails a tenant's guess is made from: the last this many read. */
const TAIL_HISTORY = 32;
/** Tenants, and series, whose tails are remembered; past these, all are forgotten. */
const MAX_TAIL_TENANTS = 4096;
const MAX_TAIL_SERIES = 65_536;

/** `share` of a chunk of `size` bytes, plus 5% and 1 KiB: tails vary a little. */
function withMargin(size: number, share: number): number {
  return Math.ceil(size * share * 1.05) + 1024;
}

/** What {@link TailSizes} remembers of a tenant. */
interface TenantTails {
  /** The shares of its last tails, and the largest of them. */
  readonly ring: Float64Array;
  next: number;
  max: number;
  /** The share of each series' last tail. */
  readonly series: Map<bigint, number>;
}

/**
 * How much of a chunk's tail (or of its end: one instance each) a query reads first,
 * learnt from the tails it read before:
 * a series' chunks are cut alike, so their tails take a like share of their size (7.8% on
 * bench:query's data, where the trace id is the only metadata; 35% on the peers bench's,
 * where every line has its own span id; within 3% of that on every chunk of either). A
 * series read before: its last share times the chunk's size (the index has it), with a
 * margin. A series not read yet: the largest share among its tenant's last
 * {@link TAIL_HISTORY} tails, at most the first read (a tenant may mix streams of long
 * and short tails); the first read, `first`, for a tenant's first. A tail longer than the guess
 * costs one more read, of the bytes before it. A fixed 128 KiB read bench:query's 15 KB
 * tails 8× over, copied and then collected, for every chunk a bloom kept by false positive.
 */
export class TailSizes {
  private readonly tenants = new Map<string, TenantTails>();
  private seriesKnown = 0;

  /** `first`: the bytes read first of a tenant's first chunk (chunk tails by default). */
  constructor(private readonly first = FIRST_TAIL_BYTES) {}

  /** The bytes to read first of a chunk of `size` bytes of series `fingerprint` of `tenant`. */
  guess(tenant: string, fingerprint: bigint, size: number): number {
    const seen = this.tenants.get(tenant);
    if (seen === undefined || !(size > 0)) return this.first;
    const own = seen.series.get(fingerprint);
    if (own !== undefined) return Math.min(size, withMargin(size, own));
    return Math.min(size, this.first, withMargin(size, seen.max));
  }

  /** Remembers that a chunk of `size` bytes of that series had a tail of `tail` bytes. */
  learn(tenant: string, fingerprint: bigint, tail: number, size: number): void {
    if (!(size > 0) || !(tail > 0)) return;
    let seen = this.tenants.get(tenant);
    if (seen === undefined) {
      if (this.tenants.size >= MAX_TAIL_TENANTS) this.forget();
      seen = { ring: new Float64Array(TAIL_HISTORY), next: 0, max: 0, series: new Map() };
      this.tenants.set(tenant, seen);
    }
    const share = Math.min(1, tail / size);
    seen.ring[seen.next] = share;
    seen.next = (seen.next + 1) % TAIL_HISTORY;
    seen.max = Math.max(...seen.ring);
    if (!seen.series.has(fingerprint)) {
      if (this.seriesKnown >= MAX_TAIL_SERIES) {
        for (const t of this.tenants.values()) t.series.clear();
        this.seriesKnown = 0;
      }
      this.seriesKnown++;
    }
    seen.series.set(fingerprint, share);
  }

  private forget(): void {
    this.tenants.clear();
    this.seriesKnown = 0;
  }
}

/** What a query reads of a chunk: the time range, and the test its entries must pass. */
export interface ChunkRead {
  readonly test: BloomTest;
  /** The range of `chunk` that the query reads, ns: [from, through). */
  readonly range: (chunk: PlannedChunk) => { from: bigint; through: bigint };
  readonly direction?: "forward" | "backward";
}

/**
 * A fetched chunk: its reader, holding every block the query reads, and those blocks; no
 * reader when its symbol filter refused the query's test (nothing in it can pass).
 */
export interface FetchedChunk {
  readonly planned: PlannedChunk;
  readonly reader: ChunkReader | undefined;
  readonly blocks: BlockPlan;
}

/** The blocks of a chunk a query reads, and the filters inside them. */
export interface BlockPlan {
  /** The range the query reads of the chunk, ns: [from, through). */
  readonly range: { readonly from: bigint; readonly through: bigint };
  /** 1 for each block to read. */
  readonly read: Uint8Array;
  readonly filters: ChunkFilters | undefined;
  /** Raw bytes of the blocks to read, and blocks in range left unread (the stats'). */
  readonly rawBytes: number;
  readonly skipped: number;
}

/**
 * A chunk's last bytes as first read for its symbol filter ({@link ChunkReader.filterLength}
 * of them, more when the guess was long), and the filter: undefined for a chunk written
 * before version 3, whose bytes then hold its whole tail.
 */
export class ChunkEnd {
  constructor(
    readonly bytes: Uint8Array,
    readonly size: number,
    readonly filter: SymbolFilter | undefined,
  ) {}

  get retainedBytes(): number {
    return this.bytes.byteLength;
  }

  /** Whether an entry of the chunk may pass `test` (false only when the filter says not). */
  mayPass(test: BloomTest, labels: Readonly<Record<string, string>>): boolean {
    const filter = this.filter;
    if (filter === undefined) return true;
    // A pair's value first: rarer than its name, as in chunkFilters.
    return evaluateMetadataTest(
      test,
      {
        key: (name) => filter.mayHold(name),
        pair: (name, value) => filter.mayHold(value) && filter.mayHold(name),
      },
      labels,
    );
  }
}

/** How many of a chunk's last bytes its tail, or its end, takes ({@link ChunkReader}). */
function needed(part: "tail" | "end", data: Uint8Array, size: number): number {
  return part === "tail"
    ? ChunkReader.tailLength(data, size)
    : ChunkReader.filterLength(data, size);
}

/**
 * Reads `key`'s last bytes until they hold its tail or its end (`part`), starting from `have` (the last bytes read before, if any) or
 * from a read of `guess` bytes; answers them, the chunk's size, and the bytes the store sent.
 */
async function readEnd(
  parts: QuerierParts,
  key: string,
  part: "tail" | "end",
  start: { readonly have: Uint8Array; readonly size: number } | { readonly guess: number },
): Promise<{ data: Uint8Array; size: number; bytes: number }> {
  let data: Uint8Array;
  let size: number;
  let bytes = 0;
  if ("have" in start) {
    ({ have: data, size } = start);
  } else {
    const last = await parts.store.getTail(key, start.guess);
    ({ data, size } = last);
    bytes = data.byteLength;
  }
  // When short, the bytes before (a chunk key names its content: the object cannot change
  // between the reads): the footer's length says how many the footer needs, then the
  // footer how many the sections do.
  let need = needed(part, data, size);
  for (let reads = 0; reads < 2 && need > data.byteLength; reads++) {
    const before = await parts.store.getRange(key, size - need, need - data.byteLength);
    bytes += before.byteLength;
    data = Buffer.concat([before, data]);
    need = needed(part, data, size);
  }
  return { data, size, bytes };
}

/**
 * The end of the chunk at `key` through the cache of chunk ends, read and its footer and
 * filter checked on a miss; `bytes` is what the store sent.
 */
export async function cachedEnd(
  parts: QuerierParts,
  key: string,
  ref: ChunkRef,
  size: number,
): Promise<{ value: ChunkEnd; hit: boolean; bytes: number }> {
  let bytes = 0;
  const got = await parts.chunkEnds.get(key, async () => {
    try {
      const guess = parts.endSizes.guess(ref.tenant, ref.fingerprint, size);
      const end = await readEnd(parts, key, "end", { guess });
      bytes = end.bytes;
      const need = ChunkReader.filterLength(end.data, end.size);
      parts.endSizes.learn(ref.tenant, ref.fingerprint, need, end.size);
      return new ChunkEnd(end.data, end.size, ChunkReader.symbolFilter(end.data, end.size));
    } catch (error) {
      throw storeError(error);
    }
  });
  return { ...got, bytes };
}

/**
 * The chunk at `key` through the chunk cache, read and checked on a miss (its tail alone
 * when `tail` gives the chunk's ref and size, from the index, continuing from `end`'s
 * bytes when given); `hit` says which, `bytes` what the store sent. A store that is down
 * is a 503, not a 500 ({@link storeError}).
 */
export async function cachedChunk(
  parts: QuerierParts,
  key: string,
  tail?: { readonly ref: ChunkRef; readonly size: number; readonly end?: ChunkEnd },
): Promise<{ value: ChunkReader; hit: boolean; bytes: number }> {
  let bytes = 0;
  const got = await parts.chunks.get(key, async () => {
    try {
      if (tail === undefined) {
        const whole = await parts.store.get(key);
        bytes = whole.byteLength;
        return new ChunkReader(whole);
      }
      const { tenant, fingerprint } = tail.ref;
      const start =
        tail.end === undefined
          ? { guess: parts.tails.guess(tenant, fingerprint, tail.size) }
          : { have: tail.end.bytes, size: tail.end.size };
      const read = await readEnd(parts, key, "tail", start);
      bytes = read.bytes;
      const reader = new ChunkReader(read.data, read.size);
      parts.tails.learn(
        tenant,
        fingerprint,
        ChunkReader.tailLength(read.data, read.size),
        read.size,
      );
      return reader;
    } catch (error) {
      throw storeError(error);
    }
  });
  return { ...got, bytes };
}

/**
 * Whether `test` can refuse a block by its symbols (it needs a metadata name or value in
 * every case it passes): a line filter alone cannot, nor `or` with such a branch.
 */
function refusesBlocks(test: BloomTest): boolean {
  switch (test.kind) {
    case "key":
    case "kv":
      return true;
    case "and":
      return test.children.some(refusesBlocks);
    case "or":
      return test.children.length > 0 && test.children.every(refusesBlocks);
    case "line":
    case "all":
      return false;
  }
}

/**
 * Fetches chunks in the given order, `maxConcurrentFetches` ahead of the reader, through
 * the chunk cache, each with the blocks `read` needs of it (see the file comment). Stops
 * starting fetches once `wanted` says a chunk cannot matter (chunks are ordered so that
 * every later one cannot either).
 */
export async function* fetchInOrder(
  parts: QuerierParts,
  chunks: readonly PlannedChunk[],
  ctx: QueryContext,
  read: ChunkRead,
  wanted: (c: PlannedChunk) => boolean = () => true,
): AsyncGenerator<FetchedChunk> {
  const stats = ctx.stats;
  const tails = refusesBlocks(read.test);
  const pending: Promise<FetchedChunk>[] = [];
  let next = 0;
  let stopped = false;
  const fetch = async (planned: PlannedChunk): Promise<FetchedChunk> => {
    const { key, ref, bytes: size } = planned.chunk;
    let end: ChunkEnd | undefined;
    let fetched = 0;
    // A chunk not cached whole: its end first, and no further when its filter refuses.
    if (tails && !parts.chunks.has(key)) {
      const got = await cachedEnd(parts, key, ref, size);
      end = got.value;
      fetched += got.bytes;
      if (!end.mayPass(read.test, planned.labels)) {
        stats.chunksFetched++;
        stats.chunksRefusedByFilter++;
        if (got.hit) stats.chunkCacheHits++;
        parts.metrics?.chunksFetched.inc();
        stats.bytesFetched += fetched;
        parts.metrics?.bytesFetched.inc(fetched);
        return { planned, reader: undefined, blocks: refused(read.range(planned)) };
      }
    }
    const tail = tails ? { ref, size, end } : undefined;
    const { value: reader, hit, bytes } = await cachedChunk(parts, key, tail);
    const blocks = planBlocks(reader, planned.labels, read.test, read.range(planned));
    fetched += bytes;
    const ranges = reader.missing((b) => blocks.read[b] === 1);
    if (ranges.length > 0) {
      const got = await Promise.all(
        ranges.map((r) => parts.store.getRange(key, r.offset, r.length).catch(rethrowStore)),
      );
      ranges.forEach((r, i) => {
        reader.addBlocks(r.offset, got[i]!);
        fetched += got[i]!.byteLength;
      });
      // The reader grew: the cache weighs it again.
      parts.chunks.reweigh(key, reader);
    }
    stats.chunksFetched++;
    parts.metrics?.chunksFetched.inc();
    if (hit) stats.chunkCacheHits++;
    stats.bytesFetched += fetched;
    parts.metrics?.bytesFetched.inc(fetched);
    return { planned, reader, blocks };
  };
  const start = (): void => {
    if (stopped || next >= chunks.length) return;
    const planned = chunks[next++]!;
    if (!wanted(planned)) {
      stopped = true;
      return;
    }
    const p = fetch(planned);
    p.catch(() => undefined); // awaited below; a reader that stops early leaves it behind
    pending.push(p);
  };
  for (let i = 0; i < parts.config.maxConcurrentFetches; i++) start();
  while (pending.length > 0) {
    const p = pending.shift()!;
    const got = await stats.time("fetch", () => ctx.race(p));
    start();
    yield got;
  }
}

function rethrowStore(error: unknown): never {
  throw storeError(error);
}

/**
 * The blocks of a chunk in [from, through) that may pass `test`: a block whose symbols lack
 * a name or value the test needs (for a name that is not one of the stream's labels) is
 * not read. The bloom prunes chunks; this prunes inside the ones it keeps, exactly.
 */
function planBlocks(
  reader: ChunkReader,
  labels: Readonly<Record<string, string>>,
  test: BloomTest,
  range: { from: bigint; through: bigint },
): BlockPlan {
  const filters = chunkFilters(reader, test, labels);
  const read = new Uint8Array(reader.blocks.length);
  let rawBytes = 0;
  let skipped = 0;
  reader.blocks.forEach((b, i) => {
    if (b.maxTs < range.from || b.minTs >= range.through) return;
    if (filters === undefined || filters.block(i)) {
      read[i] = 1;
      rawBytes += b.rawLength;
    } else skipped++;
  });
  return { range, read, filters, rawBytes, skipped };
}

/** The plan of a chunk whose filter refused the query: no block read, none skipped. */
function refused(range: { from: bigint; through: bigint }): BlockPlan {
  return { range, read: new Uint8Array(0), filters: undefined, rawBytes: 0, skipped: 0 };
}

/**
 * The entries of a fetched chunk in [from, through), in the direction, that may pass the
 * test it was fetched for: only its planned blocks are decompressed, and inside them an
 * entry whose metadata cannot pass is skipped before its line is decoded, so a needle
 * query decodes the lines that hold it and nothing of a false positive.
 */
export function readChunk(
  { reader, blocks }: FetchedChunk,
  read: ChunkRead,
  stats: QueryStats,
): Iterable<Entry> {
  if (reader === undefined) return [];
  stats.bytesDecompressed += blocks.rawBytes;
  stats.blocksSkipped += blocks.skipped;
  return reader.entries({
    ...blocks.range,
    ...(read.direction !== undefined && { direction: read.direction }),
    blocks: (i) => blocks.read[i] === 1,
    ...(blocks.filters !== undefined && { keep: blocks.filters.entry }),
  });
}
