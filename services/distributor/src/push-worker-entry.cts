/**
 * The file piscina loads for a push worker (workers.ts), as the querier's
 * query-worker-entry.cts is for a query worker, and for the same reason: piscina
 * `require()`s a worker before it tries `import()`, and push-worker.js's graph has top-level
 * await (the bloom package's hash loads its WebAssembly), so on Node 20 that `require()`
 * goes through require(esm), which killed a test run with a V8 fatal error
 * (`v8::Module::IsGraphAsync must be used on an instantiated module`, nodejs/node#55520).
 * This CommonJS file loads plainly, starts importing the worker at once and hands every
 * task to it.
 */
import type { PrepareTask } from "./prepare.js";

type Prepare = (task: PrepareTask) => unknown;

const worker = import("./push-worker.js") as Promise<{ default: Prepare }>;

export = async function prepare(task: PrepareTask): Promise<unknown> {
  return (await worker).default(task);
};
