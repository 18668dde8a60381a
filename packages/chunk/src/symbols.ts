import type { ByteWriter } from "./bytes.js";
import { ByteReader, utf8 } from "./bytes.js";

/**
 * A chunk's symbol table, read lazily: the constructor checks the count, the lengths are
 * walked (checking that no byte is left over) the first time a symbol is wanted, and a
 * string is decoded the first time it is asked for. A needle query looks up a few values
 * by their bytes and decodes only the symbols of the entries it reads; the table of a
 * chunk of unique trace ids holds tens of thousands, and in a chunk a bloom kept by false
 * positive the needle's bytes are not there at all, which one search of the table's bytes
 * answers without walking it.
 */
export class SymbolTable {
  readonly count: number;
  private readonly buf: Buffer;
  /** Where the first symbol's length starts. */
  private readonly first: number;
  /** Where symbol i's UTF-8 bytes start and end, once walked. */
  private bounds: { readonly starts: Uint32Array; readonly ends: Uint32Array } | undefined;
  private readonly decoded: (string | undefined)[];

  constructor(
    raw: Uint8Array,
    expectedCount: number,
    private readonly where = "symbol table",
  ) {
    const r = new ByteReader(raw, where);
    const count = r.uvarint(raw.byteLength);
    if (count !== expectedCount) r.fail(`${count} symbols, footer says ${expectedCount}`);
    this.count = count;
    this.first = r.pos;
    this.buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    this.decoded = new Array<string | undefined>(count);
  }

  /** Symbol `i` (which must be in [0, count)); ChunkError `corrupt` if not valid UTF-8. */
  get(i: number): string {
    let s = this.decoded[i];
    if (s === undefined) {
      const { starts, ends } = this.walk();
      s = utf8(this.buf, starts[i]!, ends[i]!);
      if (s === undefined) return new ByteReader(this.buf, this.where).fail("invalid UTF-8");
      this.decoded[i] = s;
    }
    return s;
  }

  /**
   * The ids of `s` (none when the chunk does not hold it; a writer stores each string once,
   * but a reader must not miss a second copy). Compares bytes, decodes nothing; when the
   * bytes occur nowhere in the table, walks nothing either (14 µs instead of 76 for a
   * table of 5,300 trace and span ids, measured).
   */
  idsOf(s: string): number[] {
    const want = Buffer.from(s, "utf8");
    const n = want.byteLength;
    const buf = this.buf;
    if (n > 0 && buf.indexOf(want, this.first) < 0) return [];
    const { starts, ends } = this.walk();
    const out: number[] = [];
    for (let i = 0; i < this.count; i++) {
      const start = starts[i]!;
      if (ends[i]! - start !== n) continue;
      if (n === 0 || (buf[start] === want[0] && buf.compare(want, 0, n, start, start + n) === 0))
        out.push(i);
    }
    return out;
  }

  /** Checks what the constructor left for first use: that the lengths add up to the table. */
  check(): void {
    this.walk();
  }

  /** Walks the lengths once; throws a ChunkError when they do not add up to the table. */
  private walk(): { readonly starts: Uint32Array; readonly ends: Uint32Array } {
    return (this.bounds ??= this.lengths());
  }

  private lengths(): { starts: Uint32Array; ends: Uint32Array } {
    const r = new ByteReader(this.buf, this.where);
    r.pos = this.first;
    const starts = new Uint32Array(this.count);
    const ends = new Uint32Array(this.count);
    for (let i = 0; i < this.count; i++) {
      const n = r.uvarint(r.remaining);
      starts[i] = r.pos;
      r.pos += n;
      ends[i] = r.pos;
    }
    r.expectEnd();
    return { starts, ends };
  }
}

/**
 * The symbol ids each block's entries refer to (version 2): what lets a reader skip the
 * blocks that cannot hold a metadata value. Stored per block as a count, the first id and
 * then each gap less one, so the runs of new ids a block interns cost a zero byte each
 * before compression. Decoded (and checked) at the first question: a chunk that does not
 * hold a query's value is never asked one.
 */
export class BlockSymbols {
  /** Every block's sorted ids, one after the other; block b's are [bounds[b], bounds[b+1]). */
  private lists: { readonly ids: Uint32Array; readonly bounds: Uint32Array } | undefined;

  constructor(
    private readonly raw: Uint8Array,
    private readonly blockCount: number,
    private readonly symbolCount: number,
  ) {}

  /** Whether block `b`'s entries refer to symbol `id`. */
  has(b: number, id: number): boolean {
    const { ids, bounds } = this.decode();
    let lo = bounds[b]!;
    let hi = bounds[b + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const v = ids[mid]!;
      if (v === id) return true;
      if (v < id) lo = mid + 1;
      else hi = mid;
    }
    return false;
  }

  /** Decodes the lists once; throws a ChunkError when they are damaged. */
  decode(): { readonly ids: Uint32Array; readonly bounds: Uint32Array } {
    return (this.lists ??= this.read());
  }

  private read(): { ids: Uint32Array; bounds: Uint32Array } {
    const { raw, blockCount, symbolCount } = this;
    const r = new ByteReader(raw, "block symbols");
    const bounds = new Uint32Array(blockCount + 1);
    // Each id takes at least one byte: bounds the array before it is allocated.
    const ids = new Uint32Array(raw.byteLength);
    let k = 0;
    for (let b = 0; b < blockCount; b++) {
      bounds[b] = k;
      const n = r.uvarint(symbolCount);
      let id = -1;
      for (let j = 0; j < n; j++) {
        id += 1 + r.uvarint(symbolCount);
        if (id >= symbolCount) r.fail(`block ${b} refers to symbol ${id} of ${symbolCount}`);
        ids[k++] = id;
      }
    }
    bounds[blockCount] = k;
    r.expectEnd();
    return { ids: ids.subarray(0, k), bounds };
  }
}

/** Writes the block symbols section's payload: `lists` holds each block's sorted, distinct ids. */
export function writeBlockSymbols(w: ByteWriter, lists: readonly Uint32Array[]): void {
  for (const ids of lists) {
    w.uvarint(ids.length);
    let prev = -1;
    for (const id of ids) {
      w.uvarint(id - prev - 1);
      prev = id;
    }
  }
}

/** The sorted distinct values of `ids` (which it sorts in place). */
export function sortedDistinct(ids: Uint32Array): Uint32Array {
  ids.sort();
  let n = 0;
  for (let i = 0; i < ids.length; i++) {
    if (n === 0 || ids[i] !== ids[n - 1]) ids[n++] = ids[i]!;
  }
  return ids.slice(0, n);
}
