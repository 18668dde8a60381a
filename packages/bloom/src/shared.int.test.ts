import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { BloomFilter, SharedBloomFilter } from "./classic.js";
import { traceIds } from "./testkeys.test-helper.js";

// Workers run the TypeScript source through tsx's API, as vitest runs this file.
const tsxPackage = pathToFileURL(createRequire(import.meta.url).resolve("tsx/package.json"));
const tsxApi = new URL("dist/esm/api/index.mjs", tsxPackage).href;
const workerFile = new URL("./shared.test-worker.ts", import.meta.url).href;
const bootstrap = `import(${JSON.stringify(tsxApi)}).then((tsx) => tsx.tsImport(${JSON.stringify(workerFile)}, ${JSON.stringify(workerFile)}))`;

function addInWorker(
  filter: SharedBloomFilter,
  keys: string[],
  barrier: SharedArrayBuffer,
  workers: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(bootstrap, {
      eval: true,
      workerData: { shared: filter.shared(), keys, barrier, workers },
    });
    worker.once("message", (count: number) => {
      resolve(count);
    });
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (code !== 0) reject(new Error(`worker exited with ${code}`));
    });
  });
}

describe("SharedBloomFilter", () => {
  it("loses no key when two workers add to it at once", async () => {
    const keys = traceIds(400_000, 61);
    // Small enough that the workers write the same words all the time.
    const filter = SharedBloomFilter.create({ bits: 4_000_000, hashes: 7 });
    const halves = [keys.filter((_, i) => i % 2 === 0), keys.filter((_, i) => i % 2 === 1)];
    const barrier = new SharedArrayBuffer(4);
    const counts = await Promise.all(halves.map((half) => addInWorker(filter, half, barrier, 2)));
    expect(counts).toEqual([200_000, 200_000]);

    for (const key of keys) expect(filter.test(key)).toBe(true);
    // OR is commutative: the shared bits are exactly those of a single-threaded build.
    const sequential = new BloomFilter({ bits: 4_000_000, hashes: 7 });
    sequential.addMany(keys);
    expect(filter.words).toEqual(sequential.words);
  });

  it("shares an existing filter's bits, and reports keys present with testAndAdd", () => {
    const plain = BloomFilter.forCapacity(1000, 0.01);
    plain.add("a");
    const shared = plain.toShared();
    expect(shared.words.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(shared.test("a")).toBe(true);
    expect(shared.testAndAdd("b")).toBe(false);
    expect(shared.testAndAdd("b")).toBe(true);
    const reopened = SharedBloomFilter.open(shared.shared());
    expect(reopened.test("b")).toBe(true);
    reopened.add("c");
    expect(shared.test("c")).toBe(true);
  });
});
