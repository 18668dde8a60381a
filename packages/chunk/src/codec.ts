import { snappyCompress as compress, snappyUncompress as uncompress } from "@sieve/kit";
import { ChunkError } from "./errors.js";

/**
 * Snappy (raw block format, no framing) compresses every block and the symbol table:
 * `@sieve/kit`'s, native where it loads.
 */
export function snappyCompress(data: Uint8Array): Uint8Array {
  return compress(data);
}

/**
 * The uncompressed length a raw snappy block declares in its preamble (a varint), or -1
 * when the preamble is malformed. Read before decompressing, so that a damaged block
 * cannot make the decoder allocate more than the format allows.
 */
export function snappyDeclaredLength(data: Uint8Array): number {
  let result = 0;
  let scale = 1;
  for (let i = 0; i < 5 && i < data.byteLength; i++) {
    const b = data[i]!;
    result += (b & 0x7f) * scale;
    if (b < 0x80) return result;
    scale *= 0x80;
  }
  return -1;
}

/** Decompresses a block that must decompress to exactly `expectedLength` bytes. */
export function snappyUncompress(
  data: Uint8Array,
  expectedLength: number,
  where: string,
): Uint8Array {
  const declared = snappyDeclaredLength(data);
  if (declared !== expectedLength) {
    throw new ChunkError(
      "corrupt",
      `${where}: snappy declares ${declared} bytes, footer ${expectedLength}`,
    );
  }
  let out: Uint8Array;
  try {
    out = uncompress(data);
  } catch (err) {
    throw new ChunkError("corrupt", `${where}: snappy: ${(err as Error).message}`);
  }
  if (out.byteLength !== expectedLength) {
    throw new ChunkError("corrupt", `${where}: snappy produced ${out.byteLength} bytes`);
  }
  return out;
}
