/**
 * `pnpm bench:bloom`: the same 1,000,000 trace-id-shaped keys (32 hex chars) at 1% through
 * every Sieve filter and through the npm packages `bloomfilter` and `bloom-filters`; add/s,
 * test/s for present and absent keys, measured false-positive rate, bits per key, bytes.
 * Prints a table of medians over the runs and writes every run as JSON under bench/results/.
 *
 *   pnpm bench:bloom [--keys 1000000] [--runs 3] [--budget-ms 4000]
 *
 * A peer too slow to finish in the budget is measured on the keys it got through (the
 * "keys" column says how many); its rates are still per key.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { BloomFilter as PeerBloomFilter } from "bloomfilter";
import bloomFilters from "bloom-filters";
import {
  BloomFilter,
  CountingBloomFilter,
  PartitionedBloomFilter,
  RibbonFilter,
  ScalableBloomFilter,
  optimalBits,
} from "../src/index.js";

const { values } = parseArgs({
  options: {
    keys: { type: "string", default: "1000000" },
    runs: { type: "string", default: "3" },
    "budget-ms": { type: "string", default: "4000" },
  },
});
const N = Number(values.keys);
const RUNS = Number(values.runs);
const BUDGET_MS = Number(values["budget-ms"]);
const FP = 0.01;

/** One filter under test; each loop lives in its own closure so its call sites stay monomorphic. */
interface Contender {
  name: string;
  peer: boolean;
  /** Adds keys[0..n) until the deadline; answers how many it added. */
  addAll(keys: readonly string[], n: number, deadline: number): number;
  /** Counts the keys of keys[from..to) that test present. */
  testAll(keys: readonly string[], from: number, to: number): number;
  bytes(): number;
}

/** What the single-key contenders answer with. */
interface Tested {
  test(key: string): boolean;
  readonly byteLength: number;
}

/** A filter of keys[0..n), built by `build` (added one by one, or all at once). */
function sieve(name: string, build: (keys: readonly string[], n: number) => Tested): Contender {
  let f = build([], 0);
  return {
    name,
    peer: false,
    addAll(keys, n) {
      f = build(keys, n);
      return n;
    },
    testAll(keys, from, to) {
      const filter = f;
      let hits = 0;
      for (let i = from; i < to; i++) if (filter.test(keys[i]!)) hits++;
      return hits;
    },
    bytes: () => f.byteLength,
  };
}

/** Builds by adding each key to the filter `make` returns. */
function added(
  make: () => BloomFilter | PartitionedBloomFilter | ScalableBloomFilter | CountingBloomFilter,
): (keys: readonly string[], n: number) => Tested {
  return (keys, n) => {
    const filter = make();
    for (let i = 0; i < n; i++) filter.add(keys[i]!);
    return filter;
  };
}

function sieveBatch(
  name: string,
  make: () => BloomFilter | PartitionedBloomFilter | ScalableBloomFilter,
): Contender {
  let f = make();
  return {
    name,
    peer: false,
    addAll(keys, n) {
      f = make();
      f.addMany(n === keys.length ? keys : keys.slice(0, n));
      return n;
    },
    testAll(keys, from, to) {
      const out = f.testMany(from === 0 && to === keys.length ? keys : keys.slice(from, to));
      let hits = 0;
      for (const bit of out) hits += bit;
      return hits;
    },
    bytes: () => f.byteLength,
  };
}

function bloomfilterPeer(): Contender {
  const bits = optimalBits(N, FP);
  const k = Math.round((bits / N) * Math.LN2);
  let f = new PeerBloomFilter(bits, k);
  return {
    name: "bloomfilter (npm)",
    peer: true,
    addAll(keys, n) {
      f = new PeerBloomFilter(bits, k);
      const filter = f;
      for (let i = 0; i < n; i++) filter.add(keys[i]);
      return n;
    },
    testAll(keys, from, to) {
      const filter = f;
      let hits = 0;
      for (let i = from; i < to; i++) if (filter.test(keys[i])) hits++;
      return hits;
    },
    bytes: () => f.buckets.byteLength,
  };
}

/** bloom-filters' filters store their bits in their own structures; bytes come from their export. */
function bloomFiltersPeer(
  name: string,
  make: () => { add(k: string): void; has(k: string): boolean; saveAsJSON(): unknown },
  bytesOf: (json: unknown) => number,
): Contender {
  let f = make();
  return {
    name,
    peer: true,
    addAll(keys, n, deadline) {
      f = make();
      const filter = f;
      for (let i = 0; i < n; i++) {
        filter.add(keys[i]!);
        if ((i & 255) === 255 && performance.now() > deadline) return i + 1;
      }
      return n;
    },
    testAll(keys, from, to) {
      const filter = f;
      let hits = 0;
      for (let i = from; i < to; i++) if (filter.has(keys[i]!)) hits++;
      return hits;
    },
    bytes: () => bytesOf(f.saveAsJSON()),
  };
}

/**
 * Deterministic 32-hex-char keys (splitmix64), like W3C trace ids. Each is one flat string,
 * as a key decoded from a request is (a concatenation would leave V8 a rope to flatten).
 */
function traceIds(count: number, seed: bigint): string[] {
  const mask = (1n << 64n) - 1n;
  let state = seed;
  const next = (): bigint => {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    return z ^ (z >> 31n);
  };
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const hex = next().toString(16).padStart(16, "0") + next().toString(16).padStart(16, "0");
    out.push(Buffer.from(hex, "latin1").toString("latin1"));
  }
  return out;
}

interface Run {
  keys: number;
  addPerSec: number;
  testPresentPerSec: number;
  testAbsentPerSec: number;
  falseNegatives: number;
  falsePositiveRate: number;
  bytes: number;
  bitsPerKey: number;
}

function measure(c: Contender, present: readonly string[], absent: readonly string[]): Run {
  let t = performance.now();
  const added = c.addAll(present, N, t + BUDGET_MS);
  const addMs = performance.now() - t;
  // Absent keys are tested in proportion to what was added, within the same budget.
  const probe = Math.min(absent.length, Math.max(added, 10_000));
  t = performance.now();
  const hitsPresent = c.testAll(present, 0, added);
  const presentMs = performance.now() - t;
  t = performance.now();
  const hitsAbsent = c.testAll(absent, 0, probe);
  const absentMs = performance.now() - t;
  const bytes = c.bytes();
  return {
    keys: added,
    addPerSec: added / (addMs / 1000),
    testPresentPerSec: added / (presentMs / 1000),
    testAbsentPerSec: probe / (absentMs / 1000),
    falseNegatives: added - hitsPresent,
    falsePositiveRate: hitsAbsent / probe,
    bytes,
    bitsPerKey: (bytes * 8) / added,
  };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const contenders: Contender[] = [
  sieve(
    "sieve classic",
    added(() => BloomFilter.forCapacity(N, FP)),
  ),
  sieveBatch("sieve classic addMany/testMany", () => BloomFilter.forCapacity(N, FP)),
  sieve(
    "sieve partitioned",
    added(() => PartitionedBloomFilter.forCapacity(N, FP)),
  ),
  sieve(
    "sieve scalable (hint 1024)",
    added(() => new ScalableBloomFilter({ fp: FP })),
  ),
  sieveBatch("sieve scalable addMany/testMany", () => new ScalableBloomFilter({ fp: FP })),
  sieve(
    "sieve counting",
    added(() => CountingBloomFilter.forCapacity(N, FP)),
  ),
  // Static: built from all the keys at once (its add rate is that build's).
  sieve("sieve ribbon (built from all keys)", (keys, n) =>
    RibbonFilter.fromKeys(n === keys.length ? keys : keys.slice(0, n), FP),
  ),
  bloomfilterPeer(),
  bloomFiltersPeer(
    "bloom-filters BloomFilter",
    () => bloomFilters.BloomFilter.create(N, FP),
    (json) => ((json as { _size: number })._size + 7) / 8,
  ),
  bloomFiltersPeer(
    "bloom-filters ScalableBloomFilter",
    () => bloomFilters.ScalableBloomFilter.create(1024, FP),
    (json) => {
      const filters = (json as { _filters: { _size: number }[] })._filters;
      return filters.reduce((sum, p) => sum + p._size / 8, 0);
    },
  ),
];

const present = traceIds(N, 1n);
const absent = traceIds(N, 2n);
const runs = new Map<string, Run[]>(contenders.map((c) => [c.name, []]));
// One untimed round first, so that every contender is measured with its code optimised.
const warm = Math.min(N, 100_000);
for (const c of contenders) {
  c.addAll(present, warm, performance.now() + BUDGET_MS / 4);
  c.testAll(absent, 0, warm);
}
for (let r = 0; r < RUNS; r++) {
  for (const c of contenders) {
    runs.get(c.name)!.push(measure(c, present, absent));
    process.stderr.write(".");
  }
}
process.stderr.write("\n");

const rows = contenders.map((c) => {
  const rs = runs.get(c.name)!;
  const med = (pick: (r: Run) => number): number => median(rs.map(pick));
  return {
    name: c.name,
    peer: c.peer,
    keys: med((r) => r.keys),
    addPerSec: med((r) => r.addPerSec),
    testPresentPerSec: med((r) => r.testPresentPerSec),
    testAbsentPerSec: med((r) => r.testAbsentPerSec),
    falseNegatives: Math.max(...rs.map((r) => r.falseNegatives)),
    falsePositiveRate: med((r) => r.falsePositiveRate),
    bitsPerKey: med((r) => r.bitsPerKey),
    bytes: med((r) => r.bytes),
  };
});

const m = (x: number): string => (x / 1e6).toFixed(x < 1e5 ? 4 : 2);
console.log(
  `\nbloom filters: ${N} keys at fp ${FP}, median of ${RUNS} runs, Node ${process.version}\n`,
);
console.log(
  "| filter | keys | add M/s | test present M/s | test absent M/s | false pos. | bits/key | bytes |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.keys} | ${m(r.addPerSec)} | ${m(r.testPresentPerSec)} | ${m(r.testAbsentPerSec)} | ${(r.falsePositiveRate * 100).toFixed(3)}% | ${r.bitsPerKey.toFixed(2)} | ${Math.round(r.bytes)} |`,
  );
  if (r.falseNegatives > 0) console.log(`  !! ${r.name}: ${r.falseNegatives} false negatives`);
}

const bestPeer = (pick: (r: (typeof rows)[number]) => number): number =>
  Math.max(...rows.filter((r) => r.peer && r.keys === N).map(pick));
const row = (name: string): (typeof rows)[number] => rows.find((r) => r.name === name)!;
const versusPeer = (name: string): Record<string, number> => ({
  add: row(name).addPerSec / bestPeer((r) => r.addPerSec),
  testPresent: row(name).testPresentPerSec / bestPeer((r) => r.testPresentPerSec),
  testAbsent: row(name).testAbsentPerSec / bestPeer((r) => r.testAbsentPerSec),
});
const ratios = {
  classicVsBestPeer: versusPeer("sieve classic"),
  classicBatchVsBestPeer: versusPeer("sieve classic addMany/testMany"),
  scalableMemoryVsClassic: row("sieve scalable (hint 1024)").bytes / (optimalBits(N, FP) / 8),
};
for (const [name, r] of Object.entries(ratios)) {
  if (typeof r === "number") continue;
  console.log(
    `\n${name}: add ${r.add!.toFixed(2)}×, test present ${r.testPresent!.toFixed(2)}×, test absent ${r.testAbsent!.toFixed(2)}×`,
  );
}
console.log(
  `sieve scalable memory vs an exactly sized classic filter: ${ratios.scalableMemoryVsClassic.toFixed(2)}×`,
);

const root = new URL("../../../", import.meta.url);
const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`bloom-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "bloom",
      keys: N,
      fp: FP,
      runs: RUNS,
      machine,
      medians: rows,
      ratios,
      all: Object.fromEntries(runs),
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
