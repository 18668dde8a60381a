import { xxhash64 } from "@sieve/bloom";

/**
 * A chunk's identity, shared by the ingester that writes it, the index that lists it, the
 * bloom that prunes it and the querier that fetches it. Timestamps are Unix nanoseconds as
 * `bigint` (Loki's push and query APIs are nanosecond-exact; a `number` is not past 2^53 ns).
 */
export interface ChunkRef {
  /** Validated tenant ID (safe in a storage key). */
  readonly tenant: string;
  /** The stream's fingerprint: xxhash64 of its canonical label set (`@sieve/labels`). */
  readonly fingerprint: bigint;
  /** Earliest entry timestamp, ns, inclusive. */
  readonly from: bigint;
  /** Latest entry timestamp, ns, inclusive. */
  readonly through: bigint;
  /**
   * The encoded object's {@link chunkChecksum} (unsigned 32 bits); the CRC-32C of the object
   * for chunks written before that existed.
   */
  readonly checksum: number;
}

/**
 * The object-store key of a chunk: `<tenant>/chunks/<fingerprint>/<from>-<through>-<checksum>`,
 * fingerprint as 16 lower-case hex digits, from and through as decimal nanoseconds, checksum
 * as 8 hex digits. The key names the content, so writing the same chunk twice is harmless.
 */
export function chunkKey(ref: ChunkRef): string {
  const fp = ref.fingerprint.toString(16).padStart(16, "0");
  const sum = ref.checksum.toString(16).padStart(8, "0");
  return `${ref.tenant}/chunks/${fp}/${ref.from}-${ref.through}-${sum}`;
}

/**
 * A chunk object's checksum, the last part of its key: the low 32 bits of xxhash64 (seed 0)
 * of its bytes. Not their CRC-32C: each section of a chunk carries its own CRC-32C, stored
 * little-endian, and a CRC over a message followed by that message's CRC is the same
 * whatever the message (CRC-32C is linear), so two chunks with the same sizes and footer
 * had the same CRC-32C however their lines differed. Chunks of one stream cut within one
 * millisecond (an OpenTelemetry SDK stamps logs in milliseconds) then had one key, and
 * the second flushed overwrote the first: acknowledged lines lost.
 */
export function chunkChecksum(bytes: Uint8Array): number {
  return Number(xxhash64(bytes) & 0xffffffffn);
}
