/**
 * `pnpm bench:index`: the index package's hot paths and its size figure, on generated logs:
 * lines of about 200 bytes, each carrying a `trace_id` (structured metadata and in the
 * text) that about 10 lines share, traces interleaved as a service's logs are.
 *
 *   1. tokens/s into SeriesBloomBuilder (tokenize, cache, hash, cut, finish), one chunk a
 *      bloom and four chunks a bloom; against the alternative the builder did not take:
 *      prefix each token with a chunk identity fixed when the head opens, and hash both
 *      forms as entries arrive (a scalable filter written as is).
 *   2. bloom bytes as a share of the snappy-compressed line bytes (256 KB blocks), per
 *      chunk size, for both strategies.
 *   3. bloom block encode and decode (with every check) in MB/s and series/s.
 *
 *   pnpm bench:index [--lines 200000] [--runs 5]
 *
 * Prints a markdown table of medians; writes every run as JSON under bench/results/.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { ScalableBloomFilter, serializeFilter } from "@sieve/bloom";
import SnappyJS from "snappyjs";
import {
  decodeBloomBlock,
  encodeBloomBlock,
  SeriesBloomBuilder,
  type BloomBlockInput,
  type MetadataPair,
} from "../src/index.js";

const { values } = parseArgs({
  options: { lines: { type: "string", default: "200000" }, runs: { type: "string", default: "5" } },
});
const LINES = Number(values.lines);
const RUNS = Number(values.runs);

// Deterministic generator (xorshift32), so every run and every contender sees the same data.
let seed = 0x9e3779b9;
function rand(n: number): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) % n;
}
const hex = (n: number): string => {
  let s = "";
  for (let i = 0; i < n; i++) s += rand(16).toString(16);
  return s;
};
const PATHS = [
  "/api/v1/users",
  "/api/v1/orders",
  "/api/v1/cart",
  "/healthz",
  "/api/v2/search",
  "/login",
];
const MSGS = [
  "request completed",
  "cache miss, fetching from upstream",
  "user session refreshed",
  "slow query",
];

interface Entry {
  line: string;
  metadata: MetadataPair[];
}

/** Lines whose trace is new with probability 1/10, else one of the 8 open traces. */
function generate(count: number): Entry[] {
  const open = Array.from({ length: 8 }, () => hex(32));
  const out: Entry[] = [];
  for (let i = 0; i < count; i++) {
    const slot = rand(8);
    if (rand(10) === 0) open[slot] = hex(32);
    const trace = open[slot]!;
    const line =
      `ts=2024-05-01T12:${String(rand(60)).padStart(2, "0")}:${String(rand(60)).padStart(2, "0")}.${rand(1000)}Z ` +
      `level=${["info", "warn", "debug"][rand(3)]} method=GET path=${PATHS[rand(PATHS.length)]}/${rand(100000)} ` +
      `status=${[200, 200, 200, 404, 500][rand(5)]} duration_ms=${rand(5000) / 10} bytes=${rand(100000)} ` +
      `trace_id=${trace} msg="${MSGS[rand(MSGS.length)]}"`;
    out.push({ line, metadata: [{ name: "trace_id", value: trace }] });
  }
  return out;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function snappyBytes(entries: readonly Entry[]): number {
  const bytes = new TextEncoder().encode(entries.map((e) => e.line).join("\n"));
  let total = 0;
  for (let at = 0; at < bytes.length; at += 262_144)
    total += SnappyJS.compress(bytes.subarray(at, at + 262_144)).length;
  return total;
}

/** Cuts `entries` into chunks of `linesPerChunk` and a bloom every `chunksPerBloom` chunks. */
interface Strategy {
  name: string;
  run(
    entries: readonly Entry[],
    linesPerChunk: number,
    chunksPerBloom: number,
  ): { tokens: number; bloomBytes: number };
}

const cutTime: Strategy = {
  name: "tokens kept, prefixed at cut (SeriesBloomBuilder)",
  run(entries, linesPerChunk, chunksPerBloom) {
    const builder = new SeriesBloomBuilder();
    let bloomBytes = 0;
    let chunks = 0;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      builder.add(e.metadata);
      if ((i + 1) % linesPerChunk === 0 || i === entries.length - 1) {
        builder.cut({ from: BigInt(i), through: BigInt(i + linesPerChunk), checksum: i });
        if (++chunks % chunksPerBloom === 0 || i === entries.length - 1) {
          const bloom = builder.finish()!;
          if (bloom.status === "ok") bloomBytes += serializeFilter(bloom.filter).length;
        }
      }
    }
    return { tokens: builder.stats.tokens, bloomBytes };
  },
};

/** The alternative, built here only to be measured: identity fixed at head open. */
const openTime: Strategy = {
  name: "identity fixed at open, both forms hashed on arrival",
  run(entries, linesPerChunk, chunksPerBloom) {
    let filter = new ScalableBloomFilter();
    const cache = new Set<string>();
    const scratch = new Uint8Array(1024);
    const view = new DataView(scratch.buffer);
    const encoder = new TextEncoder();
    let tokens = 0;
    let bloomBytes = 0;
    let chunks = 0;
    view.setUint32(0, 0);
    const add = (token: string): void => {
      tokens++;
      if (cache.has(token)) return;
      cache.add(token);
      filter.add(token);
      const { written } = encoder.encodeInto(token, scratch.subarray(4));
      filter.add(scratch.subarray(0, 4 + written));
    };
    for (let i = 0; i < entries.length; i++) {
      for (const { name, value } of entries[i]!.metadata) {
        add(name);
        add(`${name}=${value}`);
      }
      if ((i + 1) % linesPerChunk === 0 || i === entries.length - 1) {
        cache.clear();
        view.setUint32(0, ++chunks);
        if (chunks % chunksPerBloom === 0 || i === entries.length - 1) {
          bloomBytes += serializeFilter(filter).length;
          filter = new ScalableBloomFilter();
        }
      }
    }
    return { tokens, bloomBytes };
  },
};

const entries = generate(LINES);
const rawBytes = entries.reduce((n, e) => n + e.line.length + 1, 0);
const compressed = snappyBytes(entries);
console.log(
  `\nindex bench: ${LINES} lines, ${(rawBytes / LINES).toFixed(0)} bytes a line, snappy ${(rawBytes / compressed).toFixed(2)}×, ` +
    `${RUNS} runs, Node ${process.version}\n`,
);

// 1 and 2: throughput and size, per chunk size and chunks per bloom.
const shapes = [
  { linesPerChunk: 1_000, chunksPerBloom: 1 },
  { linesPerChunk: 10_000, chunksPerBloom: 1 },
  { linesPerChunk: 40_000, chunksPerBloom: 1 },
  { linesPerChunk: 10_000, chunksPerBloom: 4 },
];
interface Row {
  strategy: string;
  linesPerChunk: number;
  chunksPerBloom: number;
  tokensPerSec: number;
  bloomBytes: number;
  shareOfSnappyPct: number;
}
const rows: Row[] = [];
const all: Record<string, number[]> = {};
for (const shape of shapes) {
  for (const strategy of [cutTime, openTime]) {
    const rates: number[] = [];
    let bloomBytes = 0;
    for (let run = 0; run < RUNS; run++) {
      const start = process.hrtime.bigint();
      const r = strategy.run(entries, shape.linesPerChunk, shape.chunksPerBloom);
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      rates.push(r.tokens / seconds);
      bloomBytes = r.bloomBytes;
    }
    all[`${strategy.name} ${shape.linesPerChunk}×${shape.chunksPerBloom}`] = rates;
    rows.push({
      strategy: strategy.name,
      ...shape,
      tokensPerSec: median(rates),
      bloomBytes,
      shareOfSnappyPct: (100 * bloomBytes) / compressed,
    });
  }
}
console.log(
  "| strategy | lines/chunk | chunks/bloom | tokens/s (median) | bloom bytes | % of snappy lines |",
);
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.strategy} | ${r.linesPerChunk} | ${r.chunksPerBloom} | ${(r.tokensPerSec / 1e6).toFixed(2)} M | ${r.bloomBytes} | ${r.shareOfSnappyPct.toFixed(3)}% |`,
  );
}

// 3: bloom blocks of 1000 series, 100 traces each.
const series: BloomBlockInput[] = [];
for (let s = 0; s < 1000; s++) {
  const builder = new SeriesBloomBuilder();
  for (let t = 0; t < 100; t++) builder.add([{ name: "trace_id", value: hex(32) }]);
  builder.cut({ from: 0n, through: 1n, checksum: s });
  const bloom = builder.finish()!;
  if (bloom.status === "ok")
    series.push({
      fingerprint: BigInt(s) * 7919n,
      filter: bloom.filter,
      chunks: [],
      metadataTokens: bloom.metadataTokens,
    });
}
const encodeRates: number[] = [];
const decodeRates: number[] = [];
let blockBytes = 0;
for (let run = 0; run < RUNS; run++) {
  let start = process.hrtime.bigint();
  const { bytes } = encodeBloomBlock(series);
  encodeRates.push(series.length / (Number(process.hrtime.bigint() - start) / 1e9));
  start = process.hrtime.bigint();
  decodeBloomBlock(bytes);
  decodeRates.push(series.length / (Number(process.hrtime.bigint() - start) / 1e9));
  blockBytes = bytes.length;
}
const block = {
  series: series.length,
  bytes: blockBytes,
  encodeSeriesPerSec: median(encodeRates),
  decodeSeriesPerSec: median(decodeRates),
  encodeMBps: (median(encodeRates) * blockBytes) / series.length / 1e6,
  decodeMBps: (median(decodeRates) * blockBytes) / series.length / 1e6,
};
console.log(`\n| bloom block (${block.series} series, ${block.bytes} bytes) | series/s | MB/s |`);
console.log("|---|---:|---:|");
console.log(`| encode | ${block.encodeSeriesPerSec.toFixed(0)} | ${block.encodeMBps.toFixed(1)} |`);
console.log(
  `| decode (all checks) | ${block.decodeSeriesPerSec.toFixed(0)} | ${block.decodeMBps.toFixed(1)} |`,
);

const root = new URL("../../../", import.meta.url);
const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`index-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "index",
      lines: LINES,
      rawBytes,
      snappyBytes: compressed,
      runs: RUNS,
      machine,
      medians: rows,
      block,
      all,
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
