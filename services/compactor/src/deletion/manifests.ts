/**
 * The index segments that live ingester flush manifests list (docs/formats.md, "Flush
 * manifests"). Ingester recovery rolls back a flush whose manifest lists a segment that is
 * missing: it deletes the flush's other segments and replays its records. A segment a
 * live manifest lists must therefore not be replaced (the replay would bring the deleted
 * lines back, beside the rewrite); delete processing skips it until the manifest is gone
 * (the ingester deletes it once its queue offset is committed, seconds after the flush).
 *
 * Read here from the format, not through `@sieve/ingester`: the compactor needs the segment
 * keys only, and a whole ingester as a dependency for them would be a heavy coupling.
 */
import { crc32c } from "@sieve/kit";
import type { ObjectStore } from "@sieve/storage";
import { isNotFound } from "@sieve/storage";

/** Where every partition's manifests live: `_ingester/partitions/<p>/<seq>`. */
export const MANIFESTS_PREFIX = "_ingester/partitions/";

/** "SVFM" read as a little-endian u32. */
const MAGIC = 0x4d465653;
const HEADER_BYTES = 12;

/**
 * The segment keys of one manifest; a manifest that cannot be read throws (the caller
 * must not guess: an unreadable manifest may list any segment).
 */
export function manifestSegments(bytes: Uint8Array, key: string): string[] {
  const fail = (why: string): never => {
    throw new Error(`flush manifest ${key}: ${why}`);
  };
  if (bytes.length < HEADER_BYTES + 4) fail(`${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) fail("bad magic");
  if (bytes[4] !== 1) fail(`unsupported version ${bytes[4]}`);
  const length = view.getUint32(8, true);
  if (HEADER_BYTES + length + 4 !== bytes.length) fail("bad length");
  if (
    view.getUint32(HEADER_BYTES + length, true) !== crc32c(bytes.subarray(0, HEADER_BYTES + length))
  )
    fail("bad checksum");
  const body = JSON.parse(
    new TextDecoder().decode(bytes.subarray(HEADER_BYTES, HEADER_BYTES + length)),
  ) as {
    segments?: unknown;
  };
  if (!Array.isArray(body.segments) || !body.segments.every((s) => typeof s === "string"))
    fail("segments");
  return body.segments as string[];
}

/**
 * Every segment key a live manifest lists. Call it after listing the segments to be
 * replaced: a flush writes its manifest before its segments, so a segment seen in that
 * listing has its manifest (if still live) seen here.
 */
export async function liveManifestSegments(
  store: Pick<ObjectStore, "list" | "get">,
): Promise<Set<string>> {
  const out = new Set<string>();
  for (const key of await store.list(MANIFESTS_PREFIX)) {
    let bytes: Uint8Array;
    try {
      bytes = await store.get(key);
    } catch (error) {
      if (isNotFound(error)) continue; // committed and deleted since the listing
      throw error;
    }
    for (const s of manifestSegments(bytes, key)) out.add(s);
  }
  return out;
}
