/**
 * CRC-32C (Castagnoli, as iSCSI, ext4 and Loki's bloom pages use): the checksum of every
 * Sieve format (chunks, index segments, bloom blocks, the WAL, flush manifests). One
 * function, so no format can drift to another polynomial or sign convention.
 * (Queue records use plain CRC-32 on purpose; see `proto/src/queue-record.ts`.)
 */
import { createRequire } from "node:module";
import CRC32C from "crc-32/crc32c.js";

type Crc32cFn = (input: Uint8Array, initialState?: number) => number;

/**
 * `@node-rs/crc32`'s native CRC-32C (the CPU's CRC instructions), when it loads: an optional
 * dependency with prebuilt binaries per platform, so a platform without one falls back to
 * `crc-32`'s JavaScript. Loaded with `require` so that a missing binary is a caught error
 * at startup, not a failed import. Measured with `pnpm --filter @sieve/kit bench`.
 */
function loadNative(): Crc32cFn | undefined {
  try {
    const mod = createRequire(import.meta.url)("@node-rs/crc32") as { crc32c?: Crc32cFn };
    const fn = mod.crc32c;
    // RFC 3720 B.4: 32 bytes of zeros.
    if (typeof fn !== "function" || fn(new Uint8Array(32), 0) !== 0x8a9136aa) return undefined;
    return fn;
  } catch {
    return undefined;
  }
}

const native = loadNative();

/**
 * Below this many bytes the JavaScript table loop beats the native call, whose fixed cost
 * (about 0.4 µs through N-API) is more than the whole checksum of a small buffer.
 */
const NATIVE_MIN_BYTES = 512;

/**
 * The CRC-32C of `bytes`, unsigned (0 … 2³²−1). `seed` continues a checksum: the CRC of
 * `a` then `b` is `crc32c(b, crc32c(a))`.
 */
export function crc32c(bytes: Uint8Array, seed = 0): number {
  if (native !== undefined && bytes.length >= NATIVE_MIN_BYTES) return native(bytes, seed >>> 0);
  return CRC32C.buf(bytes, seed | 0) >>> 0;
}

/** Whether {@link crc32c} uses the native implementation for large buffers. */
export const nativeCrc32c = native !== undefined;
