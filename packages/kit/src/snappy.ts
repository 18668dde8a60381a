/**
 * Raw snappy (the block format, no framing): what Loki's push bodies and Sieve's chunk
 * blocks are compressed with. One place, so that every user gets the fast path.
 *
 * `snappy` (napi-rs, Rust's `snap`) when it loads: an optional native binding with
 * prebuilt binaries per platform, measured at 2.5× snappyjs's speed both ways on log lines
 * (`pnpm --filter @sieve/kit bench`), and it checks a block whole: a length header that
 * lies, a copy before the start, or bytes left over are errors. Where it does not load,
 * `snappyjs` does the work and {@link snappyOutputLength} the checking snappyjs skips.
 */
import { createRequire } from "node:module";
import { compress as jsCompress, uncompress as jsUncompress } from "snappyjs";

interface NativeSnappy {
  compressSync(input: Uint8Array, options?: { copyOutputData?: boolean }): Buffer;
  uncompressSync(
    input: Uint8Array,
    options?: { asBuffer?: boolean; copyOutputData?: boolean },
  ): Buffer | string;
}

/**
 * Results copied into memory V8 allocates: handed over as they are, a compressed block
 * keeps the whole worst-case capacity Rust reserved (2.4× its length on log lines,
 * measured in RSS) in memory V8's collector does not count. The copy costs nothing
 * measurable (0.25 ms either way for 100 KB).
 */
const COPY = { copyOutputData: true } as const;
const COPY_BUFFER = { asBuffer: true, copyOutputData: true } as const;

function loadNative(): NativeSnappy | undefined {
  try {
    const mod = createRequire(import.meta.url)("snappy") as Partial<NativeSnappy>;
    if (typeof mod.compressSync !== "function" || typeof mod.uncompressSync !== "function") {
      return undefined;
    }
    const probe = Buffer.from("snappy, snappy, snappy");
    const back = mod.uncompressSync(mod.compressSync(probe), { asBuffer: true });
    return Buffer.isBuffer(back) && back.equals(probe) ? (mod as NativeSnappy) : undefined;
  } catch {
    return undefined;
  }
}

const native = process.env.SIEVE_SNAPPY === "js" ? undefined : loadNative();

/** Which implementation runs: `native` or `js` (`SIEVE_SNAPPY=js` forces the latter). */
export const snappyImplementation: "native" | "js" = native === undefined ? "js" : "native";

/** Compresses `data` as one raw snappy block. */
export function snappyCompress(data: Uint8Array): Uint8Array {
  return native === undefined ? jsCompress(data) : native.compressSync(data, COPY);
}

/**
 * The uncompressed length a raw snappy block declares in its preamble (a little-endian
 * base-128 varint of at most 32 bits), or -1 when it is missing or malformed. Read it,
 * and bound it, before {@link snappyUncompress}.
 */
export function snappyDeclaredLength(block: Uint8Array): number {
  let length = 0;
  for (let i = 0, shift = 0; i < 5 && i < block.length; i++, shift += 7) {
    const byte = block[i]!;
    if (i === 4 && byte > 0x0f) return -1;
    length += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return length;
  }
  return -1;
}

/**
 * Decompresses a raw snappy block, which must produce exactly what it declares. The
 * caller bounds the declared length first ({@link snappyDeclaredLength}): decompressing
 * allocates it. Throws an `Error` saying what is wrong with a damaged block.
 */
export function snappyUncompress(block: Uint8Array): Uint8Array {
  const declared = snappyDeclaredLength(block);
  if (declared < 0) throw new Error("snappy: bad length header");
  if (native !== undefined) {
    const out = native.uncompressSync(block, COPY_BUFFER) as Buffer;
    if (out.length !== declared) {
      throw new Error(`snappy: declares ${declared} bytes, produced ${out.length}`);
    }
    return out;
  }
  const produced = snappyOutputLength(block, declared);
  if (produced !== declared) {
    throw new Error(`snappy: declares ${declared} bytes, holds ${produced}`);
  }
  return jsUncompress(block, declared);
}

/** The largest output {@link primeSnappy} makes: past a chunk's sections and blocks. */
const PRIME_MAX_BYTES = 1 << 20;

/**
 * Readies the native binding's allocator on this thread, for a thread that answers queries
 * to call as it warms up. The binding's outputs come from its own allocator (Rust's
 * mimalloc), which gives each thread memory of its own and each size of output pages of
 * its own: the first output of a size on a thread faults in fresh pages, which the kernel
 * zeroes (huge pages here). On this project's 2-core VM the first needle after a start to
 * read a chunk's 126 KB metadata section spent 5-9 ms of the main thread's CPU in one such
 * call (`perf`: the kernel's clear_page under mimalloc's free list), which took 0.03 ms
 * when repeated. One output of each size from 4 KB to 1 MB (×1.25 a step) faults those
 * pages in here instead: ~30-80 ms a thread. Answers the milliseconds it took (0 without
 * the native binding: snappyjs's outputs are V8's).
 */
export function primeSnappy(): number {
  if (native === undefined) return 0;
  const started = performance.now();
  for (let size = 4096; size <= PRIME_MAX_BYTES; size = Math.ceil(size * 1.25)) {
    native.uncompressSync(native.compressSync(Buffer.alloc(size), COPY), COPY_BUFFER);
  }
  return performance.now() - started;
}

/**
 * Walks the tags of a raw snappy block and sums the bytes they produce, stopping past
 * `limit`; answers -1 for a malformed tag. snappyjs writes past the end of its output array
 * silently (typed arrays drop such writes) and never compares the result with the declared
 * length, so a lying header would give truncated data with no error; this pass (it reads
 * tags, not literals) is what makes it one. Format:
 * https://github.com/google/snappy/blob/main/format_description.txt
 */
function snappyOutputLength(block: Uint8Array, limit: number): number {
  let pos = 0;
  while (pos < block.length && (block[pos]! & 0x80) !== 0) pos++;
  pos++; // past the length varint
  let out = 0;
  while (pos < block.length) {
    const tag = block[pos++]!;
    switch (tag & 3) {
      case 0: {
        let len = (tag >>> 2) + 1;
        if (len > 60) {
          const extra = len - 60;
          if (pos + extra > block.length) return -1;
          len = 0;
          for (let i = 0; i < extra; i++) len += block[pos + i]! * 2 ** (8 * i);
          len += 1;
          pos += extra;
        }
        pos += len;
        if (pos > block.length) return -1;
        out += len;
        break;
      }
      case 1:
        out += ((tag >>> 2) & 7) + 4;
        pos += 1;
        break;
      case 2:
        out += (tag >>> 2) + 1;
        pos += 2;
        break;
      default:
        out += (tag >>> 2) + 1;
        pos += 4;
    }
    if (pos > block.length || out > limit) return -1;
  }
  return out;
}
