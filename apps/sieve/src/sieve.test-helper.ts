// Runs the built `sieve` command as a child process, as a user would, for end-to-end tests.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { onTestFinished } from "vitest";

/** The built entry point; `pnpm run build` (part of `npm test`) makes it. */
export const SIEVE_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));

/** A new directory under the system's temporary one, removed when the calling test ends. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** A running `sieve` process. */
export interface SieveProcess {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Base URL of the internal APIs: {@link url} unless `server.internalPort` is set. */
  readonly internalUrl: string;
  readonly child: ChildProcess;
  /** Everything it printed so far, for failure messages. */
  output(): string;
  /** Sends `signal` (SIGTERM: graceful) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `sieve <args>` on a free loopback port and resolves once it logs that it is ready
 * (the log line carries the URL). Rejects with its output if it exits or takes over 30 s.
 */
export async function spawnSieve(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Promise<SieveProcess> {
  const child = spawn(
    process.execPath,
    [SIEVE_MAIN, ...args, "--host", "127.0.0.1", "--port", "0"],
    { env: { ...process.env, SIEVE_LOG_LEVEL: "info", ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let pending = "";
  const exited = once(child, "exit").then(([code]) => code as number | null);
  const urls = await new Promise<{ url: string; internalUrl: string }>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`sieve ${args.join(" ")} not ready after 30 s:\n${out}`));
    }, 30_000);
    child.stderr.on("data", (data: Buffer) => (out += data.toString()));
    child.stdout.on("data", (data: Buffer) => {
      const text = data.toString();
      out += text;
      pending += text;
      let newline;
      while ((newline = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (!line.includes("is ready")) continue;
        try {
          const record = JSON.parse(line) as { url?: string; internalUrl?: string };
          if (typeof record.url === "string") {
            clearTimeout(timer);
            resolve({ url: record.url, internalUrl: record.internalUrl ?? record.url });
          }
        } catch {
          // Not a log record: keep reading.
        }
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`sieve ${args.join(" ")} exited with ${code}:\n${out}`));
    });
  });
  return {
    ...urls,
    child,
    output: () => out,
    async stop(signal = "SIGTERM") {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: Error | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error instanceof Error ? error : new Error(JSON.stringify(error));
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}${last === undefined ? "" : `: ${last.message}`}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** GETs `path` with query parameters and answers the parsed JSON (throws on non-2xx). */
export async function getJson(
  base: string,
  path: string,
  params: Record<string, string | string[]> = {},
  headers: Record<string, string> = {},
): Promise<unknown> {
  const url = new URL(path, base);
  for (const [name, value] of Object.entries(params)) {
    for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(name, v);
  }
  const response = await fetch(url, { headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${url.pathname}: ${response.status} ${text}`);
  return JSON.parse(text) as unknown;
}
