import { uncompress } from "snappyjs";
import { ProtoError } from "./errors.js";

/**
 * Reads the uncompressed length that starts a raw snappy block: a little-endian base-128
 * varint of at most 32 bits. Answers -1 when the varint is missing or malformed.
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
  const input = Buffer.isBuffer(block)
    ? block
    : Buffer.from(block.buffer, block.byteOffset, block.byteLength);
  const produced = snappyOutputLength(input, declared);
  if (produced !== declared) {
    throw new ProtoError("snappy_corrupt", `declares ${declared} bytes, holds ${produced}`);
  }
  try {
    // snappyjs allocates exactly the declared length.
    return uncompress(input, maxBytes);
  } catch (error) {
    throw new ProtoError("snappy_corrupt", (error as Error).message);
  }
}

/**
 * Walks the tags of a raw snappy block and sums the bytes they produce, stopping past
 * `limit`; answers -1 for a malformed tag. snappyjs writes past the end of its output array
 * silently (typed arrays drop such writes) and never compares the result with the declared
 * length, so a lying header would give truncated data with no error; this pass, cheap beside
 * the copying (it reads tags, not literals), is what makes it an error. Format:
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
