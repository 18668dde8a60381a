/**
 * `pnpm bench:logql`: parse rate, and entries per second through common pipelines on
 * 200-byte lines (the targets: >= 5 M lines/s for a single `|=`, >= 500 k lines/s for
 * `| json | status >= 500`). Prints a table of medians and writes every run as JSON under
 * bench/results/.
 *
 *   pnpm bench:logql [--lines 200000] [--runs 5]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { compilePipeline, parseExpr, type LogEntry } from "../src/index.js";

const { values } = parseArgs({
  options: { lines: { type: "string", default: "200000" }, runs: { type: "string", default: "5" } },
});
const N = Number(values.lines);
const RUNS = Number(values.runs);

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pad = (s: string): string =>
  s.length >= 200 ? s.slice(0, 200) : s + " ".repeat(200 - s.length);
const rand = rng(42);
const hex = (n: number): string =>
  Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join("");
const levels = ["debug", "info", "info", "info", "warn", "error"];
const paths = ["/api/users", "/api/orders", "/health", "/api/items/42", "/login"];
const stream = { app: "api", env: "prod" };

function make(kind: "json" | "logfmt"): LogEntry[] {
  const out: LogEntry[] = [];
  for (let i = 0; i < N; i++) {
    const status = rand() < 0.1 ? 500 + Math.floor(rand() * 4) : 200;
    const level = levels[Math.floor(rand() * levels.length)]!;
    const path = paths[Math.floor(rand() * paths.length)]!;
    const needle = i % 100 === 0 ? " needle" : "";
    const trace = hex(16);
    const line =
      kind === "json"
        ? JSON.stringify({
            ts: "2024-05-01T12:00:00.000Z",
            level,
            method: "GET",
            path,
            status,
            duration_ms: Math.floor(rand() * 900),
            trace_id: trace,
            msg: `request served${needle}`,
            user: `u${i % 1000}`,
          })
        : `ts=2024-05-01T12:00:00.000Z level=${level} method=GET path=${path} status=${status} duration=${Math.floor(rand() * 900)}ms trace_id=${trace} msg="request served${needle}" user=u${i % 1000}`;
    // Each line a flat string of exactly 200 bytes, as a decoded chunk hands it over.
    out.push({
      timestamp: BigInt(i),
      line: Buffer.from(pad(line), "latin1").toString("latin1"),
      labels: stream,
      structuredMetadata: { trace_id: trace },
    });
  }
  return out;
}

const jsonLines = make("json");
const logfmtLines = make("logfmt");
const target = logfmtLines[N >> 1]!.structuredMetadata.trace_id!;

const cases: { name: string; query: string; data: LogEntry[]; target?: number }[] = [
  { name: '|= "needle"', query: '{app="api"} |= "needle"', data: logfmtLines, target: 5e6 },
  {
    name: "| json | status >= 500",
    query: '{app="api"} | json | status >= 500',
    data: jsonLines,
    target: 5e5,
  },
  {
    name: '| logfmt | level="error"',
    query: '{app="api"} | logfmt | level="error"',
    data: logfmtLines,
  },
  { name: `| trace_id="…"`, query: `{app="api"} | trace_id="${target}"`, data: logfmtLines },
  { name: '|~ "user=u99[0-9]" (RE2)', query: '{app="api"} |~ "user=u99[0-9]"', data: logfmtLines },
];

function measure(query: string, data: LogEntry[]): { perSec: number; kept: number } {
  const e = parseExpr(query);
  if (e.kind !== "log") throw new Error("log query expected");
  const p = compilePipeline(e.pipeline);
  let kept = 0;
  const t = performance.now();
  for (let i = 0; i < data.length; i++) if (p.process(data[i]!) !== null) kept++;
  const ms = performance.now() - t;
  return { perSec: data.length / (ms / 1000), kept };
}

const PARSE_QUERIES = [
  '{app="foo", env=~"prod|staging"} |= "error" | json | status >= 500 and duration > 1s | line_format "{{.path}}"',
  'sum by (host) (rate({app="foo"} | logfmt | level="error" [5m])) / ignoring(x) group_left sum by (host) (rate({app="foo"}[5m]))',
  'quantile_over_time(0.99, {app="foo"} | json | unwrap duration(latency) | __error__="" [5m]) by (path)',
  '{service="api"} | trace_id="4bf92f3577b34da6"',
];
function parseRate(): number {
  const n = 20_000;
  const t = performance.now();
  for (let i = 0; i < n; i++) parseExpr(PARSE_QUERIES[i % PARSE_QUERIES.length]!);
  return n / ((performance.now() - t) / 1000);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

// One untimed round so that everything is measured optimised.
parseRate();
for (const c of cases) measure(c.query, c.data);
const runs: Record<string, number[]> = { parse: [] };
const kept: Record<string, number> = {};
for (const c of cases) runs[c.name] = [];
for (let r = 0; r < RUNS; r++) {
  runs.parse!.push(parseRate());
  for (const c of cases) {
    const m = measure(c.query, c.data);
    runs[c.name]!.push(m.perSec);
    kept[c.name] = m.kept;
  }
  process.stderr.write(".");
}
process.stderr.write("\n");

console.log(`\nlogql: ${N} lines of 200 bytes, median of ${RUNS} runs, Node ${process.version}\n`);
console.log("| case | median /s | target | kept lines |");
console.log("|---|---:|---:|---:|");
console.log(
  `| parse (4 typical queries) | ${Math.round(median(runs.parse!)).toLocaleString("en")} | | |`,
);
const medians: Record<string, number> = { parse: median(runs.parse!) };
for (const c of cases) {
  const m = median(runs[c.name]!);
  medians[c.name] = m;
  const tgt =
    c.target === undefined ? "" : `${(c.target / 1e6).toFixed(1)} M ${m >= c.target ? "✓" : "✗"}`;
  console.log(`| ${c.name} | ${(m / 1e6).toFixed(2)} M | ${tgt} | ${kept[c.name]} |`);
}

const dir = new URL("../../../bench/results/", import.meta.url);
mkdirSync(dir, { recursive: true });
const file = new URL(`logql-${new Date().toISOString().replace(/[:.]/g, "-")}.json`, dir);
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model };
writeFileSync(
  file,
  JSON.stringify(
    { benchmark: "logql", lines: N, lineBytes: 200, runs: RUNS, machine, medians, all: runs },
    null,
    2,
  ),
);
console.log(`\nwrote ${file.pathname}`);
