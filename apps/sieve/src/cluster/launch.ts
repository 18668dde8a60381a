#!/usr/bin/env node
/**
 * `node apps/sieve/dist/cluster/launch.js start|stop|status`: the Sieve half of
 * `scripts/cluster.sh` (which starts Kafka and MinIO first and passes their addresses).
 * It is Node, not shell, because it reads the cluster configs with Sieve's own loader (the
 * bucket it creates is the one the roles read), creates the bucket with the S3 SDK, waits
 * on HTTP `/ready`, and keeps a state file the tests read; the shell part reuses
 * scripts/kafka.sh and scripts/minio.sh as the test setup does.
 *
 * Every instance of {@link instances} runs as `node apps/sieve/dist/main.js <role>
 * --config-file deploy/sieve/common.yaml --config-file deploy/sieve/<role>.yaml` (then
 * `$CLUSTER_CONFIG_FILE`, if set, over both), detached, with its log and data under the
 * state directory, then nginx in the foreground as the one entry point. `start` starts what
 * is not running (so after an instance died, `start` again brings it back, as `docker
 * compose up` does) and waits for every `/ready`; `stop` sends SIGTERM (and SIGCONT, so a
 * paused process can act on it), then SIGKILL after the grace; `status` says what runs and
 * what each `/ready` answers, and exits 1 unless everything is up.
 *
 * Environment: CLUSTER_DIR (state; default .cache/cluster), CLUSTER_HOST (127.0.0.1),
 * CLUSTER_PORT (entry, 3100; instances on the next 9 ports), CLUSTER_KAFKA_BROKERS and
 * CLUSTER_S3_ENDPOINT (required for start), CLUSTER_CONFIG_FILE, CLUSTER_READY_TIMEOUT_S
 * (60), CLUSTER_STOP_GRACE_S (30). S3 credentials: the AWS SDK's (AWS_ACCESS_KEY_ID, ...).
 */
import { spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { BucketAlreadyOwnedByYou, CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { loadSieveConfig } from "../config.js";
import {
  alive,
  readState,
  stateFile,
  writeState,
  type ClusterState,
  type ProcessState,
} from "./state.js";
import {
  REPO_ROOT,
  SIEVE_MAIN,
  configArgs,
  configFiles,
  instanceEnv,
  instances,
  nginxConf,
  type Addresses,
  type Instance,
} from "./topology.js";

interface Settings {
  readonly dir: string;
  readonly addresses: Addresses;
  readonly extraConfig: readonly string[];
  readonly readyTimeoutMs: number;
  readonly stopGraceMs: number;
}

function settings(env: NodeJS.ProcessEnv): Settings {
  const number = (name: string, fallback: number): number => {
    const text = env[name];
    if (text === undefined || text === "") return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 0) throw new Error(`${name}=${text}: not a number`);
    return value;
  };
  const entryPort = number("CLUSTER_PORT", 3100);
  if (entryPort < 1 || entryPort + 8 > 65535)
    throw new Error(`CLUSTER_PORT=${entryPort}: out of range`);
  const extra = env.CLUSTER_CONFIG_FILE;
  return {
    dir: resolve(env.CLUSTER_DIR ?? join(REPO_ROOT, ".cache/cluster")),
    addresses: {
      host: env.CLUSTER_HOST ?? "127.0.0.1",
      entryPort,
      kafkaBrokers: env.CLUSTER_KAFKA_BROKERS ?? "",
      s3Endpoint: env.CLUSTER_S3_ENDPOINT ?? "",
    },
    extraConfig: extra === undefined || extra === "" ? [] : [resolve(extra)],
    readyTimeoutMs: number("CLUSTER_READY_TIMEOUT_S", 60) * 1000,
    stopGraceMs: number("CLUSTER_STOP_GRACE_S", 30) * 1000,
  };
}

function log(message: string): void {
  process.stderr.write(`cluster: ${message}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The last lines of a log file, for a failure message. */
function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** GET `<url>/ready`: the status and the body's first line, or the connection error. */
async function ready(url: string): Promise<{ ok: boolean; text: string }> {
  try {
    const res = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(2000) });
    const body = (await res.text()).trim().split("\n")[0] ?? "";
    return { ok: res.status === 200, text: `${res.status} ${body}` };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { ok: false, text: cause ?? (error as Error).message };
  }
}

/** Whether nothing listens on host:port. */
function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once("error", () => {
      resolvePort(false);
    });
    server.listen({ host, port, exclusive: true }, () => {
      server.close(() => {
        resolvePort(true);
      });
    });
  });
}

/** Creates the bucket the roles read (common.yaml laid over by the extra file), if missing. */
async function createBucket(s: Settings): Promise<void> {
  const config = loadSieveConfig({
    file: configFiles("querier", s.extraConfig),
    env: { SIEVE_STORAGE_S3_ENDPOINT: s.addresses.s3Endpoint },
  });
  const { bucket, region, forcePathStyle } = config.storage.s3;
  const client = new S3Client({
    endpoint: s.addresses.s3Endpoint,
    forcePathStyle,
    region: region === "" ? (process.env.AWS_REGION ?? "us-east-1") : region,
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    log(`bucket ${bucket} created on ${s.addresses.s3Endpoint}`);
  } catch (error) {
    if (!(error instanceof BucketAlreadyOwnedByYou)) throw error;
  } finally {
    client.destroy();
  }
}

/** This process's environment without `SIEVE_*`: only the cluster's files and overrides configure the roles. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("SIEVE_")) env[key] = value;
  }
  return env;
}

/** Starts `command` detached (it outlives the launcher), its output appended to `logFile`. */
function spawnDetached(
  command: string,
  args: readonly string[],
  env: Record<string, string>,
  logFile: string,
): number {
  const out = openSync(logFile, "a");
  try {
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env,
      detached: true,
      stdio: ["ignore", out, out],
    });
    child.unref();
    if (child.pid === undefined) throw new Error(`${command} could not be started`);
    return child.pid;
  } finally {
    closeSync(out);
  }
}

/** Waits until `url/ready` answers 200, failing early when the process died. */
async function waitReady(p: ProcessState, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    if (!alive(p))
      throw new Error(`${p.name} exited during start-up; its log (${p.log}):\n${tail(p.log)}`);
    const answer = await ready(p.url);
    if (answer.ok) return;
    last = answer.text;
    if (Date.now() >= deadline) {
      throw new Error(
        `${p.name} not ready after ${timeoutMs} ms (/ready: ${last}); its log (${p.log}):\n${tail(p.log)}`,
      );
    }
    await sleep(250);
  }
}

async function start(s: Settings): Promise<void> {
  const { dir, addresses } = s;
  if (addresses.kafkaBrokers === "" || addresses.s3Endpoint === "") {
    throw new Error(
      "CLUSTER_KAFKA_BROKERS and CLUSTER_S3_ENDPOINT are required (scripts/cluster.sh sets them)",
    );
  }
  if (!existsSync(SIEVE_MAIN))
    throw new Error(`${SIEVE_MAIN} is missing: build first (pnpm exec tsc -b)`);
  for (const sub of ["logs", "data", "nginx/tmp"]) mkdirSync(join(dir, sub), { recursive: true });
  const all = instances(addresses);
  const previous = new Map((readState(dir)?.processes ?? []).map((p) => [p.name, p]));
  const entryUrl = `http://${addresses.host}:${addresses.entryPort}`;
  const running = (name: string): ProcessState | undefined => {
    const p = previous.get(name);
    return p !== undefined && alive(p) ? p : undefined;
  };
  const state: ProcessState[] = [];
  const save = (): void => {
    writeState(dir, { entryUrl, processes: [...state] } satisfies ClusterState);
  };
  await createBucket(s);

  // One role at a time, in ROLES order (the distributors create the topic the ingesters
  // join; the queriers want the others up); the replicas of a role together.
  const roles = [...new Set(all.map((i) => i.role))];
  for (const role of roles) {
    const group = all.filter((i) => i.role === role);
    const started: ProcessState[] = [];
    for (const instance of group) {
      const kept = running(instance.name);
      if (kept !== undefined) {
        state.push(kept);
        continue;
      }
      if (!(await portFree(addresses.host, instance.port))) {
        throw new Error(
          `${instance.name}: ${addresses.host}:${instance.port} is in use (choose another CLUSTER_PORT)`,
        );
      }
      const p = launchInstance(instance, all, s);
      state.push(p);
      started.push(p);
      log(`${instance.name} started (pid ${p.pid}) on ${instance.url}, log ${p.log}`);
    }
    save();
    await Promise.all(started.map((p) => waitReady(p, s.readyTimeoutMs)));
  }

  const kept = running("gateway");
  if (kept !== undefined) state.push(kept);
  else {
    if (!(await portFree(addresses.host, addresses.entryPort))) {
      throw new Error(
        `gateway: ${addresses.host}:${addresses.entryPort} is in use (choose another CLUSTER_PORT)`,
      );
    }
    const p = launchNginx(all, s, entryUrl);
    state.push(p);
    save();
    log(`gateway (nginx) started (pid ${p.pid}) on ${entryUrl}, log ${p.log}`);
    await waitReady(p, s.readyTimeoutMs);
  }
  save();
  log(`ready: push and query at ${entryUrl}`);
}

function launchInstance(instance: Instance, all: readonly Instance[], s: Settings): ProcessState {
  // --data-dir as a flag, not a variable: it puts the instance's own path in its command
  // line, which is how `alive` recognises the process behind a pid.
  const dataDir = join(s.dir, "data", instance.name);
  const logFile = join(s.dir, "logs", `${instance.name}.log`);
  const args = [
    SIEVE_MAIN,
    instance.role,
    ...configArgs(instance.role, s.extraConfig),
    "--data-dir",
    dataDir,
  ];
  const env = { ...baseEnv(), ...instanceEnv(instance, all, s.addresses) };
  const pid = spawnDetached(process.execPath, args, env, logFile);
  return { name: instance.name, url: instance.url, pid, log: logFile, marker: dataDir };
}

function launchNginx(all: readonly Instance[], s: Settings, entryUrl: string): ProcessState {
  const prefix = join(s.dir, "nginx");
  const conf = join(prefix, "nginx.conf");
  writeFileSync(conf, nginxConf(all, s.addresses, prefix));
  const nginx = process.env.NGINX ?? "nginx";
  const check = spawnSync(nginx, ["-t", "-q", "-p", `${prefix}/`, "-c", conf], {
    encoding: "utf8",
  });
  if (check.error !== undefined)
    throw new Error(`${nginx}: ${check.error.message} (scripts/cluster.sh installs it)`);
  if (check.status !== 0) throw new Error(`nginx refuses ${conf}:\n${check.stderr}`);
  const logFile = join(s.dir, "logs", "gateway.log");
  const pid = spawnDetached(nginx, ["-p", `${prefix}/`, "-c", conf], baseEnv(), logFile);
  return { name: "gateway", url: entryUrl, pid, log: logFile, marker: conf };
}

/** SIGTERM (and SIGCONT, for a paused process), then SIGKILL after `graceMs`. */
async function stopProcess(p: ProcessState, graceMs: number): Promise<void> {
  if (!alive(p)) return;
  process.kill(p.pid, "SIGTERM");
  process.kill(p.pid, "SIGCONT");
  const deadline = Date.now() + graceMs;
  while (alive(p)) {
    if (Date.now() >= deadline) {
      log(`${p.name} (pid ${p.pid}) still running after ${graceMs} ms: SIGKILL`);
      process.kill(p.pid, "SIGKILL");
      break;
    }
    await sleep(100);
  }
  log(`${p.name} stopped`);
}

async function stop(s: Settings): Promise<void> {
  const state = readState(s.dir);
  if (state === undefined) {
    log(`nothing started from ${s.dir}`);
    return;
  }
  // The entry point first (no new requests), then the distributors (nothing new into the
  // queue), the read path and the compactor, and the ingesters last (their shutdown
  // flushes to the bucket).
  const order = [
    ["gateway"],
    ["distributor"],
    ["querier", "bloom-gateway", "compactor"],
    ["ingester"],
  ];
  for (const prefixes of order) {
    const group = state.processes.filter((p) => prefixes.some((x) => p.name.startsWith(x)));
    await Promise.all(group.map((p) => stopProcess(p, s.stopGraceMs)));
  }
  rmSync(stateFile(s.dir), { force: true });
}

async function status(s: Settings): Promise<boolean> {
  const state = readState(s.dir);
  if (state === undefined) {
    process.stdout.write(`not started (no ${stateFile(s.dir)})\n`);
    return false;
  }
  let ok = true;
  process.stdout.write(`entry point: ${state.entryUrl}\n`);
  for (const p of state.processes) {
    const up = alive(p);
    const answer = up ? await ready(p.url) : { ok: false, text: "-" };
    ok &&= up && answer.ok;
    process.stdout.write(
      `${p.name.padEnd(16)} ${(up ? `running pid ${p.pid}` : "not running").padEnd(20)} ${p.url.padEnd(24)} /ready: ${answer.text}\n`,
    );
  }
  return ok;
}

async function main(argv: readonly string[]): Promise<number> {
  const command = argv[0] ?? "";
  try {
    const s = settings(process.env);
    switch (command) {
      case "start":
        await start(s);
        return 0;
      case "stop":
        await stop(s);
        return 0;
      case "status":
        return (await status(s)) ? 0 : 1;
      default:
        process.stderr.write("usage: launch.js start|stop|status (see scripts/cluster.sh)\n");
        return 2;
    }
  } catch (error) {
    log((error as Error).message);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
