/**
 * The ingester child process of the integration tests (crash.test-child.ts), started and
 * stopped by signal: SIGKILL (a crash), SIGSTOP and SIGCONT (a pause, as a GC pause or a
 * frozen VM), SIGTERM (a graceful stop).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** A running child: its process, the URL it serves, and its exit code once it exits. */
export interface Child {
  readonly process: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
}

/** Starts crash.test-child.ts with `env` added; resolves once it prints `listening <url>`. */
export async function spawnChild(env: Record<string, string>): Promise<Child> {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "crash.test-child.ts")], {
    cwd: join(here, ".."),
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => {
    child.on("exit", (code) => {
      resolve(code);
    });
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => {
      reject(new Error(`child exited ${code} before listening: ${stderr}`));
    });
  });
  return { process: child, url, exited };
}

/** The sum of a child's metric `name` (from its `/metrics`), over series matching `labels`. */
export async function childMetric(
  child: Child,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): Promise<number> {
  const text = await (await fetch(`${child.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== " " && line[name.length] !== "{"))
      continue;
    if (Object.entries(labels).some(([k, v]) => !line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}
