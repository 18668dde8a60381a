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
  /** CRC-32C of the encoded chunk object, unsigned. */
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
