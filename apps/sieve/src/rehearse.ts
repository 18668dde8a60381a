/**
 * The query routes rehearsed before the process listens. The main thread's warm-up
 * (`@sieve/querier`'s ready.ts) rehearses needle queries through the query handler; this runs
 * the same queries through the HTTP routes (fastify's `inject`, no socket), so that the code
 * a request runs before and after the handler (routing, the query string, the answer's
 * serialisation) is compiled too. On the 1 GB `bench:peers` data, the first 40 absent
 * needles after a restart, three restarts each way: p50 narrow 2.0-3.3 ms and wide 3.3-4.7
 * without it, 1.7-2.4 and 2.6-3.0 with it (a few hundred needles later, ~0.8 and ~1.4).
 *
 * It runs before the ingesters start (they hold nothing yet, and the queries skip them) and
 * before the compactor does (while it runs, needles leave the main thread).
 */
import type { QueryTask } from "@sieve/querier";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";

/**
 * The remote address of a rehearsal request. No socket has it (it is not an IP address), so
 * no client can borrow it; the request log leaves these requests out.
 */
export const REHEARSAL_ADDRESS = "sieve-rehearsal";

/** Rounds of the rehearsed queries (four a round: ~0.1-0.4 s in all on the peers data). */
export const ROUTE_REHEARSALS = 30;

/**
 * Asks `tasks` of `app`'s routes `rounds` times, in turn; stops at the first answer that is
 * not a 200 (the queries will meet the same failure themselves). Never throws.
 */
export async function rehearseRoutes(
  app: FastifyInstance,
  tasks: readonly QueryTask[],
  rounds: number,
  logger: Logger,
): Promise<void> {
  const started = performance.now();
  let ran = 0;
  try {
    for (let i = 0; i < rounds * tasks.length; i++) {
      const task = tasks[i % tasks.length]!;
      const res = await app.inject({
        method: "GET",
        url: `/loki/api/v1/${task.route}?${task.form}`,
        headers: { "x-scope-orgid": task.tenant },
        remoteAddress: REHEARSAL_ADDRESS,
      });
      if (res.statusCode !== 200) {
        logger.warn({ status: res.statusCode, body: res.body }, "a rehearsal query failed");
        break;
      }
      ran++;
    }
  } catch (error) {
    logger.warn({ err: error }, "the query routes' rehearsal failed");
  }
  logger.info(
    { queries: ran, ms: Math.round(performance.now() - started) },
    "rehearsed the query routes",
  );
}
