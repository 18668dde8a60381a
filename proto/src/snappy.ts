import { snappyDeclaredLength, snappyUncompress as uncompress } from "@sieve/kit";
import { ProtoError } from "./errors.js";

export { snappyDeclaredLength };

/**
 * Decompresses a raw snappy block (the format Loki clients send, not the framed stream
 * format), refusing before any allocation when the declared length exceeds `maxBytes`: a
 * compression bomb costs the bytes of its header. Throws a {@link ProtoError}
 * (`snappy_too_large` carries the declared length in `declaredBytes`).
 */
export function snappyUncompress(block: Uint8Array, maxBytes: number): Buffer {
  const declared = snappyDeclaredLength(block);
  if (declared < 0) throw new ProtoError("snappy_corrupt", "bad length header");
  if (declared > maxBytes) {
    throw Object.assign(
      new ProtoError("snappy_too_large", `declares ${declared} bytes, limit ${maxBytes}`),
      { declaredBytes: declared },
    );
  }
  let out: Uint8Array;
  try {
    out = uncompress(block);
  } catch (error) {
    throw new ProtoError("snappy_corrupt", (error as Error).message);
  }
  return Buffer.isBuffer(out) ? out : Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}
