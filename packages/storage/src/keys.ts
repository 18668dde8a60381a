import { StorageError } from "./errors.js";

/** Longest key in UTF-8 bytes: S3's limit. */
export const MAX_KEY_BYTES = 1024;
/** Longest `/`-separated key segment in UTF-8 bytes: the usual file-name limit (ext4, xfs). */
export const MAX_SEGMENT_BYTES = 255;
/** File names that start with this are the file store's temporary files; keys may not use it. */
export const TEMP_PREFIX = ".sieve-tmp-";

// C0 controls, DEL and backslash: no key needs them, and each has a meaning to some file
// system, shell or HTTP layer.
// eslint-disable-next-line no-control-regex
const FORBIDDEN = /[\u0000-\u001f\u007f\\]/;
// With the `u` flag a surrogate range matches only unpaired halves, which UTF-8 cannot hold.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * Checks that `key` is a portable object key, throwing `invalid_key` otherwise: non-empty,
 * at most {@link MAX_KEY_BYTES}, `/`-separated segments that are each non-empty, not `.` or
 * `..`, at most {@link MAX_SEGMENT_BYTES} and not starting with {@link TEMP_PREFIX}; no
 * control characters, no backslash, no lone UTF-16 surrogate. Such a key cannot name
 * anything outside the file store's root directory, and means the same to S3.
 */
export function validateKey(key: string): void {
  if (typeof key !== "string" || key.length === 0)
    throw new StorageError("invalid_key", "empty key");
  if (Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) {
    throw new StorageError("invalid_key", `longer than ${MAX_KEY_BYTES} bytes`);
  }
  if (LONE_SURROGATE.test(key)) throw new StorageError("invalid_key", "lone UTF-16 surrogate");
  const bad = FORBIDDEN.exec(key);
  if (bad !== null) {
    const code = bad[0].charCodeAt(0).toString(16).padStart(4, "0");
    throw new StorageError(
      "invalid_key",
      `forbidden character U+${code} in ${JSON.stringify(key)}`,
    );
  }
  for (const segment of key.split("/")) {
    if (segment === "") {
      throw new StorageError("invalid_key", `empty path segment in ${JSON.stringify(key)}`);
    }
    if (segment === "." || segment === "..") {
      throw new StorageError("invalid_key", `"${segment}" segment in ${JSON.stringify(key)}`);
    }
    if (segment.startsWith(TEMP_PREFIX)) {
      throw new StorageError("invalid_key", `segment starts with reserved "${TEMP_PREFIX}"`);
    }
    if (Buffer.byteLength(segment, "utf8") > MAX_SEGMENT_BYTES) {
      throw new StorageError("invalid_key", `segment longer than ${MAX_SEGMENT_BYTES} bytes`);
    }
  }
}

/** Checks a list prefix: empty, or anything a key could start with. */
export function validatePrefix(prefix: string): void {
  if (typeof prefix !== "string") throw new StorageError("invalid_key", "prefix is not a string");
  if (prefix === "") return;
  if (LONE_SURROGATE.test(prefix) || FORBIDDEN.test(prefix) || prefix.startsWith("/")) {
    throw new StorageError("invalid_key", `invalid prefix ${JSON.stringify(prefix)}`);
  }
}

/**
 * False when no valid key can start with `prefix`: its complete segments (those before
 * the last `/`) include an empty, `.` or `..` one. Such a prefix lists nothing.
 */
export function prefixCanMatch(prefix: string): boolean {
  const slash = prefix.lastIndexOf("/");
  if (slash < 0) return true;
  return !prefix
    .slice(0, slash)
    .split("/")
    .some((s) => s === "" || s === "." || s === "..");
}

/** Checks getRange's arguments: non-negative safe integers. */
export function validateRange(offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
    throw new StorageError("invalid_range", `offset ${offset}, length ${length}`);
  }
}

/** Compares strings by their UTF-8 bytes, the order S3 lists keys in. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}
