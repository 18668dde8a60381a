import { RibbonFilter } from "@sieve/bloom";
import { chunkKeyHigh, chunkKeyLow, type BloomRecord } from "@sieve/index";
import type { FilterSeries } from "@sieve/proto";
import type { LoadedBlock } from "./block.js";

/** A group tested on its series' tokens first. */
export const BY_SERIES = 0;
/** A group tested chunk by chunk, on tokens keyed by each chunk's checksum. */
export const BY_CHUNK = 1;
/** A group tested through its record alone (chunk tokens keyed by prefix bytes: older blooms). */
export const BY_RECORD = 2;

/**
 * What testing a request's series needs before any token is looked up, kept for a series
 * array that comes back: the querier sends a selection's groups as one array, the same for
 * every query over the selection's whole span (plan.ts), and a needle over 500 groups spent
 * two thirds of its bloom stage finding each group's bloom (its block, its record, its
 * parsed labels) and a sixth looking tokens up. Built only where every group's bloom was cut
 * from a block held whole; good while each of those blocks is still the one held under its
 * key ({@link stillHeld}), and dropped when the cache evicts anything (the records would
 * hold an evicted block's filters in memory).
 */
export class GroupTable {
  /**
   * A ribbon filter's values where they lie, and its shape, by group (`ribbon` -1: another
   * kind of filter, asked through its record): read through `ribbonLookup` from flat
   * arrays, a lookup's first loads are its values, not the filter object, then its view,
   * then its buffer, each a cache miss on a needle that follows another server's (as
   * bench:peers asks them).
   */
  readonly ribbon: Int32Array;
  readonly views: DataView[] = [];
  readonly offset: Int32Array;
  readonly slots: Int32Array;
  readonly bits: Uint8Array;
  readonly seed: Uint32Array;
  /** Which tokens each group's bloom holds (1: yes). */
  readonly keys: Uint8Array;
  readonly values: Uint8Array;
  /** How each group is tested: {@link BY_SERIES}, {@link BY_CHUNK} or {@link BY_RECORD}. */
  readonly mode: Uint8Array;
  /** Group i's chunks are [firstChunk[i], firstChunk[i + 1]) of the arrays below. */
  readonly firstChunk: Int32Array;
  /** Each chunk's `chunkKeyLow` and `chunkKeyHigh`, in the groups' order. */
  readonly chunkLow: Int32Array;
  readonly chunkHigh: Int32Array;
  /** The groups' chunks, all told. */
  readonly chunks: number;
  /** A stream label name → 1 for each group whose series has it (a test's leaf on it passes). */
  private readonly named = new Map<string, Uint8Array>();

  constructor(
    readonly series: readonly FilterSeries[],
    readonly records: readonly BloomRecord[],
    readonly labels: readonly Readonly<Record<string, string>>[],
    /** The blocks the records were cut from, by key. */
    private readonly blocks: ReadonlyMap<string, LoadedBlock | undefined>,
  ) {
    const n = series.length;
    this.chunks = series.reduce((sum, s) => sum + s.chunks.length, 0);
    this.ribbon = new Int32Array(n).fill(-1);
    this.offset = new Int32Array(n);
    this.slots = new Int32Array(n);
    this.bits = new Uint8Array(n);
    this.seed = new Uint32Array(n);
    this.keys = new Uint8Array(n);
    this.values = new Uint8Array(n);
    this.mode = new Uint8Array(n);
    this.firstChunk = new Int32Array(n + 1);
    this.chunkLow = new Int32Array(this.chunks);
    this.chunkHigh = new Int32Array(this.chunks);
    const buffers = new Map<ArrayBufferLike, number>();
    let at = 0;
    for (let i = 0; i < n; i++) {
      const { filter, metadataTokens } = records[i]!;
      if (filter instanceof RibbonFilter) {
        const { buffer, byteOffset } = filter.values;
        let view = buffers.get(buffer);
        if (view === undefined) {
          buffers.set(buffer, (view = this.views.length));
          this.views.push(new DataView(buffer));
        }
        this.ribbon[i] = view;
        this.offset[i] = byteOffset;
        this.slots[i] = filter.slots;
        this.bits[i] = filter.bits;
        this.seed[i] = filter.seed;
      }
      this.keys[i] = metadataTokens.keys ? 1 : 0;
      this.values[i] = metadataTokens.values ? 1 : 0;
      const { chunks } = series[i]!;
      // A bloom whose chunks are all prefixed may hold nothing else (gateway.ts, judge).
      if (!(chunks.length > 0 && chunks.every((c) => c.prefixed))) this.mode[i] = BY_SERIES;
      else this.mode[i] = metadataTokens.checksumKeys === true ? BY_CHUNK : BY_RECORD;
      for (const c of chunks) {
        this.chunkLow[at] = chunkKeyLow(c.checksum);
        this.chunkHigh[at++] = chunkKeyHigh(c.checksum);
      }
      this.firstChunk[i + 1] = at;
    }
  }

  /** Whether every block is still the one held under its key (`held` answers the cache's). */
  stillHeld(held: (key: string) => LoadedBlock | undefined): boolean {
    for (const [key, block] of this.blocks) if (held(key) !== block) return false;
    return true;
  }

  /** By group, 1 when `name` is one of the series' stream labels. */
  streamLabel(name: string): Uint8Array {
    let out = this.named.get(name);
    if (out === undefined) {
      out = new Uint8Array(this.labels.length);
      this.labels.forEach((labels, i) => (out![i] = name in labels ? 1 : 0));
      this.named.set(name, out);
    }
    return out;
  }
}
