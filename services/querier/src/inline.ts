/**
 * Needle queries on the main thread. A query worker (pool.ts) isolates the main thread from
 * a heavy query, but each query pays two thread hops for it: the task posted to a worker,
 * the worker woken, its answer posted back and this thread woken. On this project's 2-core
 * VM a woken thread also finds its caches cold, and a needle's whole answer takes ~1 ms:
 * `bench:peers` measured 0.6-0.7 ms a needle between the two ways while querying.
 *
 * So a needle query (a log query with a structured-metadata test), which the blooms make
 * cheap, begins here, one at a time, under a budget: `budgetMs` of wall time and
 * {@link INLINE_MAX_CHUNKS} chunks in range (its bloom stage is one synchronous pass over
 * them). Past either it gives up (`OverBudget`), keeps nothing, and the caller runs it on a
 * worker from the start. The main thread is so held by a query for at most the budget
 * plus one of the query's synchronous steps (at most `DEADLINE_CHECK_EVERY` lines of a
 * chunk), and never by two at once: pushes keep being accepted between its steps.
 */
import { extractBloomTests, withoutLineTests, type Expr } from "@sieve/logql";
import type { ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import { OverBudget } from "./context.js";
import { handleQuery, type QueryAnswer, type QueryTask, type ReadTask } from "./handler.js";
import { TENANT_SEPARATOR } from "./multi-tenant.js";
import { Querier } from "./querier.js";
import { readyQuerier } from "./ready.js";

/**
 * Chunks in range an inline query may test against its blooms: ~2,000 chunk refs take the
 * bloom stage ~1 ms (537 took 0.28 ms in `bench:peers`' wide needle).
 */
export const INLINE_MAX_CHUNKS = 2_000;

/** The main thread's lane for needle queries; see the file comment. */
export class InlineQueries {
  /** The querier with its budget. */
  private readonly querier: Querier;
  private readonly busy: () => boolean;
  private running = false;

  /**
   * `base`: the main thread's querier, over its share of the caches; `busy`: whether the
   * main thread has heavy work of its own now (a compaction run), when needles go to the
   * workers instead; `maxChunks`: chunks in range past which a needle goes to a worker.
   */
  constructor(
    private readonly base: Querier,
    budgetMs: number,
    options: { readonly busy?: () => boolean; readonly maxChunks?: number } = {},
  ) {
    this.querier = base.withBudget({
      ms: budgetMs,
      chunks: options.maxChunks ?? INLINE_MAX_CHUNKS,
    });
    this.busy = options.busy ?? (() => false);
  }

  /**
   * Loads the newest index and bloom blocks and rehearses, as a query worker does before
   * its first query (ready.ts); `bloomBytes`: what the gateway of this thread may load.
   * Answers the queries rehearsed, for the HTTP layer to rehearse them in its turn.
   */
  ready(store: ObjectStore, bloomBytes: number, logger: Logger): Promise<readonly QueryTask[]> {
    return readyQuerier(this.base, store, { bloomBytes, logger, what: "the main thread" });
  }

  /**
   * Whether `task` begins here: a log query (range or instant) of one tenant whose
   * expression has a structured-metadata test the blooms answer, while no other is running
   * here and the thread is not busy with work of its own. A line filter alone is not
   * enough: its blooms (n-grams) are optional per tenant, and without them it scans every
   * chunk in range. A query that does not parse is answered here (the parser's error).
   */
  admits(task: QueryTask): boolean {
    return this.read(task) !== undefined;
  }

  /**
   * What admitting `task` read of it, handed on to the handler, which so parses it once;
   * undefined when it is not admitted ({@link admits}).
   */
  private read(task: QueryTask): ReadTask | undefined {
    if (this.running || this.busy()) return undefined;
    if (task.route !== "query_range" && task.route !== "query") return undefined;
    if (task.tenant.includes(TENANT_SEPARATOR)) return undefined;
    const form = new URLSearchParams(task.form);
    const query = form.get("query");
    if (query === null) return { form };
    let expr: Expr;
    try {
      expr = Querier.parse(query);
    } catch {
      return { form };
    }
    const needle = expr.kind === "log" && withoutLineTests(extractBloomTests(expr)).kind !== "all";
    return needle ? { form, expr } : undefined;
  }

  /**
   * The answer to `task` when it ran here within its budget; undefined when it is not for
   * this thread ({@link admits}) or gave up past the budget: the caller runs it elsewhere.
   */
  async run(task: QueryTask): Promise<QueryAnswer | undefined> {
    const read = this.read(task);
    if (read === undefined) return undefined;
    this.running = true;
    const metrics = this.querier.metrics;
    try {
      const answer = await handleQuery(this.querier, task, read);
      metrics?.inlineQueries.inc({ outcome: "answered" });
      return answer;
    } catch (error) {
      if (!(error instanceof OverBudget)) throw error;
      metrics?.inlineQueries.inc({ outcome: "over_budget" });
      return undefined;
    } finally {
      this.running = false;
    }
  }
}
