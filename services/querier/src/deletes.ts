/**
 * Query-time filtering of delete requests (Loki's querier `deletesForUser` and its
 * `deleteRequestsClient` cache): until the compactor has processed a request (in
 * `filter-only` mode, for as long as it exists), queries drop the lines it selects. The
 * requests are read from the object store (`<tenant>/deletes/`), where the delete API
 * writes them, and reused for `deleteRequestsCacheMs`; the ingesters get them with each
 * query and drop the same lines from their unflushed data (`@sieve/logql` DeleteFilter is
 * the one definition of what a request deletes).
 */
import { deleteRequestRange, filtersQueries, readDeleteRequests } from "@sieve/index";
import { DeleteFilter, type DeleteSpec } from "@sieve/logql";
import type { QuerierStore } from "./deps.js";

/** A tenant's live requests for one query: compiled for the store's chunks, as specs for the ingesters. */
export interface QueryDeletes {
  readonly filter: DeleteFilter;
  readonly specs: readonly DeleteSpec[];
}

/** Where a querier gets the delete requests that apply to a query. */
export interface DeleteRequestsSource {
  /** The requests of `tenant` overlapping [from, through] (ns, inclusive); undefined: none. */
  forQuery(tenant: string, from: bigint, through: bigint): Promise<QueryDeletes | undefined>;
}

/** A source without requests: a querier whose tenants cannot delete. */
export const NO_DELETES: DeleteRequestsSource = {
  forQuery: () => Promise.resolve(undefined),
};

interface Cached {
  readonly at: number;
  /** Undefined: the tenant has no live request. */
  readonly all: QueryDeletes | undefined;
}

/**
 * The delete requests in the object store, per tenant, cached `cacheMs`. A tenant whose
 * mode is `disabled` is never read (Loki's per-tenant client answers none for it).
 */
export class StoreDeleteRequests implements DeleteRequestsSource {
  private readonly cache = new Map<string, Cached>();
  private readonly loading = new Map<string, Promise<QueryDeletes | undefined>>();

  constructor(
    private readonly store: Pick<QuerierStore, "get" | "list">,
    private readonly options: {
      readonly cacheMs: number;
      readonly enabled: (tenant: string) => boolean;
      readonly now?: () => number;
    },
  ) {}

  async forQuery(tenant: string, from: bigint, through: bigint): Promise<QueryDeletes | undefined> {
    if (!this.options.enabled(tenant)) return undefined;
    const all = await this.all(tenant);
    if (all === undefined || all.filter.end < from || all.filter.start > through) return undefined;
    const specs = all.specs.filter((s) => s.end >= from && s.start <= through);
    return specs.length === all.specs.length
      ? all
      : { filter: DeleteFilter.compile(specs)!, specs };
  }

  private all(tenant: string): Promise<QueryDeletes | undefined> {
    const now = (this.options.now ?? Date.now)();
    const cached = this.cache.get(tenant);
    if (cached !== undefined && now - cached.at < this.options.cacheMs) {
      return Promise.resolve(cached.all);
    }
    let p = this.loading.get(tenant);
    if (p === undefined) {
      p = this.load(tenant, now).finally(() => this.loading.delete(tenant));
      this.loading.set(tenant, p);
    }
    return p;
  }

  private async load(tenant: string, now: number): Promise<QueryDeletes | undefined> {
    const records = await readDeleteRequests(this.store, tenant);
    const specs: DeleteSpec[] = records
      .filter((r) => filtersQueries(r, now))
      .map((r) => ({ query: r.query, ...deleteRequestRange(r) }));
    const filter = DeleteFilter.compile(specs);
    const all = filter === undefined ? undefined : { filter, specs };
    if (this.options.cacheMs > 0) {
      this.cache.set(tenant, { at: now, all });
      // Tenants come and go: a cache that only grows is bounded by dropping the stale.
      if (this.cache.size > 10_000) {
        for (const [t, c] of this.cache)
          if (now - c.at >= this.options.cacheMs) this.cache.delete(t);
      }
    }
    return all;
  }
}
