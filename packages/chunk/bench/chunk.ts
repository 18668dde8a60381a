/**
 * `pnpm bench:chunk`: encode and decode throughput of the chunk format and its
 * compression ratio, on ~200-byte log lines each carrying a `trace_id` structured
 * metadata pair shared by 10 lines on average; chunks are flushed at the ingester's 1.5 MB
 * compressed target. Then snappyjs (pure JS, what the format uses) against the native
 * `snappy` package (napi-rs prebuilt binaries from npm) on the real block payloads.
 * Prints a table of medians over the runs and writes every run as JSON under bench/results/.
 *
 *   pnpm bench:chunk [--lines 100000] [--runs 5]
 *
 * MB/s count the raw bytes of lines plus metadata strings, as a push would carry them.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { mulberry32 } from "@sieve/kit";
import * as native from "snappy";
import * as snappyjs from "snappyjs";
import { ChunkBuilder, ChunkReader, decodeChunk } from "../src/index.js";
import type { Entry } from "../src/index.js";

const { values } = parseArgs({
  options: {
    lines: { type: "string", default: "100000" },
    runs: { type: "string", default: "5" },
  },
});
const N = Number(values.lines);
const RUNS = Number(values.runs);
const FLUSH_BYTES = 1.5 * 1024 * 1024;

function makeEntries(n: number): { entries: Entry[]; rawBytes: number } {
  const rand = mulberry32(42);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const hex = (len: number): string => {
    let s = "";
    for (let i = 0; i < len; i++) s += Math.floor(rand() * 16).toString(16);
    return s;
  };
  const paths = [
    "/api/v1/users",
    "/api/v1/orders",
    "/api/v1/items",
    "/healthz",
    "/api/v2/search",
    "/login",
  ];
  const msgs = [
    "request completed",
    "cache miss",
    "upstream slow",
    "user authenticated",
    "order created",
  ];
  const entries: Entry[] = [];
  let rawBytes = 0;
  let ts = 1_700_000_000_000_000_000n;
  let trace = hex(32);
  for (let i = 0; i < n; i++) {
    if (rand() < 0.1) trace = hex(32); // a new trace every 10 lines on average
    ts += BigInt(Math.floor(rand() * 2_000_000));
    let line =
      `ts=2026-11-23T05:${String(i % 60).padStart(2, "0")}:00.${String(i % 1000).padStart(3, "0")}Z ` +
      `level=${pick(["info", "info", "info", "warn", "error", "debug"])} caller=${pick(["http.go", "db.go", "cache.go"])}:${Math.floor(rand() * 400)} ` +
      `msg="${pick(msgs)}" method=${pick(["GET", "POST", "PUT"])} path=${pick(paths)}/${Math.floor(rand() * 10000)} ` +
      `status=${pick([200, 200, 200, 201, 404, 500])} duration_ms=${(rand() * 300).toFixed(2)} user_id=u${Math.floor(rand() * 5000)}`;
    line = line.padEnd(200, " x");
    line = line.slice(0, 200);
    entries.push({ timestamp: ts, line, structuredMetadata: [{ name: "trace_id", value: trace }] });
    rawBytes += line.length + "trace_id".length + trace.length;
  }
  return { entries, rawBytes };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Builds chunks as the ingester would, flushing at the compressed target. */
function encodeAll(entries: readonly Entry[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let b = new ChunkBuilder();
  for (const e of entries) {
    b.append(e);
    if (b.compressedBytesEstimate >= FLUSH_BYTES) {
      chunks.push(b.encode().bytes);
      b = new ChunkBuilder();
    }
  }
  if (b.entryCount > 0) chunks.push(b.encode().bytes);
  return chunks;
}

const { entries, rawBytes } = makeEntries(N);
const mb = rawBytes / 1e6;

// Warm-up: one untimed round so both paths are measured optimised.
let chunks = encodeAll(entries);
for (const c of chunks) decodeChunk(c);

interface Run {
  encodeMBps: number;
  decodeMBps: number;
  encodedBytes: number;
}
const runs: Run[] = [];
for (let r = 0; r < RUNS; r++) {
  let t = performance.now();
  chunks = encodeAll(entries);
  const encodeMs = performance.now() - t;
  t = performance.now();
  let decoded = 0;
  for (const c of chunks) decoded += decodeChunk(c).entries.length;
  const decodeMs = performance.now() - t;
  if (decoded !== N) throw new Error(`decoded ${decoded} of ${N} entries`);
  runs.push({
    encodeMBps: mb / (encodeMs / 1000),
    decodeMBps: mb / (decodeMs / 1000),
    encodedBytes: chunks.reduce((n, c) => n + c.byteLength, 0),
  });
  process.stderr.write(".");
}

// The codecs on the real block payloads of the chunks just written.
const payloads: Uint8Array[] = [];
for (const c of chunks) {
  for (const blk of new ChunkReader(c).blocks) {
    payloads.push(snappyjs.uncompress(c.subarray(blk.offset, blk.offset + blk.length)));
  }
}
const payloadMB = payloads.reduce((n, p) => n + p.byteLength, 0) / 1e6;
interface CodecRun {
  compressMBps: number;
  uncompressMBps: number;
  ratio: number;
}
const codecs = {
  snappyjs: {
    compress: (p: Uint8Array): Uint8Array => snappyjs.compress(p),
    uncompress: (p: Uint8Array): Uint8Array => snappyjs.uncompress(p),
  },
  "snappy (native)": {
    compress: (p: Uint8Array): Uint8Array =>
      native.compressSync(Buffer.from(p.buffer, p.byteOffset, p.byteLength)),
    uncompress: (p: Uint8Array): Uint8Array =>
      native.uncompressSync(Buffer.from(p.buffer, p.byteOffset, p.byteLength), {
        asBuffer: true,
      }) as Buffer,
  },
};
const codecRuns = new Map<string, CodecRun[]>(Object.keys(codecs).map((k) => [k, []]));
for (let r = 0; r <= RUNS; r++) {
  for (const [name, codec] of Object.entries(codecs)) {
    let t = performance.now();
    const compressed = payloads.map((p) => codec.compress(p));
    const cMs = performance.now() - t;
    t = performance.now();
    for (const c of compressed) codec.uncompress(c);
    const uMs = performance.now() - t;
    // Both write raw snappy: each side must read the other's output.
    const other = name === "snappyjs" ? codecs["snappy (native)"] : codecs.snappyjs;
    if (
      Buffer.compare(Buffer.from(other.uncompress(compressed[0]!)), Buffer.from(payloads[0]!)) !== 0
    ) {
      throw new Error(`${name} output is not raw snappy`);
    }
    if (r === 0) continue; // warm-up
    codecRuns.get(name)!.push({
      compressMBps: payloadMB / (cMs / 1000),
      uncompressMBps: payloadMB / (uMs / 1000),
      ratio: (payloadMB * 1e6) / compressed.reduce((n, c) => n + c.byteLength, 0),
    });
  }
  process.stderr.write(".");
}
process.stderr.write("\n");

const med = <T>(rs: readonly T[], pick: (r: T) => number): number => median(rs.map(pick));
const summary = {
  encodeMBps: med(runs, (r) => r.encodeMBps),
  decodeMBps: med(runs, (r) => r.decodeMBps),
  compressionRatio: rawBytes / med(runs, (r) => r.encodedBytes),
  chunks: chunks.length,
  meanChunkBytes: med(runs, (r) => r.encodedBytes) / chunks.length,
};
console.log(
  `\nchunks: ${N} lines of 200 bytes + trace_id (${mb.toFixed(1)} MB raw), flushed at 1.5 MB, median of ${RUNS} runs, Node ${process.version}\n`,
);
console.log("| encode MB/s | decode MB/s | compression ratio | chunks | mean chunk bytes |");
console.log("|---:|---:|---:|---:|---:|");
console.log(
  `| ${summary.encodeMBps.toFixed(1)} | ${summary.decodeMBps.toFixed(1)} | ${summary.compressionRatio.toFixed(2)} | ${summary.chunks} | ${Math.round(summary.meanChunkBytes)} |`,
);
const codecRows = [...codecRuns].map(([name, rs]) => ({
  name,
  compressMBps: med(rs, (r) => r.compressMBps),
  uncompressMBps: med(rs, (r) => r.uncompressMBps),
  ratio: med(rs, (r) => r.ratio),
}));
console.log(`\nsnappy on ${payloads.length} block payloads (${payloadMB.toFixed(1)} MB):\n`);
console.log("| codec | compress MB/s | uncompress MB/s | ratio |");
console.log("|---|---:|---:|---:|");
for (const r of codecRows) {
  console.log(
    `| ${r.name} | ${r.compressMBps.toFixed(1)} | ${r.uncompressMBps.toFixed(1)} | ${r.ratio.toFixed(2)} |`,
  );
}

const root = new URL("../../../", import.meta.url);
const dir = new URL("bench/results/", root);
mkdirSync(dir, { recursive: true });
const file = new URL(`chunk-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    {
      benchmark: "chunk",
      lines: N,
      runs: RUNS,
      machine,
      summary,
      codecs: codecRows,
      all: { runs, codecRuns: Object.fromEntries(codecRuns) },
    },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
