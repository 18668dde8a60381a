/**
 * A private MinIO for outage tests: a server of the test's own, on a free loopback port,
 * that the test can stop (SIGKILL, as a crash), start again over the same data, freeze
 * (SIGSTOP: the port still accepts connections, nothing answers, as a hung store) and
 * thaw (SIGCONT). Never the shared server on 9000, which other suites use meanwhile.
 *
 * The binary is the one `sh scripts/minio.sh build` caches in `.cache/minio/bin` (built
 * once from its Go module). It is run directly rather than through `minio.sh start`,
 * which wipes the data directory: a restart here must find the objects written before.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { S3ObjectStore, type S3ObjectStoreConfig } from "./s3.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const BINARY = join(ROOT, ".cache", "minio", "bin", "minio");
/** The test credentials of scripts/minio.sh. */
export const MINIO_CREDENTIALS = {
  accessKeyId: "sieve-test",
  secretAccessKey: "sieve-test-secret",
} as const;
const START_TIMEOUT_MS = 60_000;

/** A private MinIO; see the file comment. */
export interface PrivateMinio {
  /** `http://127.0.0.1:<port>`, the same across restarts. */
  readonly endpoint: string;
  /** The server's process id while it runs. */
  readonly pid: number | undefined;
  /** Kills the server (SIGKILL) and waits for it to exit; the data stays. */
  stop(): Promise<void>;
  /** Starts the server again on the same port and data; resolves once it answers. */
  start(): Promise<void>;
  /** SIGSTOP: connections are accepted by the kernel and never answered. */
  freeze(): void;
  /** SIGCONT after {@link freeze}. */
  thaw(): void;
  /** A store over a new bucket of this server, with `overrides` on top. */
  bucket(overrides?: Partial<S3ObjectStoreConfig>): Promise<S3ObjectStore>;
  /** Stops the server and removes its data. */
  close(): Promise<void>;
}

/** Starts a private MinIO on a free port; resolves once it answers its health check. */
export async function startPrivateMinio(): Promise<PrivateMinio> {
  if (!existsSync(BINARY)) {
    // Cached after the first build; the same command scripts/test.sh runs.
    const built = spawnSync("sh", [join(ROOT, "scripts", "minio.sh"), "build"], {
      stdio: "inherit",
    });
    if (built.status !== 0) throw new Error("could not build MinIO (sh scripts/minio.sh build)");
  }
  const port = await freePort();
  const consolePort = await freePort();
  const data = await mkdtemp(join(tmpdir(), "sieve-minio-"));
  const endpoint = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let frozen = false;
  const killOnExit = (): void => {
    child?.kill("SIGKILL");
  };
  process.once("exit", killOnExit);

  const start = async (): Promise<void> => {
    if (child !== undefined) throw new Error("the private MinIO is already running");
    const proc = spawn(
      BINARY,
      [
        "server",
        "--quiet",
        "--address",
        `127.0.0.1:${port}`,
        "--console-address",
        `127.0.0.1:${consolePort}`,
        data,
      ],
      {
        env: {
          ...process.env,
          MINIO_ROOT_USER: MINIO_CREDENTIALS.accessKeyId,
          MINIO_ROOT_PASSWORD: MINIO_CREDENTIALS.secretAccessKey,
          MINIO_UPDATE: "off",
          MINIO_BROWSER: "off",
        },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let stderr = "";
    proc.stderr.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    child = proc;
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await live(endpoint))) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        child = undefined;
        throw new Error(`the private MinIO exited during start: ${stderr}`);
      }
      if (Date.now() > deadline) throw new Error(`the private MinIO did not answer: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    if (proc === undefined) return;
    child = undefined;
    frozen = false;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill("SIGKILL"); // ends a stopped (frozen) process too
    await exited;
  };

  await start();
  return {
    endpoint,
    get pid() {
      return child?.pid;
    },
    stop,
    start,
    freeze() {
      if (child === undefined) throw new Error("the private MinIO is not running");
      child.kill("SIGSTOP");
      frozen = true;
    },
    thaw() {
      if (child !== undefined && frozen) child.kill("SIGCONT");
      frozen = false;
    },
    async bucket(overrides = {}) {
      const store = new S3ObjectStore({
        bucket: `sieve-outage-${Math.random().toString(16).slice(2, 10)}`,
        endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: MINIO_CREDENTIALS,
        ...overrides,
      });
      await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
      return store;
    },
    async close() {
      process.removeListener("exit", killOnExit);
      await stop();
      await rm(data, { recursive: true, force: true });
    },
  };
}

async function live(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(`${endpoint}/minio/health/live`, {
      signal: AbortSignal.timeout(1000),
    });
    return res.status === 200;
  } catch {
    return false;
  }
}

/** A loopback port nobody listens on now (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (typeof address === "object" && address !== null) resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}
