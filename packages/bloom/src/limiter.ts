import { BloomFilter } from "./classic.js";
import { BloomError } from "./errors.js";
import type { Key } from "./hash.js";

/** Options of a {@link Limiter}. */
export interface LimiterOptions {
  /** Distinct items admitted per interval. */
  readonly maxItems: number;
  /** Length of an interval, in milliseconds; the first starts when the limiter is made. */
  readonly intervalMs: number;
  /** The clock, in milliseconds; injectable for tests. */
  readonly now?: () => number;
  /**
   * False-positive rate of the interval's filter (default 0.001). A false positive admits a
   * new item as if it had been seen, once the limit is reached: the error is on the side of
   * letting an item through, never of refusing one already admitted.
   */
  readonly fp?: number;
}

/**
 * Admits at most `maxItems` distinct items per interval, with VictoriaMetrics'
 * `lib/bloomfilter.Limiter` semantics: an item already admitted in the current interval is
 * always admitted again; a new one is admitted while there is room. At each interval the
 * filter is replaced by an empty one. Memory is one filter sized for `maxItems`, however
 * many items are offered.
 */
export class Limiter {
  readonly maxItems: number;
  readonly intervalMs: number;
  private readonly now: () => number;
  private readonly filter: BloomFilter;
  private intervalStart: number;
  private admitted = 0;

  constructor(options: LimiterOptions) {
    const { maxItems, intervalMs, now = Date.now, fp = 0.001 } = options;
    if (!(Number.isInteger(maxItems) && maxItems >= 0)) {
      throw new BloomError("invalid_parameters", `maxItems ${maxItems} (an integer ≥ 0)`);
    }
    if (!(Number.isFinite(intervalMs) && intervalMs > 0)) {
      throw new BloomError("invalid_parameters", `intervalMs ${intervalMs} (> 0)`);
    }
    this.maxItems = maxItems;
    this.intervalMs = intervalMs;
    this.now = now;
    this.filter = BloomFilter.forCapacity(Math.max(1, maxItems), fp);
    this.intervalStart = now();
  }

  /** Whether `item` is admitted: seen already this interval, or room for one more. */
  add(item: Key): boolean {
    this.rotate();
    if (this.admitted >= this.maxItems) return this.filter.test(item);
    if (!this.filter.testAndAdd(item)) this.admitted++;
    return true;
  }

  /** Distinct items admitted in the current interval. */
  get count(): number {
    this.rotate();
    return this.admitted;
  }

  private rotate(): void {
    const elapsed = this.now() - this.intervalStart;
    if (elapsed < this.intervalMs) return;
    this.intervalStart += Math.floor(elapsed / this.intervalMs) * this.intervalMs;
    this.filter.clear();
    this.admitted = 0;
  }
}
