/**
 * `pnpm fuzz`: the long fuzz run before a release (issue 10, "Proof"). The generators of
 * fuzz.int.test.ts (src/fuzz/), 20,000 push bodies and 20,000 reads by default, interleaved at
 * concurrency 8 against a fresh `sieve all` (the built dist/main.js: run `pnpm build`
 * first), with /ready probed every 50 ms and RSS sampled every 100 ms.
 *
 * Prints a summary (requests, statuses, p50/p99 latency, /ready p99, peak RSS, canary) and
 * the statuses per request kind, lists every request that broke a rule (5xx, no answer,
 * slower than 2 s) grouped by kind of failure with one replayable example each, and writes
 * everything as JSON under bench/results/fuzz-<time>.json. Exits 1 when a rule was broken.
 *
 *   pnpm fuzz [--seed 1] [--count 20000] [--concurrency 8]
 *
 * A finding is replayed from its seed and index alone: each request is generated from
 * (seed, index), e.g. `fuzzRequest(Rng.forCase(seed, index), index, nowMs)`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { formatFindings } from "../src/fuzz/harness.test-helper.js";
import { runFuzz } from "../src/fuzz/run.test-helper.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    count: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "8" },
  },
});
const seed = Number(values.seed);
const perKind = Number(values.count);
const concurrency = Number(values.concurrency);
for (const [name, n] of [
  ["--seed", seed],
  ["--count", perKind],
  ["--concurrency", concurrency],
] as const) {
  if (!Number.isInteger(n) || n < (name === "--seed" ? 0 : 1)) {
    process.stderr.write(`fuzz: ${name} must be a positive integer\n`);
    process.exit(2);
  }
}

const MiB = 1024 * 1024;
let lastPrinted = 0;
const report = await runFuzz({
  seed,
  perKind,
  concurrency,
  onAnswer: (answered, total) => {
    if (answered - lastPrinted >= total / 20 || answered === total) {
      lastPrinted = answered;
      process.stderr.write(`  ${answered}/${total} answered\n`);
    }
  },
});
const { run, ready } = report;

const rows: [string, string][] = [
  ["seed", String(seed)],
  ["requests (pushes + reads)", `${run.requests} of ${2 * perKind}`],
  [
    "statuses",
    Object.entries(run.statuses)
      .map(([s, n]) => `${s}: ${n}`)
      .join(", "),
  ],
  [
    "latency p50 / p99 / max",
    `${run.p50Ms.toFixed(1)} / ${run.p99Ms.toFixed(1)} / ${run.maxMs.toFixed(0)} ms`,
  ],
  [
    "/ready p50 / p99 / max",
    `${ready.p50Ms.toFixed(1)} / ${ready.p99Ms.toFixed(1)} / ${ready.maxMs.toFixed(0)} ms (${ready.probes} probes, ${ready.notOk} not 200)`,
  ],
  [
    "RSS at start / peak",
    `${(report.startRssBytes / MiB).toFixed(0)} / ${(report.peakRssBytes / MiB).toFixed(0)} MiB`,
  ],
  ["process alive at the end", String(report.alive)],
  ["canary after fuzz / after flush", `${report.canaryAfterFuzz} / ${report.canaryAfterFlush}`],
  ["findings (5xx, no answer, > 2 s)", String(run.findings.length)],
  [
    "wall time",
    `${(run.wallMs / 1000).toFixed(1)} s (${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)})`,
  ],
];
const width = Math.max(...rows.map(([k]) => k.length));
process.stdout.write(`\n| ${"".padEnd(width)} | value |\n| ${"-".repeat(width)} | ----- |\n`);
for (const [k, v] of rows) process.stdout.write(`| ${k.padEnd(width)} | ${v} |\n`);
process.stdout.write("\nstatuses per request kind:\n");
for (const [key, n] of Object.entries(run.byKind).sort())
  process.stdout.write(
    `  ${key.padEnd(28)} ${String(n).padStart(6)}  ${JSON.stringify(run.examples[key] ?? "").slice(0, 100)}\n`,
  );
if (run.findings.length > 0)
  process.stdout.write(`\nfindings:\n${formatFindings(run.findings, 100)}\n`);

const resultsDir = fileURLToPath(new URL("../../../bench/results", import.meta.url));
mkdirSync(resultsDir, { recursive: true });
const file = join(resultsDir, `fuzz-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ perKind, concurrency, ...report }, null, 2));
process.stdout.write(`\nwrote ${file}\n`);
const broken =
  !report.alive ||
  run.findings.length > 0 ||
  ready.p99Ms >= 200 ||
  report.canaryAfterFuzz !== "intact" ||
  report.canaryAfterFlush !== "intact";
process.exitCode = broken ? 1 : 0;
