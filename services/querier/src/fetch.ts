/**
 * Chunk fetching (a bounded pool of fetches ahead of the reader, through the chunk cache,
 * which holds each chunk as a checked {@link ChunkReader}: its footer, checksums and
 * symbol sections are read once, not by every query) and reading (only the blocks that can
 * hold what the query needs).
 */
import { ChunkReader, type Entry } from "@sieve/chunk";
import { chunkFilters, type BloomTest } from "@sieve/logql";
import type { QuerierParts, QueryContext } from "./context.js";
import { storeError, type PlannedChunk } from "./plan.js";
import type { QueryStats } from "./stats.js";

/**
 * The chunk at `key` through the chunk cache, read and checked on a miss; `hit` says which.
 * A store that is down is a 503, not a 500 ({@link storeError}).
 */
export function cachedChunk(
  parts: QuerierParts,
  key: string,
): Promise<{ value: ChunkReader; hit: boolean }> {
  return parts.chunks.get(key, () =>
    parts.store.get(key).then(
      (bytes) => new ChunkReader(bytes),
      (error: unknown) => {
        throw storeError(error);
      },
    ),
  );
}

/**
 * Fetches chunks in the given order, `maxConcurrentFetches` ahead of the reader, through
 * the chunk cache. Stops starting fetches once `wanted` says a chunk cannot matter
 * (chunks are ordered so that every later one cannot either).
 */
export async function* fetchInOrder(
  parts: QuerierParts,
  chunks: readonly PlannedChunk[],
  ctx: QueryContext,
  wanted: (c: PlannedChunk) => boolean = () => true,
): AsyncGenerator<{ planned: PlannedChunk; reader: ChunkReader }> {
  const stats = ctx.stats;
  const pending: Promise<{ planned: PlannedChunk; reader: ChunkReader }>[] = [];
  let next = 0;
  let stopped = false;
  const start = (): void => {
    if (stopped || next >= chunks.length) return;
    const planned = chunks[next++]!;
    if (!wanted(planned)) {
      stopped = true;
      return;
    }
    const p = cachedChunk(parts, planned.chunk.key).then(({ value, hit }) => {
      stats.chunksFetched++;
      parts.metrics?.chunksFetched.inc();
      if (hit) stats.chunkCacheHits++;
      else {
        stats.bytesFetched += value.byteLength;
        parts.metrics?.bytesFetched.inc(value.byteLength);
      }
      return { planned, reader: value };
    });
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

/**
 * The entries of a fetched chunk in [from, through), in the direction, that may pass
 * `test`. A block whose symbols lack a name or value the test needs (for a name that is not
 * one of the stream's labels) is not decompressed, and inside the blocks read an entry
 * whose metadata cannot pass is skipped before its line is decoded. The bloom prunes
 * chunks; this prunes inside the ones it keeps, exactly, so a needle query decodes the
 * lines that hold it and nothing of a false positive.
 */
export function readChunk(
  reader: ChunkReader,
  labels: Readonly<Record<string, string>>,
  test: BloomTest,
  range: { from: bigint; through: bigint; direction?: "forward" | "backward" },
  stats: QueryStats,
): Generator<Entry, void, undefined> {
  const filters = chunkFilters(reader, test, labels);
  const read = new Uint8Array(reader.blocks.length);
  reader.blocks.forEach((b, i) => {
    if (b.maxTs < range.from || b.minTs >= range.through) return;
    if (filters === undefined || filters.block(i)) {
      read[i] = 1;
      stats.bytesDecompressed += b.rawLength;
    } else stats.blocksSkipped++;
  });
  return reader.entries({
    ...range,
    blocks: (i) => read[i] === 1,
    ...(filters !== undefined && { keep: filters.entry }),
  });
}
