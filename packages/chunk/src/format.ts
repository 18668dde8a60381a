/**
 * Chunk format, version 3 (docs/formats.md, "Chunks", has the byte-by-byte table).
 *
 *   header   "SVCK" | u8 version=2 | u8 codec=1 (snappy) | u16 reserved=0
 *   block*   snappy(payload) | u32le CRC-32C(snappy bytes)
 *   symbols  snappy(uvarint count, count × (uvarint len, UTF-8 bytes)) | u32le CRC-32C
 *   blockSymbols (version 2) snappy(blockCount × (uvarint n, n × uvarint: the block's
 *            first symbol id, then each next id − previous − 1)) | u32le CRC-32C
 *   filter   (version 3) the symbols' fingerprints, Golomb-Rice coded (filter.ts),
 *            uncompressed | u32le CRC-32C
 *   footer   uvarint symbolsOffset, symbolsLength, symbolsRawLength, symbolCount,
 *            uvarint blockCount, blockCount × (uvarint offset, length, rawLength,
 *            varint minTs (zig-zag), uvarint maxTs − minTs, uvarint entries),
 *            (version 2) uvarint blockSymbolsLength, blockSymbolsRawLength,
 *            (version 3) uvarint filterLength
 *   trailer  u32le footerLength | u32le CRC-32C(footer)
 *
 *   payload  varint first ts (zig-zag, = the block's minTs), then entries × (uvarint
 *            ts − previous ts (absent for the first), uvarint lineLength, line UTF-8,
 *            uvarint pairs, pairs × (uvarint name symbol, uvarint value symbol)), sorted
 *            by timestamp.
 *
 * Sections are contiguous: the first block starts at HEADER_BYTES, each next section where
 * the previous ended, the footer ends where the trailer starts; a decoder checks that.
 */

/** "SVCK": Sieve chunk. */
export const MAGIC = Uint8Array.from([0x53, 0x56, 0x43, 0x4b]);
/** The format version this code writes; it reads this one, version 2 and version 1. */
export const VERSION = 3;
/** Version 2: no symbol filter, so a lookup searches the symbol table. */
export const VERSION_2 = 2;
/** Version 1: no block symbols, so every block may hold any of the chunk's symbols. */
export const VERSION_1 = 1;
/** Codec byte: raw snappy. */
export const CODEC_SNAPPY = 1;
/** Header: magic, version, codec, two reserved zero bytes. */
export const HEADER_BYTES = 8;
/** Trailer: footer length and footer CRC. */
export const TRAILER_BYTES = 8;
/** CRC-32C after each block, the symbol table and the block symbols. */
export const CRC_BYTES = 4;

/**
 * Default uncompressed bytes at which the builder cuts a block: 64 KiB, a quarter of Loki's
 * 256 KiB. A needle decodes the blocks that hold it, so this is what one costs: on
 * `bench:peers` data (1 GB, trace ids shared by 10 lines) a narrow needle's execution p50
 * went from 1.36 to 0.95-0.99 ms (same run, both orders) for 0.9% more chunk bytes. Snappy
 * compresses in 64 KiB fragments anyway, so larger blocks hardly compress better.
 */
export const DEFAULT_BLOCK_TARGET_BYTES = 64 * 1024;
/** Longest line the builder accepts, in UTF-8 bytes; well above Loki's 256 KB default. */
export const MAX_LINE_BYTES = 8 * 1024 * 1024;
/**
 * Largest uncompressed block a decoder accepts: a block is cut once it reaches its target,
 * so it holds at most the target plus one entry of at most MAX_LINE_BYTES (and metadata).
 */
export const MAX_BLOCK_RAW_BYTES = 16 * 1024 * 1024;
/** Largest uncompressed symbol table a decoder accepts. */
export const MAX_SYMBOLS_RAW_BYTES = 64 * 1024 * 1024;
/** Largest footer a decoder accepts. */
export const MAX_FOOTER_BYTES = 16 * 1024 * 1024;
