// Worker for shared.int.test.ts: opens the shared filter, waits until every worker is ready,
// then adds its keys at the same time as the others.
import { parentPort, workerData } from "node:worker_threads";
import { SharedBloomFilter, type SharedBloom } from "./classic.js";

const { shared, keys, barrier, workers } = workerData as {
  shared: SharedBloom;
  keys: string[];
  barrier: SharedArrayBuffer;
  workers: number;
};
const filter = SharedBloomFilter.open(shared);
const ready = new Int32Array(barrier);
Atomics.add(ready, 0, 1);
while (Atomics.load(ready, 0) < workers) {
  // spin: a wait() would let the first worker start late and the adds not overlap
}
for (const key of keys) filter.add(key);
parentPort?.postMessage(keys.length);
