import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import xxhash from "xxhash-wasm";

/** What the filters accept as a key: text (hashed as UTF-8) or raw bytes. */
export type Key = string | Uint8Array;

/** The raw exports of xxhash-wasm's module that the hot path calls. */
interface RawXxhash {
  mem: WasmMemory;
  xxh64: (offset: number, length: number, seed: bigint) => bigint;
}

// The WebAssembly global, typed here: TypeScript's ES libs and @types/node 20 leave it out.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
  Memory: abstract new (...args: never[]) => WasmMemory;
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/**
 * xxhash-wasm's public `h64(string)` encodes with TextEncoder, calls the wasm `xxh64`, then
 * masks the BigInt result: 8.5 M hashes/s for 32-char keys on the 2-core machine. Calling the
 * wasm export directly, after copying an ASCII key into wasm memory with a charCodeAt loop,
 * does 12.6–13 M/s: the difference is most of a filter add. The package's API does not hand
 * out its module, but the package ships the module's bytes as a file (`workerd/xxhash.wasm`,
 * for Cloudflare's runtime, which imports it as a module). We read that file beside the
 * package's entry point, compile our own instance synchronously (its memory is then ours
 * alone), and check it against the public API on known inputs. If anything about that
 * differs (a new package layout or version), we fall back to the public API: slower, never
 * wrong. (Until issue 12 the bytes were caught by patching the global
 * `WebAssembly.instantiate` while the package initialised: a global no module should touch.)
 */
async function loadXxhash(): Promise<{ api: Awaited<ReturnType<typeof xxhash>>; raw?: RawXxhash }> {
  const api = await xxhash();
  try {
    const entry = createRequire(import.meta.url).resolve("xxhash-wasm");
    const source = readFileSync(join(dirname(entry), "..", "workerd", "xxhash.wasm"));
    const { exports } = new wasm.Instance(new wasm.Module(source), {});
    const raw = exports as unknown as RawXxhash;
    if (!(raw.mem instanceof wasm.Memory) || typeof raw.xxh64 !== "function") return { api };
    const probe = "sieve known-answer probe";
    const bytes = new TextEncoder().encode(probe);
    new Uint8Array(raw.mem.buffer).set(bytes);
    if (raw.xxh64(0, bytes.length, 0n) !== api.h64(probe)) return { api };
    return { api, raw };
  } catch {
    return { api };
  }
}

// Instantiated once, when this module is first imported: no hot path ever awaits.
const { api, raw } = await loadXxhash();

// The 64-bit result is split through a shared 8-byte buffer: one store and two loads, where
// `Number(h & 0xffffffffn)` and `Number(h >> 32n)` would allocate two more BigInts.
const split64 = new BigUint64Array(1);
const halves = new Uint32Array(split64.buffer);

/**
 * The low and high 32 bits of the last key's xxhash64, set by {@link hashKey}. Filters read
 * them straight after the call, so a key's hash is computed once and never allocated.
 * Little-endian platforms only (all Node.js targets): index 0 is the low half.
 */
export const lastHash: Readonly<Uint32Array> = halves;

/** Keys hashed per call of the batch module. */
export const BATCH = 512;
// wasm memory layout: a batch's results, its key offsets, then key bytes.
const RESULTS = 0;
const OFFSETS = RESULTS + BATCH * 8;
const KEYS_AT = OFFSETS + (BATCH + 1) * 4;

const encoder = new TextEncoder();
let memory = raw === undefined ? new Uint8Array(0) : new Uint8Array(raw.mem.buffer);

/** Where keys are written: past the batch's results and offsets, which a single hash keeps. */
let keyArea = memory.subarray(KEYS_AT);

/** Makes wasm memory hold at least `bytes`; growing detaches the old views. */
function reserve(rawXxhash: RawXxhash, bytes: number): void {
  if (bytes <= memory.length) return;
  rawXxhash.mem.grow(Math.ceil((bytes - memory.length) / 65536));
  memory = new Uint8Array(rawXxhash.mem.buffer);
  keyArea = memory.subarray(KEYS_AT);
}

/** Hashes `key` with xxhash64 (seed 0) into {@link lastHash}. */
export function hashKey(key: Key): void {
  if (raw === undefined) {
    split64[0] = typeof key === "string" ? api.h64(key) : api.h64Raw(key);
    return;
  }
  let length = key.length;
  if (typeof key === "string") {
    if (length * 3 > keyArea.length) reserve(raw, KEYS_AT + length * 3);
    length = encoder.encodeInto(key, keyArea).written;
  } else {
    if (length > keyArea.length) reserve(raw, KEYS_AT + length);
    keyArea.set(key);
  }
  split64[0] = raw.xxh64(KEYS_AT, length, 0n);
}

/** murmur3's 32-bit finaliser (fmix32): every input bit affects every output bit. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** xxhash64 of `key` as an unsigned 64-bit BigInt: the reference XXH64 function. */
export function xxhash64(key: Key, seed = 0n): bigint {
  return typeof key === "string" ? api.h64(key, seed) : api.h64Raw(key, seed);
}

/** Whether the fast path (direct wasm calls) is in use; false means the public API fallback. */
export const fastHashing = raw !== undefined;

/**
 * A second, hand-assembled wasm module that imports xxhash-wasm's `xxh64` and its memory and
 * hashes a whole batch in one call, storing each 64-bit result in memory: no JS-to-wasm call
 * and no BigInt per key. No library emits this, so here it is, 80 bytes with its source:
 *
 *   (func (export "hashMany") (param $offsets i32) (param $count i32) (param $out i32)
 *     (local $i i32)
 *     (block (br_if 0 (i32.eqz (local.get $count)))
 *       (loop
 *         ;; out[i] = xxh64(start, end - start, 0), start = offsets[i], end = offsets[i + 1]
 *         (i64.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 3)))
 *           (call $xxh64 (i32.load (i32.add (local.get $offsets) (i32.shl (local.get $i) (i32.const 2))))
 *             (i32.sub (i32.load offset=4 (…same address…)) (i32.load (…same address…)))
 *             (i64.const 0)))
 *         (br_if 0 (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $count))))))
 */
function batchModuleBytes(): Uint8Array {
  const I32 = 0x7f;
  const I64 = 0x7e;
  const text = (name: string): number[] => [name.length, ...new TextEncoder().encode(name)];
  const section = (id: number, body: number[]): number[] => [id, ...leb128(body.length), ...body];
  const address = (field: number): number[] => [
    0x20,
    0x00,
    0x20,
    0x03,
    0x41,
    0x02,
    0x74,
    0x6a,
    0x28,
    0x02,
    field, // i32.load offsets[i]
  ];
  const code = [
    0x01,
    0x01,
    I32, // one local: $i
    0x02,
    0x40,
    0x20,
    0x01,
    0x45,
    0x0d,
    0x00, // block; br_if 0 (count == 0)
    0x03,
    0x40, // loop
    0x20,
    0x02,
    0x20,
    0x03,
    0x41,
    0x03,
    0x74,
    0x6a, // out + i*8
    ...address(0), // start
    ...address(4),
    ...address(0),
    0x6b, // end - start
    0x42,
    0x00,
    0x10,
    0x00, // i64.const 0; call $xxh64
    0x37,
    0x03,
    0x00, // i64.store
    0x20,
    0x03,
    0x41,
    0x01,
    0x6a,
    0x22,
    0x03,
    0x20,
    0x01,
    0x49,
    0x0d,
    0x00, // i++ < count: continue
    0x0b,
    0x0b,
    0x0b, // end loop, end block, end function
  ];
  return Uint8Array.from([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, [0x02, 0x60, 0x03, I32, I32, I64, 0x01, I64, 0x60, 0x03, I32, I32, I32, 0x00]),
    ...section(2, [
      0x02,
      ...text("x"),
      ...text("h"),
      0x00,
      0x00,
      ...text("x"),
      ...text("m"),
      0x02,
      0x00,
      0x00,
    ]),
    ...section(3, [0x01, 0x01]),
    ...section(7, [0x01, ...text("hashMany"), 0x00, 0x01]),
    ...section(10, [0x01, ...leb128(code.length), ...code]),
  ]);
}

function leb128(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

const hashManyWasm = ((): ((offsets: number, count: number, out: number) => void) | undefined => {
  if (raw === undefined) return undefined;
  try {
    const instance = new wasm.Instance(new wasm.Module(batchModuleBytes()), {
      x: { h: raw.xxh64, m: raw.mem },
    });
    return instance.exports.hashMany as (offsets: number, count: number, out: number) => void;
  } catch {
    return undefined;
  }
})();

const fallbackResults = new Uint32Array(BATCH * 2);

/**
 * Hashes keys[from, from + count) (count ≤ {@link BATCH}) and answers a view of their
 * hashes as (low, high) 32-bit pairs: entry 2i is the low half of key from + i. The view is
 * valid until the next call. Strings that are all ASCII are joined and encoded in one
 * `encodeInto`, which is most of the gain over hashing them one by one.
 */
export function hashBatch(keys: readonly Key[], from: number, count: number): Uint32Array {
  if (raw === undefined || hashManyWasm === undefined) {
    for (let i = 0; i < count; i++) {
      hashKey(keys[from + i]!);
      fallbackResults[2 * i] = halves[0]!;
      fallbackResults[2 * i + 1] = halves[1]!;
    }
    return fallbackResults.subarray(0, 2 * count);
  }
  let joined = "";
  let ascii = true;
  for (let i = 0; i < count; i++) {
    const key = keys[from + i]!;
    if (typeof key !== "string") {
      ascii = false;
      break;
    }
    joined += key;
  }
  if (ascii && KEYS_AT + joined.length * 3 > memory.length)
    reserve(raw, KEYS_AT + joined.length * 3);
  let offsets = new Uint32Array(memory.buffer, OFFSETS, count + 1);
  if (ascii && encoder.encodeInto(joined, keyArea).written === joined.length) {
    let at = KEYS_AT;
    for (let i = 0; i < count; i++) {
      offsets[i] = at;
      at += (keys[from + i] as string).length;
    }
    offsets[count] = at;
  } else {
    let at = KEYS_AT;
    for (let i = 0; i < count; i++) {
      const key = keys[from + i]!;
      const room = at + (typeof key === "string" ? key.length * 3 : key.length);
      if (room > memory.length) {
        reserve(raw, room);
        offsets = new Uint32Array(memory.buffer, OFFSETS, count + 1);
      }
      offsets[i] = at;
      if (typeof key === "string") {
        at += encoder.encodeInto(key, memory.subarray(at)).written;
      } else {
        memory.set(key, at);
        at += key.length;
      }
    }
    offsets[count] = at;
  }
  hashManyWasm(OFFSETS, count, RESULTS);
  return new Uint32Array(memory.buffer, RESULTS, 2 * count);
}

/**
 * Calls `visit` once per batch of up to {@link BATCH} keys with their hashes (see
 * {@link hashBatch}): the batch APIs of every filter are this loop around their own
 * per-hash method.
 */
export function eachBatch(
  keys: readonly Key[],
  visit: (hashes: Uint32Array, from: number, count: number) => void,
): void {
  for (let from = 0; from < keys.length; from += BATCH) {
    const count = Math.min(BATCH, keys.length - from);
    visit(hashBatch(keys, from, count), from, count);
  }
}

/** Adds every key to `filter`, hashing them in batches (about twice as fast as one add a key). */
export function addAllHashed(
  filter: { addHashed(lo: number, hi: number): void },
  keys: readonly Key[],
): void {
  eachBatch(keys, (hashes, _from, count) => {
    for (let i = 0; i < count; i++) filter.addHashed(hashes[2 * i]!, hashes[2 * i + 1]!);
  });
}

/** Tests every key in batches: out[i] is 1 when keys[i] may be present, 0 when it is absent. */
export function testAllHashed(
  filter: { testHashed(lo: number, hi: number): boolean },
  keys: readonly Key[],
  out: Uint8Array,
): Uint8Array {
  eachBatch(keys, (hashes, from, count) => {
    for (let i = 0; i < count; i++) {
      out[from + i] = filter.testHashed(hashes[2 * i]!, hashes[2 * i + 1]!) ? 1 : 0;
    }
  });
  return out;
}
