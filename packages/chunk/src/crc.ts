import CRC32C from "crc-32/crc32c.js";

/** CRC-32C (Castagnoli, as iSCSI and Loki use) of `data`, unsigned. */
export function crc32c(data: Uint8Array): number {
  return CRC32C.buf(data, 0) >>> 0;
}
