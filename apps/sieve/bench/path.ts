/**
 * The whole path a user runs, on one `sieve all` process over HTTP: unique logs pushed as
 * ~1 MiB protobuf+snappy bodies over 8 connections, `POST /flush`, then needle queries for
 * present trace ids on a narrow selector (one service) and a wide one (every service),
 * each answer checked. Prints push MB/s, the server's CPU per MB and peak RSS, flush time
 * and query p50/p99, and writes JSON under bench/results/.
 *
 *   pnpm bench:path [--mb 200] [--queries 40] [--main path/to/dist/main.js]
 *
 * `--main` runs another build of the command (an older checkout) on the same data, so
 * that a change can be measured before and after in one run. Issue 11's `bench:peers`
 * puts Loki beside it; this is the same path for Sieve alone.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { compress } from "snappyjs";
import { encodePushRequest, type PushRequest } from "@sieve/proto";

const { values } = parseArgs({
  options: {
    mb: { type: "string", default: "200" },
    queries: { type: "string", default: "40" },
    main: { type: "string", default: fileURLToPath(new URL("../dist/main.js", import.meta.url)) },
  },
});
const TOTAL_MB = Number(values.mb);
const QUERIES = Number(values.queries);
const SERVICES = 50;
const LINES_PER_BODY = 5_000; // ~1 MiB of 200-byte lines
const LINES_PER_TRACE = 10;
const CONNECTIONS = 8;

// Limits raised so that the bench measures the engine, not the tenant's rate limits.
const CONFIG = `distributor:
  limits: { ingestionRateBytes: 1073741824, ingestionBurstBytes: 1073741824, perStreamRateBytes: 1073741824, perStreamBurstBytes: 1073741824 }
`;

/** The CPU seconds (user + system) a process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? 0 : Number(m[1]) / 1024;
}

async function start(dir: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  writeFileSync(join(dir, "sieve.yaml"), CONFIG);
  const child = spawn(
    process.execPath,
    [
      values.main,
      "all",
      ...["--host", "127.0.0.1", "--port", "0", "--data-dir", join(dir, "data")],
      ...["--config-file", join(dir, "sieve.yaml")],
    ],
    {
      env: { ...process.env, SIEVE_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  child.stdout.setEncoding("utf8");
  // The ready line carries the URL.
  const url = await new Promise<string>((resolve, reject) => {
    let pending = "";
    child.stdout.on("data", (text: string) => {
      pending += text;
      const m = /"url":"([^"]+)"[^\n]*is ready/.exec(pending);
      if (m !== null) resolve(m[1]!);
    });
    child.once("exit", (code) => {
      reject(new Error(`sieve exited with ${String(code)}`));
    });
  });
  child.stdout.resume();
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
    },
  };
}

/** A trace id the queries look for, and the service its lines went to. */
interface Needle {
  readonly trace: string;
  readonly service: number;
}

/** One body: LINES_PER_BODY unique lines over the services, a trace id per 10 lines. */
function body(b: number, startNs: bigint, needles: Needle[]): { bytes: Uint8Array; raw: number } {
  const byService = new Map<number, PushRequest["streams"][number]["entries"]>();
  let raw = 0;
  let trace = "";
  for (let i = 0; i < LINES_PER_BODY; i++) {
    const service = (Math.floor(i / LINES_PER_TRACE) + b) % SERVICES;
    if (i % LINES_PER_TRACE === 0) {
      trace = randomBytes(8).toString("hex");
      if (needles.length < 4 * QUERIES && b % 3 === 0 && i % 500 === 0) {
        needles.push({ trace, service });
      }
    }
    const n = b * LINES_PER_BODY + i;
    let line = `level=info caller=server.go:${100 + (n % 900)} msg="request served" method=GET path=/api/v1/items/${n} status=200 duration_ms=${n % 500} `;
    line += "x".repeat(Math.max(0, 200 - line.length));
    raw += line.length;
    const ns = startNs + BigInt(n) * 1_000_000n; // 1 ms apart: 1 M lines span ~17 minutes
    let entries = byService.get(service);
    if (entries === undefined) byService.set(service, (entries = []));
    entries.push({
      timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
      line,
      structuredMetadata: [{ name: "trace_id", value: trace }],
    });
  }
  const streams = [...byService].map(([service, entries]) => ({
    labels: `{env="prod", service="svc-${service}"}`,
    entries,
  }));
  return { bytes: compress(encodePushRequest({ streams })), raw };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
}

const dir = mkdtempSync(join(tmpdir(), "sieve-path-"));
try {
  const bodies = Math.ceil((TOTAL_MB * 1e6) / (LINES_PER_BODY * 200));
  const startNs = (BigInt(Date.now()) - 1_800_000n) * 1_000_000n;
  const needles: Needle[] = [];
  const load = loadavg()[0]!.toFixed(2);
  const sieve = await start(dir);
  let peakRss = rssMiB(sieve.pid);
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssMiB(sieve.pid));
  }, 100);

  // Push: each connection builds and sends its own bodies, so building overlaps sending.
  let next = 0;
  let rawBytes = 0;
  const cpu0 = cpuSeconds(sieve.pid);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (let b = next++; b < bodies; b = next++) {
        const { bytes, raw } = body(b, startNs, needles);
        const res = await fetch(`${sieve.url}/loki/api/v1/push`, {
          method: "POST",
          headers: { "content-type": "application/x-protobuf" },
          body: bytes,
        });
        if (res.status !== 204) throw new Error(`push: ${res.status} ${await res.text()}`);
        rawBytes += raw;
      }
    }),
  );
  const pushSeconds = (performance.now() - t0) / 1000;
  const pushCpu = cpuSeconds(sieve.pid) - cpu0;
  const f0 = performance.now();
  const flushed = await fetch(`${sieve.url}/flush`, { method: "POST" });
  if (flushed.status !== 204) throw new Error(`flush: ${flushed.status}`);
  const flushSeconds = (performance.now() - f0) / 1000;

  const now = BigInt(Date.now()) * 1_000_000n;
  const times: Record<string, number[]> = { narrow: [], wide: [] };
  for (const [i, { trace, service }] of needles.slice(0, QUERIES).entries()) {
    for (const kind of ["narrow", "wide"] as const) {
      const selector = kind === "wide" ? '{env="prod"}' : `{service="svc-${service}"}`;
      const params = new URLSearchParams({
        query: `${selector} | trace_id="${trace}"`,
        start: String(startNs),
        end: String(now + 60_000_000_000n),
        limit: "100",
      });
      const q0 = performance.now();
      const res = await fetch(`${sieve.url}/loki/api/v1/query_range?${params.toString()}`);
      const answer = (await res.json()) as { data: { result: { values: unknown[] }[] } };
      times[kind]!.push(performance.now() - q0);
      const lines = answer.data.result.reduce((n, s) => n + s.values.length, 0);
      if (lines !== LINES_PER_TRACE) throw new Error(`needle ${i} (${kind}): ${lines} lines`);
    }
  }
  clearInterval(sampler);
  await sieve.stop();

  const mb = rawBytes / 1e6;
  const ms = (t: number[], p: number): number =>
    Number(
      percentile(
        [...t].sort((a, b) => a - b),
        p,
      ).toFixed(1),
    );
  const row = {
    main: values.main,
    load,
    mb: Number(mb.toFixed(1)),
    pushMBps: Number((mb / pushSeconds).toFixed(1)),
    mbPerCpuSecond: Number((mb / pushCpu).toFixed(1)),
    peakRssMiB: Math.round(peakRss),
    flushSeconds: Number(flushSeconds.toFixed(2)),
    narrowP50ms: ms(times.narrow!, 0.5),
    narrowP99ms: ms(times.narrow!, 0.99),
    wideP50ms: ms(times.wide!, 0.5),
    wideP99ms: ms(times.wide!, 0.99),
  };
  console.log(
    "| MB | push MB/s | MB per CPU-s | peak RSS MiB | flush s | narrow p50/p99 ms | wide p50/p99 ms | load |",
  );
  console.log("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  console.log(
    `| ${row.mb} | ${row.pushMBps} | ${row.mbPerCpuSecond} | ${row.peakRssMiB} | ${row.flushSeconds} | ${row.narrowP50ms} / ${row.narrowP99ms} | ${row.wideP50ms} / ${row.wideP99ms} | ${load} |`,
  );
  const results = fileURLToPath(new URL("../../../bench/results/", import.meta.url));
  mkdirSync(results, { recursive: true });
  writeFileSync(join(results, `path-${Date.now()}.json`), JSON.stringify(row, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
