/**
 * What query-time filtering costs (`pnpm --filter @sieve/compactor bench:deletes`): a
 * querier's lookup of a tenant's requests (cached, and a cache miss: one listing), and the
 * per-line test of a stream a request selects, against a stream no request selects.
 * Over the file store, or S3 when S3_ENDPOINT and BENCH_BUCKET are set.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeleteFilter } from "@sieve/logql";
import { FsObjectStore, S3ObjectStore, type ObjectStore } from "@sieve/storage";
import { DEFAULT_CONFIG, createQuerier } from "@sieve/querier";
import { DeleteRequestsStore } from "../src/deletion/requests.js";

const dir = await mkdtemp(join(tmpdir(), "sieve-bench-deletes-"));
const store: ObjectStore =
  process.env.S3_ENDPOINT !== undefined && process.env.BENCH_BUCKET !== undefined
    ? new S3ObjectStore({
        bucket: process.env.BENCH_BUCKET,
        endpoint: process.env.S3_ENDPOINT,
        forcePathStyle: true,
      })
    : new FsObjectStore(dir);
await new DeleteRequestsStore(store).add({
  tenant: "with",
  query: '{app="api"} |= "secret"',
  startMs: 0,
  endMs: 1,
});

const time = async (n: number, fn: () => Promise<unknown>): Promise<number> => {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn();
  return (performance.now() - t0) / n;
};
const none = { forQuery: () => Promise.resolve(undefined) };
const setups: [string, number | undefined][] = [
  ["no delete source (before this change)", undefined],
  ["cacheMs 10000", 10_000],
  ["cacheMs 0 (a listing per query)", 0],
];
for (let round = 0; round < 2; round++) {
  for (const [name, cacheMs] of setups) {
    const q = createQuerier({
      config: { ...DEFAULT_CONFIG, workers: 0, deleteRequestsCacheMs: cacheMs ?? 0 },
      store,
      ...(cacheMs === undefined && { deletes: none }),
    });
    // A log query of an empty day: the plan lists the day's segments, nothing else.
    const run = (tenant: string) =>
      q.selectLogs({
        tenant,
        query: '{app="api"}',
        start: 0n,
        end: 1_000_000n,
        limit: 10,
        direction: "forward",
      });
    for (const tenant of ["without", "with"]) {
      for (let i = 0; i < 50; i++) await run(tenant);
      const ms = await time(500, () => run(tenant));
      if (round === 1)
        console.log(`${name}, tenant ${tenant} requests: ${(ms * 1000).toFixed(0)} µs a query`);
    }
  }
}

const filter = DeleteFilter.compile([
  { query: '{app="api"} |= "secret"', start: 0n, end: 1n << 62n },
])!;
const selected = filter.forStream({ app: "api" })!;
const lines = Array.from({ length: 1_000_000 }, (_, i) => ({
  timestamp: BigInt(i),
  line: `level=info msg="request ${i} served" duration=${i % 997}ms trace_id=${i.toString(16)}`,
  structuredMetadata: [],
}));
let deleted = 0;
const t0 = performance.now();
for (const e of lines) if (selected(e)) deleted++;
const perLine = ((performance.now() - t0) * 1e6) / lines.length;
console.log(
  `a selected stream: ${perLine.toFixed(0)} ns a line (${deleted} deleted); an unselected one: no test at all`,
);
await rm(dir, { recursive: true, force: true });
