/**
 * The systems `bench:peers` (peers.ts) puts side by side, and how it watches their
 * processes: each system says how to start on a data dir, where pushes go, how to ask a
 * needle, how to flush, and what it stored.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The time range every needle asks: the dataset's, Unix ns. */
export interface Window {
  readonly startNs: bigint;
  readonly endNs: bigint;
}

// ---- processes ----------------------------------------------------------------------------

/** CPU seconds (user + system, every thread) of a process, from /proc. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds the whole machine has been busy. */
export function machineBusySeconds(): number {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1);
  const [user, nice, system, , , irq, softirq, steal] = cpu.map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / 100;
}

export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m === null ? 0 : Number(m[1]) / 1024;
  } catch {
    return 0;
  }
}

function duMiB(path: string): number {
  try {
    return Number(execFileSync("du", ["-sk", path], { encoding: "utf8" }).split("\t")[0]) / 1024;
  } catch {
    return 0;
  }
}

export interface Server {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<number | null>;
}

async function spawnServer(
  command: string,
  args: string[],
  url: string,
  env: NodeJS.ProcessEnv = process.env,
  readyPath = "/ready",
): Promise<Server> {
  const child = spawn(command, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (t: string) => {
    stderr = (stderr + t).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${command} exited: ${stderr}`);
    try {
      const res = await fetch(`${url}${readyPath}`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${command} not ready after 120 s: ${stderr}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** What a system under test is: how to start it on a data dir, flush it, and its stored parts. */
export interface System {
  readonly name: "sieve" | "loki" | "victorialogs";
  start(dir: string): Promise<Server>;
  /** The path pushes go to: Loki's push API on each. */
  readonly pushPath: string;
  /** Asks for one trace's lines under a selector; answers their number. */
  needle(server: Server, selector: string, trace: string, data: Window): Promise<number>;
  /** The body of its answer to a needle that finds nothing. */
  readonly noLines: string;
  /** Makes everything pushed durable in the store. */
  flush(server: Server): Promise<void>;
  /** Stored bytes by part, after a flush and a clean stop. */
  stored(dir: string): Record<string, number>;
  /**
   * What the server says it did while it was queried, from its own metrics: where the needles
   * ran and what else ran beside them (a pass twice as slow as the last is read against it).
   */
  counters?(server: Server): Promise<Record<string, number>>;
  /**
   * Queried in a pass of its own, not between the others' needles: its needles take seconds
   * on both cores (Loki without blooms), far from the others' ratios either way, and asked
   * between theirs they held each needle of the others behind a sweep of the CPU caches
   * (VictoriaLogs' narrow absent p50 1.4 ms so, 1.3 ms beside Sieve alone).
   */
  readonly queriedAlone?: boolean;
}

/**
 * A port nothing listens on now, the system's pick: two benchmarks on one machine (the
 * team's sessions share it) must not push to or query each other's servers.
 */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const SIEVE_PORT = await freePort();
const LOKI_PORT = await freePort();
const LOKI_GRPC_PORT = await freePort();
const VICTORIALOGS_PORT = await freePort();

/** Fetches a URL and fails on any status but 200. */
async function get(url: string, what: string): Promise<string> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${what}: ${res.status} ${text}`);
  return text;
}

/** query_range's answer without a line. */
const LOGQL_NO_LINES = JSON.stringify({
  status: "success",
  data: { resultType: "streams", result: [] },
});

/**
 * Runs this process's side of `system`'s needles `calls` times against a stand-in server
 * that answers every one with no line: the client's HTTP and parsing code compiled before
 * a cold pass, so that the pass measures the server's first queries, not this process's
 * (the first system measured otherwise paid the client's warm-up in its cold p50: 3-16 ms
 * a needle where the server executed 2).
 */
export async function warmClient(
  system: System,
  selector: string,
  trace: string,
  data: Window,
  calls = 200,
): Promise<void> {
  const standIn = createHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(system.noLines);
  });
  await new Promise<void>((resolve) => standIn.listen(0, "127.0.0.1", resolve));
  const { port } = standIn.address() as AddressInfo;
  const server: Server = {
    url: `http://127.0.0.1:${port}`,
    pid: process.pid,
    stop: () => Promise.resolve(0),
  };
  try {
    for (let i = 0; i < calls; i++) await system.needle(server, selector, trace, data);
  } finally {
    standIn.closeAllConnections();
    await new Promise((resolve) => standIn.close(resolve));
  }
}

/** A LogQL needle through Loki's query_range: Sieve and Loki alike. */
async function logqlNeedle(
  server: Server,
  selector: string,
  trace: string,
  data: Window,
): Promise<number> {
  const params = new URLSearchParams({
    query: `${selector} | trace_id="${trace}"`,
    start: String(data.startNs),
    end: String(data.endNs + 60_000_000_000n),
    limit: "1000",
    direction: "backward",
  });
  const text = await get(`${server.url}/loki/api/v1/query_range?${params.toString()}`, trace);
  const answer = JSON.parse(text) as { data: { result: { values: unknown[] }[] } };
  return answer.data.result.reduce((n, s) => n + s.values.length, 0);
}

/** `sieve all`, the build at `main` (dist/main.js). */
export function sieveSystem(main: string): System {
  return {
    name: "sieve",
    pushPath: "/loki/api/v1/push",
    needle: logqlNeedle,
    noLines: LOGQL_NO_LINES,
    async start(dir) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, "sieve.yaml"),
        "distributor:\n  limits: { ingestionRateBytes: 1073741824, ingestionBurstBytes: 1073741824, perStreamRateBytes: 1073741824, perStreamBurstBytes: 1073741824 }\n",
      );
      const args = [main, "all", "--host", "127.0.0.1", "--port", String(SIEVE_PORT)];
      args.push("--data-dir", join(dir, "data"), "--config-file", join(dir, "sieve.yaml"));
      return spawnServer(process.execPath, args, `http://127.0.0.1:${SIEVE_PORT}`, {
        ...process.env,
        SIEVE_LOG_LEVEL: "warn",
      });
    },
    async flush(server) {
      const res = await fetch(`${server.url}/flush`, { method: "POST" });
      if (res.status !== 204) throw new Error(`sieve flush: ${res.status}`);
    },
    async counters(server) {
      const text = await get(`${server.url}/metrics`, "metrics");
      const out: Record<string, number> = {};
      const wanted =
        /^(sieve_querier_inline_queries_total\{outcome="\w+"\}|sieve_compactor_runs_total\{outcome="\w+"\}|sieve_compactor_segments_compacted_total) (\S+)$/;
      for (const line of text.split("\n")) {
        const m = wanted.exec(line);
        if (m !== null) out[m[1]!.replace(/^sieve_/, "")] = Number(m[2]);
      }
      return out;
    },
    stored(dir) {
      return {
        store: duMiB(join(dir, "data", "store")),
        wal: duMiB(join(dir, "data", "wal")),
        all: duMiB(join(dir, "data")),
      };
    },
  };
}

function lokiConfig(dir: string): string {
  return `auth_enabled: false
server:
  http_listen_address: 127.0.0.1
  http_listen_port: ${LOKI_PORT}
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: ${LOKI_GRPC_PORT}
  log_level: warn
  http_server_read_timeout: 5m
  http_server_write_timeout: 5m
  grpc_server_max_recv_msg_size: 104857600
  grpc_server_max_send_msg_size: 104857600
common:
  path_prefix: ${dir}
  instance_addr: 127.0.0.1
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
  storage:
    filesystem:
      chunks_directory: ${dir}/chunks
      rules_directory: ${dir}/rules
schema_config:
  configs:
    - from: 2024-01-01
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h
ingester:
  wal:
    flush_on_shutdown: true
limits_config:
  ingestion_rate_mb: 100000
  ingestion_burst_size_mb: 100000
  per_stream_rate_limit: 1GB
  per_stream_rate_limit_burst: 1GB
  max_global_streams_per_user: 0
  max_line_size: 0
  allow_structured_metadata: true
  max_entries_limit_per_query: 100000
  max_query_series: 100000
  max_query_length: 0
  reject_old_samples: false
  volume_enabled: false
query_range:
  cache_results: false
pattern_ingester:
  enabled: false
analytics:
  reporting_enabled: false
`;
}

export const loki: System = {
  name: "loki",
  queriedAlone: true,
  pushPath: "/loki/api/v1/push",
  needle: logqlNeedle,
  noLines: LOGQL_NO_LINES,
  async start(dir) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "loki.yaml"), lokiConfig(dir));
    const bin = execFileSync("sh", [join(ROOT, "scripts/loki.sh"), "path"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }).trim();
    return spawnServer(
      bin,
      [`-config.file=${join(dir, "loki.yaml")}`],
      `http://127.0.0.1:${LOKI_PORT}`,
    );
  },
  async flush(server) {
    // Loki's /flush starts the flush and answers at once: wait for its chunks in memory to go.
    const res = await fetch(`${server.url}/flush`, { method: "POST" });
    if (res.status !== 204) throw new Error(`loki flush: ${res.status}`);
    const deadline = Date.now() + 300_000;
    for (;;) {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const m = /^loki_ingester_memory_chunks (\S+)$/m.exec(text);
      if (m !== null && Number(m[1]) === 0) return;
      if (Date.now() > deadline) throw new Error("loki flush: chunks still in memory after 300 s");
      await new Promise((r) => setTimeout(r, 500));
    }
  },
  stored(dir) {
    const chunks = duMiB(join(dir, "chunks"));
    const index = duMiB(join(dir, "tsdb-shipper-active")) + duMiB(join(dir, "tsdb-shipper-cache"));
    return { store: chunks + index, chunks, index, wal: duMiB(join(dir, "wal")), all: duMiB(dir) };
  },
};

export const victorialogs: System = {
  name: "victorialogs",
  pushPath: "/insert/loki/api/v1/push",
  noLines: "",
  async needle(server, selector, trace, data) {
    // LogsQL: a stream filter and an exact match on the field; one JSON object a line.
    const params = new URLSearchParams({
      query: `${selector} trace_id:=${JSON.stringify(trace)}`,
      start: String(data.startNs),
      end: String(data.endNs + 60_000_000_000n),
      limit: "1000",
    });
    const text = await get(`${server.url}/select/logsql/query?${params.toString()}`, trace);
    return text.split("\n").filter((l) => l !== "").length;
  },
  async start(dir) {
    mkdirSync(dir, { recursive: true });
    const bin = execFileSync("sh", [join(ROOT, "scripts/victorialogs.sh"), "path"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }).trim();
    return spawnServer(
      bin,
      [
        `-storageDataPath=${join(dir, "data")}`,
        `-httpListenAddr=127.0.0.1:${VICTORIALOGS_PORT}`,
        "-loggerLevel=WARN",
        "-retentionPeriod=100y",
      ],
      `http://127.0.0.1:${VICTORIALOGS_PORT}`,
      process.env,
      "/health",
    );
  },
  async flush(server) {
    // Makes the in-memory parts searchable and durable; answers when done.
    await get(`${server.url}/internal/force_flush`, "victorialogs flush");
  },
  stored(dir) {
    const all = duMiB(join(dir, "data"));
    return { store: all, all };
  },
};
