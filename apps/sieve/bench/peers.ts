/**
 * `pnpm bench:peers`: Sieve (`sieve all`) beside Grafana Loki 3.7 (single binary,
 * filesystem store, limits raised) and VictoriaLogs (single binary, defaults) on the same
 * generated logs, one run, the same protobuf+snappy bodies sent to each (VictoriaLogs takes
 * them on its Loki push endpoint, structured metadata as fields). Issue 11's figures: push MB/s of raw lines, server CPU-seconds, peak RSS,
 * the same from the first push until the flush ends (Sieve acknowledges a push once its
 * log holds it, and its ingesters may lag: the pushes alone flatter it), stored bytes after
 * flush and stop, and needle query p50/p99, cold (the first queries after a restart,
 * this process's client code compiled beforehand against a stand-in server) and warm, for a narrow selector (one service: 10 streams) and a wide one (half
 * the streams: 250), present trace ids (exactly their 10 lines) and absent ones (none),
 * every answer checked.
 *
 *   pnpm bench:peers [--mb 1000] [--queries 20] [--only sieve,loki,victorialogs] [--main dist/main.js]
 *                    [--keep DIR]   (each system's data stays in DIR/<name>, to query it again)
 *                    [--apart]      (each system queried in a pass of its own, as before 2026-11-29)
 *
 * The data: 500 streams (`service` × `pod`, `env` prod for half the pods), ~200-byte logfmt
 * lines over two hours ending now, `trace_id` (shared by 10 lines) and `span_id` (one a
 * line) as structured metadata; protobuf+snappy bodies of ~1 MiB (5,000 lines), built
 * before any server starts and sent over 8 connections. Loki comes from
 * `sh scripts/loki.sh path`, VictoriaLogs from `sh scripts/victorialogs.sh path` (both built
 * from the Go module proxy on first use). VictoriaLogs is asked the same needles in LogsQL:
 * `{service="svc-1"} trace_id:="…"`.
 *
 * Each system is pushed to alone, one after another. Then Sieve and VictoriaLogs are
 * restarted on what they stored and queried together: each needle asked of each in turn,
 * the first asked rotating, so that their latencies are taken at the same moments of this
 * shared machine (a VM whose speed moves 1.5-2× from one minute to the next: passes run one
 * system after another gave ratios that moved as much). Loki, whose needles take seconds
 * without blooms, is queried in a pass of its own ({@link System.queriedAlone}). Asked so,
 * each needle follows the other server's, not one of its own: both run with colder CPU
 * caches than in a pass of their own, and slower (on the 1 GB data, VictoriaLogs' narrow
 * absent needles 1.3-1.4 ms p50 against 0.5-0.6, Sieve's 1.8 against 0.7-1.8); `--apart`
 * measures that other regime, one pass after another. Each phase records the load average
 * and the CPU the rest of the machine used meanwhile; compare ratios from one run. Writes
 * every sample as JSON under bench/results/.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { compress } from "snappyjs";
import { encodePushRequest, type PushRequest } from "@sieve/proto";
// mulberry32: the same ids for the same body on every run.
import { mulberry32 } from "@sieve/kit";
import {
  cpuSeconds,
  loki,
  machineBusySeconds,
  ROOT,
  rssMiB,
  sieveSystem,
  victorialogs,
  warmClient,
  type Server,
  type System,
} from "./peers-systems.js";

const { values } = parseArgs({
  options: {
    mb: { type: "string", default: "1000" },
    queries: { type: "string", default: "20" },
    only: { type: "string" },
    // Keeps each system's data dir under this folder (to query or profile it afterwards).
    keep: { type: "string" },
    main: { type: "string", default: fileURLToPath(new URL("../dist/main.js", import.meta.url)) },
    // Each system queried in a pass of its own, one after another.
    apart: { type: "boolean", default: false },
  },
});
const TOTAL_MB = Number(values.mb);
const QUERIES = Number(values.queries);
const SERVICES = 50;
const PODS = 10;
const STREAMS = SERVICES * PODS;
const LINES_PER_BODY = 5_000;
const LINES_PER_TRACE = 10;
const LINE_BYTES = 200;
const CONNECTIONS = 8;
const SPAN_MS = 2 * 3_600_000;

// ---- the data -----------------------------------------------------------------------------

function hex16(next: () => number): string {
  return (
    Math.floor(next() * 2 ** 32)
      .toString(16)
      .padStart(8, "0") +
    Math.floor(next() * 2 ** 32)
      .toString(16)
      .padStart(8, "0")
  );
}

interface Stream {
  readonly service: number;
  readonly pod: number;
  readonly prod: boolean;
}

function streamOf(index: number): Stream {
  const pod = Math.floor(index / SERVICES);
  return { service: index % SERVICES, pod, prod: pod % 2 === 0 };
}

function labelsOf(s: Stream): string {
  return `{env="${s.prod ? "prod" : "staging"}", pod="pod-${s.pod}", service="svc-${s.service}"}`;
}

/** A trace id the queries look for, and its stream. */
interface Needle {
  readonly trace: string;
  readonly stream: Stream;
}

interface Dataset {
  readonly bodies: Uint8Array[];
  readonly rawBytes: number;
  readonly lines: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  /** Present ids, on prod streams (so both selectors hold them), each with 10 lines. */
  readonly present: Needle[];
  readonly absent: string[];
}

function generate(): Dataset {
  const bodyCount = Math.ceil((TOTAL_MB * 1e6) / (LINES_PER_BODY * LINE_BYTES));
  const lines = bodyCount * LINES_PER_BODY;
  const endNs = BigInt(Date.now()) * 1_000_000n;
  const stepNs = BigInt(Math.floor((SPAN_MS * 1e6) / lines));
  const startNs = endNs - stepNs * BigInt(lines);
  const bodies: Uint8Array[] = [];
  const present: Needle[] = [];
  let rawBytes = 0;
  for (let b = 0; b < bodyCount; b++) {
    const next = mulberry32(b + 1);
    const byStream = new Map<number, PushRequest["streams"][number]["entries"]>();
    let trace = "";
    for (let i = 0; i < LINES_PER_BODY; i++) {
      const n = b * LINES_PER_BODY + i;
      // A trace's 10 lines go to one stream; consecutive traces to the next streams.
      const streamIndex = Math.floor(n / LINES_PER_TRACE) % STREAMS;
      if (i % LINES_PER_TRACE === 0) {
        trace = hex16(next);
        const s = streamOf(streamIndex);
        if (s.prod && i % 1000 === 0 && present.length < 4 * QUERIES && b % 7 === 3) {
          present.push({ trace, stream: s });
        }
      }
      let line = `level=info caller=server.go:${100 + (n % 900)} msg="request served" method=GET path=/api/v1/items/${n} status=200 duration_ms=${n % 500} request_id=${hex16(next)} `;
      line += "x".repeat(Math.max(0, LINE_BYTES - line.length));
      rawBytes += line.length;
      const ns = startNs + BigInt(n) * stepNs;
      let entries = byStream.get(streamIndex);
      if (entries === undefined) byStream.set(streamIndex, (entries = []));
      entries.push({
        timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
        line,
        structuredMetadata: [
          { name: "trace_id", value: trace },
          { name: "span_id", value: hex16(next) },
        ],
      });
    }
    const streams = [...byStream].map(([index, entries]) => ({
      labels: labelsOf(streamOf(index)),
      entries,
    }));
    bodies.push(compress(encodePushRequest({ streams })));
  }
  const absentNext = mulberry32(0x5eed);
  const absent = Array.from({ length: QUERIES }, () => `ffff${hex16(absentNext).slice(4)}`);
  return {
    bodies,
    rawBytes,
    lines,
    startNs,
    endNs,
    present: present.slice(0, QUERIES),
    absent,
  };
}

// ---- phases -------------------------------------------------------------------------------

/** Load and the rest of the machine's CPU over a phase. */
interface Machine {
  readonly load1: number;
  /** CPU-seconds of every other process (the bench included) per second of the phase. */
  readonly otherCores: number;
}

/** The servers `pids` together from now until `end`: their CPU and RSS, and the machine's. */
function watch(pids: readonly number[]): {
  end(): Machine & { cpu: number; seconds: number; peakRss: number };
} {
  const cpuOf = (): number => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const rssOf = (): number => pids.reduce((sum, pid) => sum + rssMiB(pid), 0);
  const t0 = performance.now();
  const cpu0 = cpuOf();
  const busy0 = machineBusySeconds();
  let peakRss = rssOf();
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssOf());
  }, 100);
  return {
    end() {
      clearInterval(sampler);
      const seconds = (performance.now() - t0) / 1000;
      const cpu = cpuOf() - cpu0;
      const other = machineBusySeconds() - busy0 - cpu;
      return {
        cpu,
        seconds,
        peakRss,
        load1: loadavg()[0]!,
        otherCores: Math.max(0, other) / seconds,
      };
    },
  };
}

async function push(system: System, server: Server, data: Dataset): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (let b = next++; b < data.bodies.length; b = next++) {
        for (let attempt = 0; ; attempt++) {
          const res = await fetch(`${server.url}${system.pushPath}`, {
            method: "POST",
            headers: { "content-type": "application/x-protobuf" },
            body: data.bodies[b]!,
          });
          if (res.status === 204 || res.status === 200) break;
          const text = await res.text();
          // Back-pressure (429, 503) is retried, as clients do; anything else is a failure.
          if ((res.status !== 429 && res.status !== 503) || attempt >= 20) {
            throw new Error(`push ${b}: ${res.status} ${text}`);
          }
          await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
        }
      }
    }),
  );
}

type Shape = `${"narrow" | "wide"} ${"present" | "absent"}`;
type Latencies = Record<Shape, number[]>;

function noLatencies(): Latencies {
  return { "narrow present": [], "narrow absent": [], "wide present": [], "wide absent": [] };
}

/** The needles of a pass, in the order asked: each trace under both selectors, then an absent id. */
function needles(data: Dataset): { shape: Shape; selector: string; trace: string; want: number }[] {
  const cases: { shape: Shape; selector: string; trace: string; want: number }[] = [];
  for (const [i, n] of data.present.entries()) {
    const narrow = `{service="svc-${n.stream.service}"}`;
    const absent = data.absent[i % data.absent.length]!;
    cases.push({
      shape: "narrow present",
      selector: narrow,
      trace: n.trace,
      want: LINES_PER_TRACE,
    });
    cases.push({
      shape: "wide present",
      selector: `{env="prod"}`,
      trace: n.trace,
      want: LINES_PER_TRACE,
    });
    cases.push({ shape: "narrow absent", selector: narrow, trace: absent, want: 0 });
    cases.push({ shape: "wide absent", selector: `{env="prod"}`, trace: absent, want: 0 });
  }
  return cases;
}

/**
 * One pass of needle queries over every running system: each needle asked of each system
 * in turn, the first to be asked rotating from one needle to the next (see the file
 * comment), every answer checked.
 */
async function queries(running: readonly Running[], data: Dataset): Promise<Latencies[]> {
  const out = running.map(noLatencies);
  for (const [k, c] of needles(data).entries()) {
    for (let j = 0; j < running.length; j++) {
      const i = (k + j) % running.length;
      const { system, server } = running[i]!;
      const t0 = performance.now();
      const lines = await system.needle(server, c.selector, c.trace, data);
      const ms = performance.now() - t0;
      if (lines !== c.want) {
        throw new Error(`${system.name} ${c.shape} ${c.trace}: ${lines} lines, want ${c.want}`);
      }
      out[i]![c.shape].push(ms);
    }
  }
  return out;
}

interface Result {
  readonly system: string;
  readonly push: Machine & {
    seconds: number;
    cpu: number;
    peakRss: number;
    mbPerSecond: number;
    mbPerCpuSecond: number;
    cores: number;
  };
  readonly flushSeconds: number;
  /** Push and flush together: until every line pushed is in the store. */
  readonly ingest: { seconds: number; cpu: number; peakRss: number };
  readonly storedMiB: Record<string, number>;
  readonly cold: Latencies;
  readonly warm: Latencies;
  /** The machine while the system was queried (with the others of its pass: the same figures). */
  readonly queryMachine: Machine;
  /** The server's own counters after the queries ({@link System.counters}). */
  readonly queryCounters?: Record<string, number>;
}

type Queried = Pick<Result, "cold" | "warm" | "queryMachine" | "queryCounters">;
type Ingested = Omit<Result, keyof Queried>;

/** A system's server up for queries. */
interface Running {
  readonly system: System;
  readonly server: Server;
}

function dirOf(system: System): string {
  return values.keep === undefined
    ? mkdtempSync(join(tmpdir(), `peers-${system.name}-`))
    : join(values.keep, system.name);
}

/** Push, flush and a clean stop of one system, alone on the machine. */
async function ingest(system: System, dir: string, data: Dataset): Promise<Ingested> {
  // The server running now: stopped on the way out, whatever failed.
  let server: Server | undefined;
  try {
    server = await system.start(dir);
    const w = watch([server.pid]);
    const all = watch([server.pid]);
    await push(system, server, data);
    const p = w.end();
    const f0 = performance.now();
    await system.flush(server);
    const flushSeconds = (performance.now() - f0) / 1000;
    const ingested = all.end();
    await server.stop();
    server = undefined;
    const mb = data.rawBytes / 1e6;
    return {
      system: system.name,
      push: {
        ...p,
        mbPerSecond: mb / p.seconds,
        mbPerCpuSecond: mb / p.cpu,
        cores: p.cpu / p.seconds,
      },
      flushSeconds,
      ingest: { seconds: ingested.seconds, cpu: ingested.cpu, peakRss: ingested.peakRss },
      storedMiB: system.stored(dir),
    };
  } finally {
    await server?.stop();
  }
}

/**
 * Every system restarted on what it stored, then queried together ({@link queries}): a
 * cold pass (the first queries of each fresh process, this process's own side of them
 * already run against a stand-in) and a warm one.
 */
async function queryAll(
  systems: readonly System[],
  dirs: readonly string[],
  data: Dataset,
): Promise<Queried[]> {
  const running: Running[] = [];
  try {
    for (const system of systems) {
      await warmClient(system, `{env="prod"}`, data.absent[0]!, data);
    }
    for (const [i, system] of systems.entries()) {
      running.push({ system, server: await system.start(dirs[i]!) });
    }
    const q = watch(running.map((r) => r.server.pid));
    const cold = await queries(running, data);
    const warm = await queries(running, data);
    const qm = q.end();
    const out = [];
    for (const [i, { system, server }] of running.entries()) {
      const queryCounters = await system.counters?.(server);
      out.push({
        cold: cold[i]!,
        warm: warm[i]!,
        queryMachine: { load1: qm.load1, otherCores: qm.otherCores },
        ...(queryCounters !== undefined && { queryCounters }),
      });
    }
    return out;
  } finally {
    for (const r of running) await r.server.stop();
  }
}

// ---- report -------------------------------------------------------------------------------

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? Number.NaN;
}

function report(results: Result[], data: Dataset): void {
  const rows: [string, (r: Result) => number, number][] = [
    ["push, MB/s of raw lines", (r) => r.push.mbPerSecond, 1],
    ["raw MB per server CPU-second", (r) => r.push.mbPerCpuSecond, 1],
    ["cores used while pushing", (r) => r.push.cores, 2],
    ["peak RSS while pushing, MiB", (r) => r.push.peakRss, 0],
    ["flush, s", (r) => r.flushSeconds, 1],
    // What the acknowledgements hide: Sieve answers 204 once the log has a push, and its
    // ingesters may still be behind; Loki's ingester has the lines when it answers.
    ["push and flush, MB/s", (r) => data.rawBytes / 1e6 / r.ingest.seconds, 1],
    ["push and flush, raw MB per CPU-second", (r) => data.rawBytes / 1e6 / r.ingest.cpu, 1],
    ["peak RSS until flushed, MiB", (r) => r.ingest.peakRss, 0],
    ["stored: chunks, index and blooms, MiB", (r) => r.storedMiB.store!, 0],
    ["data dir after flush and stop, MiB", (r) => r.storedMiB.all!, 0],
  ];
  for (const temp of ["cold", "warm"] as const) {
    for (const shape of [
      "narrow present",
      "narrow absent",
      "wide present",
      "wide absent",
    ] as const) {
      rows.push([`${shape} ${temp} p50, ms`, (r) => pct(r[temp][shape], 0.5), 1]);
      rows.push([`${shape} ${temp} p99, ms`, (r) => pct(r[temp][shape], 0.99), 1]);
    }
  }
  const names = results.map((r) => r.system);
  // Sieve over each peer measured in the same run.
  const peers = names[0] === "sieve" ? names.slice(1) : [];
  const ratioHeads = peers.map((p) => ` sieve / ${p} |`).join("");
  console.log(
    `\n${(data.rawBytes / 1e6).toFixed(0)} MB of raw lines, ${data.lines} lines, ${data.bodies.length} bodies, ${STREAMS} streams`,
  );
  console.log(`| | ${names.join(" | ")} |${ratioHeads}`);
  console.log(
    `| --- | ${names.map(() => "---:").join(" | ")} |${peers.map(() => " ---: |").join("")}`,
  );
  for (const [label, f, digits] of rows) {
    const v = results.map(f);
    console.log(
      `| ${label} | ${v.map((x) => x.toFixed(digits)).join(" | ")} |${peers.map((_, i) => ` ${(v[0]! / v[i + 1]!).toFixed(2)} |`).join("")}`,
    );
  }
  for (const r of results) {
    console.log(
      `${r.system}: stored ${JSON.stringify(r.storedMiB)} MiB; while pushing load ${r.push.load1.toFixed(2)}, other processes ${r.push.otherCores.toFixed(2)} cores; while querying load ${r.queryMachine.load1.toFixed(2)}, others ${r.queryMachine.otherCores.toFixed(2)} cores${r.queryCounters === undefined ? "" : `; after the queries ${JSON.stringify(r.queryCounters)}`}`,
    );
  }
}

const t0 = performance.now();
console.log(`generating ${TOTAL_MB} MB of bodies...`);
const data = generate();
console.log(`generated in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
const only = values.only?.split(",");
const systems = [sieveSystem(values.main), loki, victorialogs].filter(
  (s) => only === undefined || only.includes(s.name),
);
/** Each system pushed to alone, one after the other, then all queried together. */
async function measure(dirs: readonly string[]): Promise<Result[]> {
  const ingested: Ingested[] = [];
  for (const [i, system] of systems.entries()) {
    console.log(`${system.name}: push, flush, stop...`);
    ingested.push(await ingest(system, dirs[i]!, data));
  }
  // The systems queried together, then each of those queried alone (all alone: --apart).
  const alone = (s: System): boolean => values.apart || s.queriedAlone === true;
  const passes = [systems.filter((s) => !alone(s))];
  for (const s of systems) if (alone(s)) passes.push([s]);
  const queried = new Map<System, Queried>();
  for (const pass of passes.filter((p) => p.length > 0)) {
    console.log(`${pass.map((s) => s.name).join(", ")}: restart, then each needle of each...`);
    const got = await queryAll(
      pass,
      pass.map((s) => dirs[systems.indexOf(s)]!),
      data,
    );
    pass.forEach((s, i) => queried.set(s, got[i]!));
  }
  return ingested.map((r, i) => ({ ...r, ...queried.get(systems[i]!)! }));
}

const dirs = systems.map(dirOf);
let results: Result[];
try {
  results = await measure(dirs);
} finally {
  if (values.keep === undefined) {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
report(results, data);
const out = join(ROOT, "bench", "results");
mkdirSync(out, { recursive: true });
const file = join(out, `peers-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(
  file,
  JSON.stringify(
    { mb: TOTAL_MB, lines: data.lines, streams: STREAMS, queries: QUERIES, results },
    (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v),
    2,
  ),
);
console.log(`wrote ${file}`);
