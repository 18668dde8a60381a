/**
 * Bounded concurrency over `p-limit` (sindresorhus, the usual choice): its queue is what
 * the services' three hand-written worker loops each did, plus the first-failure stop.
 */
import pLimit from "p-limit";

/**
 * Runs `task` on every item with at most `limit` running at once and answers the results
 * in item order. Rejects with the first failure; tasks not yet started then never start
 * (those already running finish on their own: a promise cannot be stopped from outside).
 */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  if (!(limit >= 1)) throw new RangeError(`limit must be at least 1, got ${limit}`);
  if (items.length === 0) return [];
  // One task needs no queue: skip p-limit's bookkeeping on the common single-item call.
  if (items.length === 1) return [await task(items[0]!, 0)];
  const run = pLimit(Math.min(limit, items.length));
  return Promise.all(
    items.map((item, index) =>
      run(async () => {
        try {
          return await task(item, index);
        } catch (error) {
          run.clearQueue();
          throw error;
        }
      }),
    ),
  );
}
