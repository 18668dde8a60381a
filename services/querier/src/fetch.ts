/** Chunk fetching: a bounded pool of fetches ahead of the reader, through the chunk cache. */
import type { QuerierParts, QueryContext } from "./context.js";
import { storeError, type PlannedChunk } from "./plan.js";

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
): AsyncGenerator<{ planned: PlannedChunk; bytes: Uint8Array }> {
  const stats = ctx.stats;
  const pending: Promise<{ planned: PlannedChunk; bytes: Uint8Array }>[] = [];
  let next = 0;
  let stopped = false;
  const start = (): void => {
    if (stopped || next >= chunks.length) return;
    const planned = chunks[next++]!;
    if (!wanted(planned)) {
      stopped = true;
      return;
    }
    const p = parts.chunks
      .get(planned.chunk.key, () =>
        parts.store.get(planned.chunk.key).catch((error: unknown) => {
          throw storeError(error); // a store that is down: 503, not 500
        }),
      )
      .then(({ value, hit }) => {
        stats.chunksFetched++;
        parts.metrics?.chunksFetched.inc();
        if (hit) stats.chunkCacheHits++;
        else {
          stats.bytesFetched += value.byteLength;
          parts.metrics?.bytesFetched.inc(value.byteLength);
        }
        return { planned, bytes: value };
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
