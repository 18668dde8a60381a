/** Finding the index segments and chunks a delete request touches. */
import { chunkKey } from "@sieve/chunk";
import { dayOf, dayString, listSegments, type IndexSegment } from "@sieve/index";
import type { ObjectStore } from "@sieve/storage";

/** Past this many days, one listing of the tenant's whole index beats a listing per day. */
const LIST_ALL_DAYS = 31;

/**
 * The keys of `tenant`'s segments of the days [from, through] (ns) touches, sorted: a
 * listing per day, or for a long range one listing of `<tenant>/index/` filtered by day
 * (a request over years would otherwise list thousands of empty days).
 */
export async function segmentsOfDays(
  store: Pick<ObjectStore, "list" | "get">,
  tenant: string,
  from: bigint,
  through: bigint,
): Promise<string[]> {
  const first = Math.max(0, dayOf(from));
  const last = dayOf(through);
  if (last - first + 1 <= LIST_ALL_DAYS) return listSegments(store, tenant, from, through);
  const prefix = `${tenant}/index/`;
  const lo = dayString(first);
  const hi = dayString(last);
  const keys: string[] = [];
  for (const key of await store.list(prefix)) {
    const rest = key.slice(prefix.length);
    const slash = rest.indexOf("/");
    if (slash !== 10 || rest.indexOf("/", slash + 1) >= 0) continue;
    const day = rest.slice(0, 10);
    if (day >= lo && day <= hi) keys.push(key);
  }
  return keys.sort();
}

/** Whether `segment` lists a chunk of `keys`. */
export function listsAny(segment: IndexSegment, keys: ReadonlyMap<string, unknown>): boolean {
  for (const s of segment.series) {
    for (const c of s.chunks) {
      if (keys.has(chunkKey({ tenant: segment.tenant, fingerprint: s.fingerprint, ...c })))
        return true;
    }
  }
  return false;
}

/** from and through of a chunk key `<tenant>/chunks/<fp>/<from>-<through>-<checksum>`. */
export function refOfKey(key: string): { from: bigint; through: bigint } {
  const m = /\/(-?\d+)-(-?\d+)-[0-9a-f]{8}$/.exec(key);
  if (m === null) throw new Error(`not a chunk key: ${key}`);
  return { from: BigInt(m[1]!), through: BigInt(m[2]!) };
}
