/**
 * `lru-cache` options bounding a cache at `entries` entries by counting each as a size of
 * one. With `max` instead, lru-cache allocates its arrays for all of them up front: building
 * a querier took 16 ms more that way (bench:query's cold queries build one each), for
 * caches that mostly hold a few thousand.
 */
export function countedUpTo(entries: number): { maxSize: number; sizeCalculation: () => 1 } {
  return { maxSize: entries, sizeCalculation: () => 1 };
}
