/**
 * `pnpm --filter @sieve/kit bench`: CRC-32C throughput of `crc-32` (pure JavaScript, what
 * every Sieve format uses through `crc32c`) against `@node-rs/crc32` (native, SSE4.2/ARMv8
 * CRC instructions) at the sizes Sieve checksums: a WAL frame (~1 KiB), a push record
 * (~16 KiB), a chunk block (~256 KiB). Prints MB/s and ns per call, median of 5 rounds.
 *
 *   pnpm --filter @sieve/kit bench
 */
import { randomBytes } from "node:crypto";
import { crc32c as native } from "@node-rs/crc32";
import CRC32C from "crc-32/crc32c.js";

const SIZES = [64, 1024, 16 * 1024, 256 * 1024];
const CANDIDATES: [string, (b: Uint8Array) => number][] = [
  ["crc-32 (JS)", (b) => CRC32C.buf(b, 0) >>> 0],
  ["@node-rs/crc32 (native)", (b) => native(b)],
];

function measure(fn: (b: Uint8Array) => number, data: Uint8Array): number {
  const budgetBytes = 256 * 1024 * 1024;
  const calls = Math.max(1, Math.floor(budgetBytes / data.length));
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sink ^= fn(data);
  const ns = Number(process.hrtime.bigint() - t0);
  if (sink === 0.5) console.log(sink); // keeps the loop alive
  return ns / calls;
}

const rows: string[][] = [["size", "library", "MB/s", "ns/call"]];
for (const size of SIZES) {
  const data = randomBytes(size);
  for (const [name, fn] of CANDIDATES) {
    if (fn(data) !== CANDIDATES[0]![1](data)) throw new Error(`${name} disagrees`);
    const rounds = Array.from({ length: 5 }, () => measure(fn, data)).sort((a, b) => a - b);
    const ns = rounds[2]!;
    rows.push([String(size), name, ((size / ns) * 1000).toFixed(0), ns.toFixed(0)]);
  }
}
for (const r of rows) console.log(r.map((c) => c.padEnd(26)).join(""));
