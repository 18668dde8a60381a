/**
 * How to hold a cached bloom block: its bytes (decode a series' filter at every lookup), its
 * decoded filters (decode every record when the block loads), or both, decoding on first
 * lookup (what `LoadedBlock` does, dropping the bytes once every record is decoded).
 * Measured on real blocks: by default those of `pnpm bench:query`'s dataset (written by a
 * real ingester); medians over runs of: checking footer and index, decoding every record,
 * and a lookup of every series from decoded filters vs from bytes.
 *
 * Prints a markdown table and writes it as JSON under bench/results/blocks-<time>.json.
 *
 *   pnpm --filter @sieve/bloom-gateway bench:blocks [--dir <repo>/.cache/bench-query] [--runs 9]
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { decodeBloomBlockFooter, decodeBloomBlockIndex, decodeBloomRecord } from "@sieve/index";
import { LoadedBlock } from "../src/block.js";

const { values } = parseArgs({
  options: {
    dir: {
      type: "string",
      default: new URL("../../../.cache/bench-query", import.meta.url).pathname,
    },
    runs: { type: "string", default: "9" },
  },
});
const RUNS = Number(values.runs);

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (path.includes("/blooms/")) out.push(path);
  }
  return out;
}

const blocks = files(values.dir).map((f) => new Uint8Array(readFileSync(f)));
if (blocks.length === 0)
  throw new Error(`no bloom blocks under ${values.dir}: run pnpm bench:query once`);
const entries = blocks.map((b) => {
  const footer = decodeBloomBlockFooter(b.subarray(b.length - 28), b.length);
  return decodeBloomBlockIndex(
    b.subarray(footer.indexOffset, footer.indexOffset + footer.indexLength),
    footer,
  );
});
const records = entries.reduce((n, e) => n + e.length, 0);
const rawBytes = blocks.reduce((n, b) => n + b.length, 0);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function time(fn: () => void): number {
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    fn();
    runs.push(performance.now() - start);
  }
  return median(runs);
}

let filterBytes = 0;
const open = time(() => {
  for (const b of blocks) LoadedBlock.open(b);
});
const decodeAll = time(() => {
  filterBytes = 0;
  blocks.forEach((b, i) => {
    for (const e of entries[i]!)
      filterBytes += decodeBloomRecord(b.subarray(e.offset, e.offset + e.length), e.fingerprint)
        .filter.byteLength;
  });
});
const loaded = blocks.map((b) => LoadedBlock.open(b));
const key = (i: number, e: { offset: number; length: number }) => ({
  key: `b${i}`,
  offset: e.offset,
  length: e.length,
});
loaded.forEach((l, i) => {
  for (const e of entries[i]!) l.record(key(i, e), e.fingerprint);
});
const token = new TextEncoder().encode("trace_id=absent");
const lookupDecoded = time(() => {
  loaded.forEach((l, i) => {
    for (const e of entries[i]!) l.record(key(i, e), e.fingerprint).filter.test(token);
  });
});
const lookupBytes = time(() => {
  blocks.forEach((b, i) => {
    for (const e of entries[i]!)
      decodeBloomRecord(b.subarray(e.offset, e.offset + e.length), e.fingerprint).filter.test(
        token,
      );
  });
});
const held = loaded.reduce((n, l) => n + l.bytes, 0);

console.log(
  `${blocks.length} blocks, ${records} series records, ${(rawBytes / 1e6).toFixed(2)} MB; medians of ${RUNS} runs\n`,
);
console.log("| step (all blocks) | ms | held bytes |");
console.log("|---|---:|---:|");
console.log(
  `| check footer and index (LoadedBlock.open) | ${open.toFixed(2)} | ${rawBytes} (bytes) |`,
);
console.log(`| decode every record | ${decodeAll.toFixed(2)} | ${filterBytes} (filters) |`);
console.log(
  `| lookup every series, from decoded filters | ${lookupDecoded.toFixed(2)} | ${held} (LoadedBlock, all decoded) |`,
);
console.log(
  `| lookup every series, decoding from bytes | ${lookupBytes.toFixed(2)} | ${rawBytes} |`,
);

const root = new URL("../../../", import.meta.url);
const out = new URL("bench/results/", root);
mkdirSync(out, { recursive: true });
const file = new URL(`blocks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, out);
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "blocks",
      blocks: blocks.length,
      records,
      rawBytes,
      filterBytes,
      heldBytes: held,
      runs: RUNS,
      medianMs: { open, decodeAll, lookupDecoded, lookupBytes },
      machine: { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model },
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
