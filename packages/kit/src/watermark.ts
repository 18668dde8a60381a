/**
 * How old the oldest entry an ingester holds in memory is, shared between threads: each
 * ingester of a process (one per ingest worker) writes its slot of a SharedArrayBuffer,
 * and a query worker reads every slot before it asks them anything. A query whose range
 * ends at or before every slot's oldest entry cannot find a line in memory, so it skips
 * the ingesters: no hop through the main thread to every ingest worker and back. Needle
 * queries over flushed data (and everything after a restart) pay only for the store.
 *
 * A slot is the minimum timestamp (Unix ns) over the ingester's heads and its chunks cut
 * but not yet flushed, or {@link MemoryWatermark.NONE} when it holds nothing. It only
 * errs low (asks when it need not): it is lowered as entries arrive and raised only once a
 * flush has made the data it covered readable from the store (see the ingester's flush).
 * A slot that has never been written reads as 0: a process whose ingesters are not set up
 * yet is asked, as before.
 */
export class MemoryWatermark {
  /** A slot's value when its ingester holds nothing. */
  static readonly NONE = 0x7fff_ffff_ffff_ffffn;

  private readonly slots: BigInt64Array;

  /** A buffer for `ingesters` slots, every one reading "may hold anything" until written. */
  static buffer(ingesters: number): SharedArrayBuffer {
    return new SharedArrayBuffer(8 * Math.max(1, ingesters));
  }

  /** The slot `slot` of `buffer` (written by one ingester, read by every query). */
  constructor(
    buffer: SharedArrayBuffer,
    private readonly slot: number,
  ) {
    this.slots = new BigInt64Array(buffer);
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots.length) {
      throw new RangeError(`slot ${slot} is outside the buffer's ${this.slots.length}`);
    }
  }

  /** An entry at `ts` is now in memory. */
  lower(ts: bigint): void {
    if (ts < Atomics.load(this.slots, this.slot)) Atomics.store(this.slots, this.slot, ts);
  }

  /** The oldest entry in memory is now at `ts` (undefined: none), after a flush. */
  set(ts: bigint | undefined): void {
    Atomics.store(this.slots, this.slot, ts ?? MemoryWatermark.NONE);
  }
}

/**
 * Whether any ingester writing `buffer` may hold an entry before `end` (Unix ns,
 * exclusive): false only when every slot says its oldest entry is at `end` or later.
 */
export function memoryMayHold(buffer: SharedArrayBuffer, end: bigint): boolean {
  const slots = new BigInt64Array(buffer);
  for (let i = 0; i < slots.length; i++) if (Atomics.load(slots, i) < end) return true;
  return false;
}
