/**
 * What the robustness tests, the fuzz test and `pnpm fuzz` share: a `sieve all` child on
 * a fresh data directory, a `/ready` prober, an RSS sampler reading /proc, canary data
 * pushed before an attack and checked after it, and a runner that sends generated requests
 * at a fixed concurrency and keeps every answer that breaks a rule, with what is needed to
 * replay it (seed, index, the request, the answer).
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startChild, type SieveChild } from "../cluster.test-helper.js";
import { type FuzzRequest, PUSH_PATH } from "./push.test-helper.js";
import { Rng } from "./random.test-helper.js";

/** A `sieve all` child with its own data directory. */
export interface Sieve {
  readonly child: SieveChild;
  readonly url: string;
  readonly dir: string;
  /** Its process id, for /proc. */
  readonly pid: number;
  /** Whether it is still running. */
  alive(): boolean;
  /** Stops it (SIGTERM, then SIGKILL after `graceMs`) and answers the exit code. */
  stop(graceMs?: number): Promise<number | null>;
  /** Stops it (as {@link stop}) and starts it again on the same data, configuration and env. */
  restart(graceMs?: number): Promise<Sieve>;
  /** Stops it and removes its data directory. */
  dispose(): Promise<void>;
}

/** How to start a {@link Sieve}. */
export interface SieveOptions {
  /** YAML written to a config file (component sections, docs/configuration.md). */
  readonly yaml?: string;
  /** `SIEVE_*` variables. */
  readonly env?: Readonly<Record<string, string>>;
  /** Reuse this data directory (a restart); default a new temporary one. */
  readonly dir?: string;
}

/** Starts `sieve all` (the built dist/main.js) on a loopback port. */
export async function startSieve(options: SieveOptions = {}): Promise<Sieve> {
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "sieve-robust-")));
  let configFile: string | undefined;
  if (options.yaml !== undefined) {
    configFile = join(dir, "sieve.yaml");
    await writeFile(configFile, options.yaml);
  }
  const child = await startChild({
    target: "all",
    args: ["--data-dir", dir],
    ...(configFile !== undefined && { configFile }),
    // The ready line is logged at info, so info it is (the helper keeps the last lines only).
    ...(options.env !== undefined && { env: options.env }),
  });
  const sieve: Sieve = {
    child,
    url: child.url,
    dir,
    pid: child.child.pid!,
    alive: () => child.child.exitCode === null && child.child.signalCode === null,
    stop: (graceMs) => child.stop(graceMs),
    async restart(graceMs) {
      await child.stop(graceMs);
      return startSieve({ ...options, dir });
    },
    async dispose() {
      await child.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return sieve;
}

/** VmRSS of process `pid` in bytes (0 once it is gone). */
export function rssBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? 0 : Number(kb) * 1024;
  } catch {
    return 0;
  }
}

/** Samples a process's RSS every `intervalMs` and keeps the peak. */
export class RssSampler {
  /** Highest RSS seen, bytes. */
  peakBytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    intervalMs = 100,
  ) {
    this.sample();
    this.timer = setInterval(() => {
      this.sample();
    }, intervalMs);
  }

  private sample(): void {
    this.peakBytes = Math.max(this.peakBytes, rssBytes(this.pid));
  }

  /** Stops sampling; answers the peak in bytes. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peakBytes;
  }
}

/** The value at quantile `q` (0–1) of `values` (nearest rank); 0 for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? sorted[0]!;
}

const READY: FuzzRequest = { kind: "ready", method: "GET", path: "/ready", headers: {} };

/** What the /ready prober saw. */
export interface ReadyStats {
  readonly probes: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Probes that did not answer 200 (timeouts and errors included). */
  readonly notOk: number;
}

/**
 * Sends `GET /ready` (or `request`) every `intervalMs` whether or not the previous one
 * answered, as a load balancer's health check does, so a blocked event loop shows as the
 * latency of every probe sent meanwhile. A probe not answered in `timeoutMs` counts at that
 * latency; an answer other than `okStatus` counts in `notOk`.
 */
export class ReadyProbe {
  private readonly latenciesMs: number[] = [];
  private notOk = 0;
  private sent = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    intervalMs = 50,
    private readonly timeoutMs = 5_000,
    private readonly request: (n: number) => FuzzRequest = () => READY,
    private readonly okStatus = 200,
  ) {
    this.timer = setInterval(() => {
      const probe = this.probe();
      this.inFlight.add(probe);
      void probe.finally(() => this.inFlight.delete(probe));
    }, intervalMs);
  }

  private async probe(): Promise<void> {
    const answer = await send(this.url, this.request(this.sent++), this.timeoutMs);
    if (answer.status !== this.okStatus) this.notOk++;
    this.latenciesMs.push(answer.latencyMs);
  }

  /** Stops probing, waits for the probes in flight, answers the figures. */
  async stop(): Promise<ReadyStats> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
    const l = this.latenciesMs;
    return {
      probes: l.length,
      p50Ms: quantile(l, 0.5),
      p99Ms: quantile(l, 0.99),
      maxMs: l.length === 0 ? 0 : Math.max(...l),
      notOk: this.notOk,
    };
  }
}

/** One answer: status 0 when no answer came (timeout, connection error). */
export interface Answer {
  readonly status: number;
  readonly latencyMs: number;
  /** The first 2,000 characters of the body, or the client error. */
  readonly text: string;
}

/** Sends one request, reads the whole answer; never throws. */
export async function send(url: string, request: FuzzRequest, timeoutMs = 10_000): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(url + request.path, {
      method: request.method,
      headers: request.headers,
      ...(request.body !== undefined && { body: request.body }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    return {
      status: res.status,
      latencyMs: performance.now() - started,
      text: text.slice(0, 2000),
    };
  } catch (error) {
    const e = error as Error & { cause?: Error };
    const cause = e.cause === undefined ? "" : `: ${e.cause.message}`;
    return {
      status: 0,
      latencyMs: performance.now() - started,
      text: `${e.name}: ${e.message}${cause}`,
    };
  }
}

/** A request as text to replay it: method, path, headers and the start of the body. */
export function describeRequest(request: FuzzRequest): string {
  const body = request.body;
  let shown = "";
  if (body !== undefined) {
    const head = Buffer.from(body.subarray(0, 400));
    const text = head.toString("utf8");
    const printable =
      !text.includes("\ufffd") && !Array.from(text).some((c) => c < " " && !"\t\n\r".includes(c));
    shown = ` body(${body.length} B${printable ? "" : ", base64"}): ${printable ? JSON.stringify(text) : head.toString("base64")}`;
  }
  return `${request.method} ${request.path.slice(0, 1500)} ${JSON.stringify(request.headers)}${shown}`;
}

/** A request that broke a rule, with everything needed to replay it. */
export interface Finding {
  readonly seed: number;
  readonly index: number;
  readonly kind: string;
  readonly rule: "5xx" | "slow" | "no-answer";
  readonly request: string;
  readonly status: number;
  readonly latencyMs: number;
  readonly answer: string;
}

/** What one fuzz run saw, per request kind and in total. */
export interface RunStats {
  readonly requests: number;
  /** Count per status (0: no answer). */
  readonly statuses: Record<string, number>;
  /** Count per request kind and status, e.g. `json-gzip 204`. */
  readonly byKind: Record<string, number>;
  /** The first answer's start per request kind and status, to see what a 4xx said. */
  readonly examples: Record<string, string>;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly findings: Finding[];
  readonly wallMs: number;
}

/** How to run a batch of generated requests. */
export interface RunOptions {
  readonly url: string;
  readonly seed: number;
  /** Indexes `first` .. `first + count - 1` are sent. */
  readonly first?: number;
  readonly count: number;
  readonly concurrency: number;
  /** Makes request `index` from its own generator. */
  readonly make: (rng: Rng, index: number) => FuzzRequest;
  /** An answer slower than this is a finding. Default 2,000 ms. */
  readonly slowMs?: number;
  /** Client timeout per request. Default 10,000 ms. */
  readonly timeoutMs?: number;
  /** Stop sending when this answers false (the process died). */
  readonly keepGoing?: () => boolean;
  /** Called after each answer with the number answered so far. */
  readonly onAnswer?: (answered: number) => void;
}

/** Sends `count` generated requests, `concurrency` at a time; answers the statistics. */
export async function runRequests(options: RunOptions): Promise<RunStats> {
  const { url, seed, count, concurrency, make } = options;
  const first = options.first ?? 0;
  const slowMs = options.slowMs ?? 2_000;
  const statuses: Record<string, number> = {};
  const byKind: Record<string, number> = {};
  const examples: Record<string, string> = {};
  const latencies: number[] = [];
  const findings: Finding[] = [];
  const started = performance.now();
  let next = first;
  const worker = async (): Promise<void> => {
    while (next < first + count && (options.keepGoing?.() ?? true)) {
      const index = next++;
      const request = make(Rng.forCase(seed, index), index);
      const answer = await send(url, request, options.timeoutMs);
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
      const key = `${request.kind} ${answer.status}`;
      byKind[key] = (byKind[key] ?? 0) + 1;
      examples[key] ??= answer.text.slice(0, 160);
      latencies.push(answer.latencyMs);
      options.onAnswer?.(latencies.length);
      const rule =
        answer.status === 0
          ? "no-answer"
          : answer.status >= 500
            ? "5xx"
            : answer.latencyMs > slowMs
              ? "slow"
              : undefined;
      if (rule !== undefined) {
        findings.push({
          seed,
          index,
          kind: request.kind,
          rule,
          request: describeRequest(request),
          status: answer.status,
          latencyMs: Math.round(answer.latencyMs),
          answer: answer.text.slice(0, 300),
        });
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return {
    requests: latencies.length,
    statuses,
    byKind,
    examples,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    maxMs: latencies.length === 0 ? 0 : Math.max(...latencies),
    findings,
    wallMs: performance.now() - started,
  };
}

/**
 * Findings as text for a failure message: grouped by kind, rule, status and the first line
 * of the answer (digits blanked), each group with its count and its first request.
 */
export function formatFindings(findings: readonly Finding[], maxGroups = 30): string {
  const groups = new Map<string, { count: number; first: Finding }>();
  for (const f of findings) {
    const answer = (f.answer.split("\n")[0] ?? "").replace(/\d+/g, "N").slice(0, 120);
    const key = `${f.kind} ${f.rule} ${f.status} ${answer}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, { count: 1, first: f });
    else group.count++;
  }
  const shown = [...groups.values()]
    .slice(0, maxGroups)
    .map(
      ({ count, first: f }) =>
        `${count}× ${f.kind} -> ${f.rule} ${f.status}, e.g. seed=${f.seed} index=${f.index} in ${f.latencyMs} ms: ${JSON.stringify(f.answer)}\n    ${f.request}`,
    );
  const more = groups.size > maxGroups ? `\n... and ${groups.size - maxGroups} more kinds` : "";
  return shown.join("\n") + more;
}

/** Lines pushed before an attack, to check after it that nothing was lost or changed. */
export interface Canary {
  readonly lines: readonly string[];
  readonly selector: string;
  /** A query window covering them, as query parameters. */
  readonly window: Readonly<Record<string, string>>;
}

/** Pushes `count` distinct canary lines (JSON, one stream, with metadata) and waits until all are queryable. */
export async function pushCanary(url: string, count = 200, tenant?: string): Promise<Canary> {
  const nowMs = Date.now();
  const lines = Array.from(
    { length: count },
    (_, i) => `canary ${i} ünïcödé ${"#".repeat(i % 17)}`,
  );
  const body = JSON.stringify({
    streams: [
      {
        stream: { app: "canary", fuzz: "before" },
        values: lines.map((line, i) => [
          String(BigInt(nowMs - count + i) * 1_000_000n),
          line,
          { trace_id: `c${i}` },
        ]),
      },
    ],
  });
  const res = await fetch(url + PUSH_PATH, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      ...(tenant !== undefined && { "X-Scope-OrgID": tenant }),
    },
    body,
  });
  if (res.status !== 204) throw new Error(`canary push: ${res.status} ${await res.text()}`);
  const canary: Canary = {
    lines,
    selector: '{app="canary", fuzz="before"}',
    window: {
      start: String(BigInt(nowMs - 3_600_000) * 1_000_000n),
      end: String(BigInt(nowMs + 3_600_000) * 1_000_000n),
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await readCanary(url, canary, tenant).catch(() => []);
    if (got.length >= count || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return canary;
}

/** The canary lines a query answers now (sorted); throws with the answer when it fails. */
export async function readCanary(url: string, canary: Canary, tenant?: string): Promise<string[]> {
  const params = new URLSearchParams({ query: canary.selector, limit: "5000", ...canary.window });
  const res = await fetch(`${url}/loki/api/v1/query_range?${params.toString()}`, {
    headers: tenant !== undefined ? { "X-Scope-OrgID": tenant } : {},
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`canary query: ${res.status} ${text.slice(0, 500)}`);
  const data = (JSON.parse(text) as { data: { result: { values: [string, string][] }[] } }).data;
  return data.result.flatMap((s) => s.values.map((v) => v[1])).sort();
}

/** Probes /ready while `work` runs; answers its result and what the prober saw. */
export async function whileProbing<T>(
  url: string,
  work: () => Promise<T>,
): Promise<{ result: T; ready: ReadyStats }> {
  const probe = new ReadyProbe(url);
  try {
    const result = await work();
    return { result, ready: await probe.stop() };
  } catch (error) {
    await probe.stop();
    throw error;
  }
}
