/**
 * Index listings kept while the store is unchanged: in `sieve all` every writer of the
 * store counts its writes in one shared counter (`@sieve/storage`'s `countingWrites`), so a
 * listing taken when the count was `n` is still the store's answer while the count is `n`.
 * A needle query then lists nothing: on this machine a directory listing was a tenth of a
 * millisecond of a 1.5 ms query. Without a counter (a querier of a cluster, whose store
 * others write) every listing goes to the store.
 */
import { writesSoFar } from "@sieve/storage";

/** Prefixes remembered before they are all forgotten (tenants × days queried). */
const MAX_PREFIXES = 10_000;

export class SegmentListings {
  private readonly cached = new Map<string, { readonly count: number; readonly keys: string[] }>();

  /** `writes`: the process's write counter; none: nothing is cached. */
  constructor(private readonly writes: SharedArrayBuffer | undefined) {}

  /** The keys under `prefix`: cached while no write has settled since they were listed. */
  async list(prefix: string, list: () => Promise<string[]>): Promise<string[]> {
    if (this.writes === undefined) return list();
    // Read before listing: every write settled by now is in the listing.
    const count = writesSoFar(this.writes);
    const hit = this.cached.get(prefix);
    if (hit !== undefined && hit.count === count) return [...hit.keys];
    const keys = await list();
    if (this.cached.size >= MAX_PREFIXES) this.cached.clear();
    this.cached.set(prefix, { count, keys: [...keys] });
    return keys;
  }
}
