/**
 * The file piscina loads for a query worker (pool.ts). piscina `require()`s a worker and
 * falls back to `import()`; on Node 20.19 and later `require()` of query-worker.js, an ES
 * module with top-level await, goes through Node's require(esm), which once in six full
 * test runs killed the process with a V8 fatal error (`v8::Module::IsGraphAsync must be
 * used on an instantiated module`, nodejs/node#55520 and #59703). This CommonJS file loads
 * plainly: it starts importing the worker at once, so the querier is still built while the
 * thread starts, and hands every task to it.
 */
import type { QueryAnswer } from "./handler.js";
import type { WorkerTask } from "./pool.js";

type Run = (work: WorkerTask) => Promise<QueryAnswer>;

const worker = import("./query-worker.js") as Promise<{ default: Run }>;

export = async function run(work: WorkerTask): Promise<QueryAnswer> {
  return (await worker).default(work);
};
