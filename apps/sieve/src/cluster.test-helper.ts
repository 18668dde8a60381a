/**
 * Runs Sieve's roles as separate `sieve <target>` child processes, as an operator would,
 * for the distributed end-to-end test: each child is the built command (dist/main.js) run
 * with this Node, on a port the kernel picks (`--port 0`; the URL comes from the ready log
 * line), its output kept (bounded) for failure messages, and stopped with SIGTERM, then
 * SIGKILL if it does not exit in time. A {@link Cluster} stops every child it started,
 * also when a start fails half-way. {@link NativeCluster} starts the whole cluster through
 * `scripts/cluster.sh` instead, with the configs of deploy/.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { alive, readState, type ClusterState, type ProcessState } from "./cluster/state.js";
import { REPO_ROOT } from "./cluster/topology.js";

/** The built entry point of the `sieve` command (`pnpm run build` makes it). */
export const SIEVE_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));

/** Lines of output kept per child: enough to explain a failure, bounded for long runs. */
const KEPT_LINES = 300;

/** How to start one child. */
export interface ChildOptions {
  /** `all`, `distributor`, `ingester`, `bloom-gateway` or `querier`. */
  readonly target: string;
  /** A name for messages, e.g. `ingester-1`. Default: the target. */
  readonly name?: string;
  /** `--config-file`. */
  readonly configFile?: string;
  /** Extra command-line arguments (e.g. `--data-dir D`). */
  readonly args?: readonly string[];
  /** Environment added to this process's, after every inherited `SIEVE_*` is removed. */
  readonly env?: Readonly<Record<string, string>>;
  /** Longest wait for the ready line. Default 30 s. */
  readonly readyTimeoutMs?: number;
}

/** A running `sieve` child process. */
export interface SieveChild {
  readonly name: string;
  /** Base URL from its ready line, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly child: ChildProcess;
  /** The last {@link KEPT_LINES} lines it printed (stdout and stderr, interleaved). */
  output(): string;
  /**
   * SIGTERM (graceful: flush, commit, exit), then SIGKILL after `graceMs`; resolves with
   * the exit code, or null when it had to be killed or died of a signal.
   */
  stop(graceMs?: number): Promise<number | null>;
}

/** Keeps the last `max` lines of a stream of chunks. */
class LineTail {
  private readonly lines: string[] = [];
  private partial = "";

  constructor(private readonly max: number) {}

  /** Adds a chunk; calls `onLine` with each complete line. */
  push(text: string, onLine?: (line: string) => void): void {
    const parts = (this.partial + text).split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) {
      this.lines.push(line);
      if (this.lines.length > this.max) this.lines.shift();
      onLine?.(line);
    }
  }

  text(): string {
    return [...this.lines, this.partial].join("\n");
  }
}

/** The URL of a pino record `sieve <target> is ready`, else undefined. */
function readyUrl(line: string, target: string): string | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const record = JSON.parse(line) as { msg?: unknown; url?: unknown };
    if (record.msg === `sieve ${target} is ready` && typeof record.url === "string") {
      return record.url;
    }
  } catch {
    // Not a log record (a warning printed by a dependency): not the ready line.
  }
  return undefined;
}

/** This process's environment without `SIEVE_*`, so only what a test sets configures a child. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("SIEVE_")) env[key] = value;
  }
  return env;
}

/**
 * Starts one `sieve` child on 127.0.0.1 and resolves once it logs that it is ready.
 * Rejects, with its output, when it exits first or is not ready in time (then it is killed).
 */
export async function startChild(options: ChildOptions): Promise<SieveChild> {
  if (!existsSync(SIEVE_MAIN)) {
    throw new Error(`${SIEVE_MAIN} is missing: run \`pnpm run build\` first`);
  }
  const name = options.name ?? options.target;
  const args = [SIEVE_MAIN, options.target, "--host", "127.0.0.1", "--port", "0"];
  if (options.configFile !== undefined) args.push("--config-file", options.configFile);
  args.push(...(options.args ?? []));
  const child = spawn(process.execPath, args, {
    env: { ...baseEnv(), SIEVE_LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const tail = new LineTail(KEPT_LINES);
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => {
      resolve(code);
    });
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text: string) => {
    tail.push(text);
  });
  child.stdout.setEncoding("utf8");
  const timeoutMs = options.readyTimeoutMs ?? 30_000;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name} not ready after ${timeoutMs} ms; its output:\n${tail.text()}`));
    }, timeoutMs);
    child.stdout.on("data", (text: string) => {
      tail.push(text, (line) => {
        const found = readyUrl(line, options.target);
        if (found !== undefined) {
          clearTimeout(timer);
          resolve(found);
        }
      });
    });
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`${name} could not be started: ${error.message}`));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(`${name} exited with ${String(code)} before ready; output:\n${tail.text()}`),
      );
    });
  });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    name,
    url,
    child,
    output: () => tail.text(),
    async stop(graceMs = 20_000) {
      if (!running()) return child.exitCode;
      child.kill("SIGTERM");
      let timer: NodeJS.Timeout | undefined;
      const killed = new Promise<null>((resolve) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL");
          resolve(null);
        }, graceMs);
      });
      const code = await Promise.race([exited, killed]);
      clearTimeout(timer);
      await exited;
      return code;
    },
  };
}

/** Children started together and stopped together. */
export class Cluster {
  private readonly children: SieveChild[] = [];
  private readonly starting = new Set<Promise<SieveChild>>();

  /** Starts a child and remembers it for {@link stopAll}. */
  async start(options: ChildOptions): Promise<SieveChild> {
    const started = startChild(options);
    this.starting.add(started);
    try {
      const child = await started;
      this.children.push(child);
      return child;
    } finally {
      this.starting.delete(started);
    }
  }

  /** The kept output of every child, each under its name: for failure messages. */
  output(): string {
    return this.children.map((c) => `----- ${c.name} -----\n${c.output()}`).join("\n");
  }

  /**
   * Stops every child in parallel (SIGTERM, SIGKILL after `graceMs`); answers the exit code
   * of each by name (a child already stopped answers its code again). Children still
   * starting are awaited first (a failed start has already killed its child).
   */
  async stopAll(graceMs?: number): Promise<Record<string, number | null>> {
    await Promise.allSettled([...this.starting]);
    const children = [...this.children].reverse();
    const codes = await Promise.all(children.map((c) => c.stop(graceMs)));
    return Object.fromEntries(children.map((c, i) => [c.name, codes[i] ?? null]));
  }
}

/**
 * Polls `probe` until it answers something other than undefined; throws after `timeoutMs`
 * with `what` and the last error or value seen, so a stuck wait says what it was waiting on.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = "";
    } catch (error) {
      last = `: last error: ${(error as Error).message}`;
    }
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Sums the samples of one metric in a Prometheus text exposition (`name` exactly, or
 * `name{...}`), optionally only those whose labels contain `labelFilter` (e.g.
 * `reason="full"`). Answers 0 when the metric has no sample.
 */
export function metricSum(exposition: string, name: string, labelFilter?: string): number {
  let sum = 0;
  for (const line of exposition.split("\n")) {
    if (line.startsWith("#")) continue;
    if (!line.startsWith(name + " ") && !line.startsWith(name + "{")) continue;
    if (labelFilter !== undefined && !line.includes(labelFilter)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}

/** GETs `<url>/metrics` and answers the exposition text. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  if (!res.ok) throw new Error(`GET ${url}/metrics: ${res.status}`);
  return res.text();
}

/** The last `lines` lines of a file, or a note that it cannot be read. */
function fileTail(file: string, lines: number): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch (error) {
    return `(${(error as Error).message})`;
  }
}

/** The first port of Linux's ephemeral range (its default where it cannot be read). */
function ephemeralLow(): number {
  try {
    const low = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    if (Number.isInteger(low) && low > 21_000) return low;
  } catch {
    // Not Linux, or no /proc: the default below.
  }
  return 32_768;
}

/** Whether nothing listens on 127.0.0.1:port. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => {
      resolve(false);
    });
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => {
      server.close(() => {
        resolve(true);
      });
    });
  });
}

/**
 * The cluster of `scripts/cluster.sh` (the compose topology as local processes, with the
 * configs of deploy/), started by a test exactly as a user starts it: the script, with its
 * state, logs and data in `dir` and its entry port on a free block of ports, on the suite's
 * Kafka and MinIO (`CLUSTER_KAFKA_BROKERS`, `CLUSTER_S3_ENDPOINT`) with the test's own
 * bucket and topic in `CLUSTER_CONFIG_FILE`. The processes' pids come from the script's
 * state file, so a test can kill, pause and resume one.
 */
export class NativeCluster {
  constructor(
    /** `CLUSTER_DIR`. */
    readonly dir: string,
    /** The script's `CLUSTER_*` variables (and any other the roles should see). */
    private readonly env: Readonly<Record<string, string>>,
  ) {}

  /**
   * The first of `count` consecutive free ports, from a random start: the cluster takes
   * the entry port and the 8 after it, none of which the suite's servers use (they take
   * kernel-chosen ports). Below the kernel's ephemeral range: a block inside it was free
   * when checked and then taken, seconds later, as the source port of some connection
   * (`cluster: querier-2: 127.0.0.1:47658 is in use`).
   */
  static async freePorts(count = 9): Promise<number> {
    const below = ephemeralLow() - count;
    for (let attempt = 0; attempt < 50; attempt++) {
      const base = 20_000 + Math.floor((Math.random() * (below - 20_000)) / 10) * 10;
      const free = await Promise.all(Array.from({ length: count }, (_, i) => portFree(base + i)));
      if (free.every(Boolean)) return base;
    }
    throw new Error(`no ${count} consecutive free ports found`);
  }

  /** Runs `sh scripts/cluster.sh <command>`; resolves with its exit code and output. */
  async run(
    command: "start" | "stop" | "status",
  ): Promise<{ code: number | null; output: string }> {
    const child = spawn("sh", [join(REPO_ROOT, "scripts/cluster.sh"), command], {
      cwd: REPO_ROOT,
      env: { ...baseEnv(), ...this.env, CLUSTER_DIR: this.dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (t: string) => (output += t));
    child.stderr.setEncoding("utf8").on("data", (t: string) => (output += t));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (c) => {
        resolve(c);
      });
    });
    return { code, output };
  }

  /** `start`, failing with the script's output and the logs when it does not exit 0. */
  async start(): Promise<ClusterState> {
    const { code, output } = await this.run("start");
    if (code !== 0) {
      throw new Error(`cluster.sh start exited ${String(code)}:\n${output}\n${this.output()}`);
    }
    return this.state();
  }

  /** The script's state file (every process it started). */
  state(): ClusterState {
    const state = readState(this.dir);
    if (state === undefined) throw new Error(`no cluster state in ${this.dir}`);
    return state;
  }

  /** One process by its compose name (`ingester-1`, `gateway`). */
  process(name: string): ProcessState {
    const found = this.state().processes.find((p) => p.name === name);
    if (found === undefined) throw new Error(`no process ${name} in ${this.dir}`);
    return found;
  }

  /**
   * The base URLs of a role's instances (`ingester` → ingester-1's and ingester-2's;
   * `compactor`, which runs once, → compactor's).
   */
  urls(role: string): string[] {
    return this.state()
      .processes.filter((p) => p.name === role || p.name.startsWith(`${role}-`))
      .map((p) => p.url);
  }

  /** Sends `signal` to one process (SIGKILL, SIGSTOP, SIGCONT, SIGTERM). */
  signal(name: string, signal: NodeJS.Signals): void {
    const p = this.process(name);
    if (!alive(p)) throw new Error(`${name} (pid ${p.pid}) is not running`);
    process.kill(p.pid, signal);
  }

  /** Resolves once the process is gone. */
  async exited(name: string, timeoutMs = 30_000): Promise<void> {
    const p = this.process(name);
    await waitFor(`${name} to exit`, () => Promise.resolve(alive(p) ? undefined : true), timeoutMs);
  }

  /** The last lines of every process's log, each under its name: for failure messages. */
  output(lines = 40): string {
    const state = readState(this.dir);
    if (state === undefined) return "(no cluster state)";
    return state.processes
      .map((p) => `----- ${p.name} (pid ${p.pid}) -----\n${fileTail(p.log, lines)}`)
      .join("\n");
  }
}
