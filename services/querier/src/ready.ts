/**
 * Makes a querier ready before it takes queries, as a query worker does as it loads and as
 * the main thread does for its needle queries (inline.ts): the last `queryReadyDays` × 24
 * hours of every tenant's index (the store's top-level prefixes) and their bloom blocks,
 * the chunk codec's memory readied first (`@sieve/kit`'s `primeSnappy`), then
 * {@link REHEARSALS} rounds of queries on what it loaded (warm.ts), for at most
 * {@link WARM_MS}: a store that is slow or down delays the start that long and no more;
 * the queries read what was not loaded.
 */
import { primeSnappy } from "@sieve/kit";
import type { ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import { handleQuery, type QueryTask } from "./handler.js";
import type { Querier } from "./querier.js";

/** The longest a warm-up waits. */
const WARM_MS = 10_000;
/** Rounds of rehearsal queries in a warm-up (four a round; warm.ts). */
const REHEARSALS = 20;

/**
 * Warms `querier` over `store`; `bloomBytes`: what its gateway may load ahead (0 when the
 * gateway is not in this thread). Answers the queries it rehearsed (none when it did not).
 * Never throws: a failure is logged and left to first use.
 */
export async function readyQuerier(
  querier: Querier,
  store: ObjectStore,
  options: { readonly bloomBytes: number; readonly logger: Logger; readonly what: string },
): Promise<readonly QueryTask[]> {
  const days = querier.config.queryReadyDays;
  if (days <= 0) return [];
  const { logger, what } = options;
  const signal = AbortSignal.timeout(WARM_MS);
  // The chunk codec's first outputs on this thread, out of the first queries (kit's snappy.ts).
  const primeMs = Math.round(primeSnappy());
  try {
    const prefixes = await store.listPrefixes("", { signal });
    const tenants = prefixes.map((p) => p.slice(0, -1)).filter((t) => !t.startsWith("_"));
    const offline = querier.withoutIngesters();
    const report = await querier.warm(
      tenants,
      { days, bloomBytes: options.bloomBytes, rehearsals: REHEARSALS, signal },
      (task) => handleQuery(offline, task),
    );
    const { tasks, ...rehearsed } = report.rehearsed;
    logger.info({ ...report, rehearsed, primeMs }, `${what} loaded the newest index`);
    return tasks;
  } catch (error) {
    logger.warn({ err: error }, `${what} could not load the newest index: read at first use`);
    return [];
  }
}
