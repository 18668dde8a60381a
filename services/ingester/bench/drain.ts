/**
 * `pnpm bench:drain`: CPU time a line costs Drain once its patterns are learned (the
 * ingest path pays it for every line of a tenant with patterns on), by format, and for
 * lines without templates (every line a new cluster until learning pauses). 12,500 lines
 * of each kind, trained 10 times over a fresh Drain; prints the median CPU µs a line
 * (process.cpuUsage: user + system, so a busy machine inflates it less than wall time).
 * Here beside bench:ingest, whose tsx it uses: `@sieve/drain` has no dependency of its own.
 */
import { Drain } from "@sieve/drain";
import type { LogFormat } from "@sieve/drain";

const LINES = Number(process.env.BENCH_LINES ?? 12_500);
const RUNS = Number(process.env.BENCH_RUNS ?? 10);

let seed = 42;
const rand = (): number => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const int = (n: number): number => Math.floor(rand() * n);

/** Eight logfmt templates of about 30 tokens, values varying. */
const logfmt = (i: number): string => {
  const keys = ["method", "path", "status", "took", "user", "region", "cache", "bytes", "trace"];
  let line = `ts=2024-05-01T10:00:${i % 60}Z level=info msg="request served ${i % 8}"`;
  for (let k = 0; k < 11; k++) line += ` ${keys[(i % 8) + k] ?? keys[k]!}=${int(100000)}`;
  return line;
};
const plain = (i: number): string =>
  [
    `10.0.${int(255)}.${int(255)} - - [01/May/2024:10:00:${i % 60} +0000] "GET /api/orders/${int(9999)} HTTP/1.1" 200 ${int(5000)} "-" "curl/8.5.0"`,
    `May  1 10:00:${i % 60} web-1 sshd[${int(30000)}]: Accepted publickey for deploy from 192.168.1.${int(255)} port ${int(65535)} ssh2`,
    `2024-05-01 10:00:${i % 60} ERROR [pool-${int(8)}] c.e.PaymentService - payment ${int(1e6)} declined: insufficient funds`,
  ][i % 3]!;
const json = (i: number): string =>
  JSON.stringify({
    level: "info",
    ts: i,
    msg: `user ${int(1e5)} ${["logged in", "logged out", "changed password"][i % 3]} from 10.1.${int(255)}.${int(255)}`,
    latency_ms: int(500),
  });
/** No template: keys in random order (the first lines of bench:ingest). */
const random = (): string => {
  const words = ["GET", "POST", "user", "id", "latency", "cache", "hit", "miss", "ms", "path"];
  let line = `ts=${int(1e9)} level=info msg="request served"`;
  while (line.length < 190) line += ` ${words[int(words.length)]!}=${int(100000)}`;
  return line;
};

const kinds: [string, LogFormat, (i: number) => string][] = [
  ["logfmt, 8 templates, ~30 tokens", "logfmt", logfmt],
  ["plain, 3 templates (nginx, sshd, java)", "plain", plain],
  ["JSON, 3 templates (msg field)", "json", json],
  ["logfmt, no template (pauses)", "logfmt", random],
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

console.log(`\ndrain: ${LINES} lines a kind, median of ${RUNS} runs\n`);
console.log("| lines | CPU µs / line | clusters | skipped |");
console.log("|---|---:|---:|---:|");
for (const [name, format, make] of kinds) {
  const lines = Array.from({ length: LINES }, (_, i) => make(i));
  const runs: number[] = [];
  let clusters = 0;
  let skipped = 0;
  for (let r = 0; r < RUNS; r++) {
    const d = new Drain(format);
    skipped = 0;
    const t = process.cpuUsage();
    for (let i = 0; i < lines.length; i++) {
      if (typeof d.train(lines[i]!, i * 100, "info", 0) === "string") skipped++;
    }
    const u = process.cpuUsage(t);
    runs.push((u.user + u.system) / lines.length);
    clusters = d.size;
  }
  console.log(`| ${name} | ${median(runs).toFixed(2)} | ${clusters} | ${skipped} |`);
}
