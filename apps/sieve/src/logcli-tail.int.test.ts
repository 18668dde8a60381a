// Loki's own client tails Sieve: `logcli query --tail` against a real `sieve all` prints a
// line pushed before it started (the history) and one pushed after (the live part), read
// from Sieve's WebSocket frames exactly as it reads Loki's.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

let dir: string;
let sieve: SieveProcess | undefined;
let logcli: ChildProcess | undefined;

async function push(line: string): Promise<void> {
  const response = await fetch(new URL("/loki/api/v1/push", sieve!.url), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      streams: [{ stream: { app: "cli" }, values: [[`${Date.now()}000000`, line]] }],
    }),
  });
  expect(response.status).toBe(204);
}

async function tailsOpen(): Promise<number> {
  const text = await (await fetch(new URL("/metrics", sieve!.url))).text();
  const line = text.split("\n").find((l) => l.startsWith("sieve_querier_tail_active "));
  return line === undefined ? 0 : Number(line.split(" ")[1]);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-logcli-tail-"));
  sieve = await spawnSieve(["all", "--data-dir", dir], { SIEVE_QUERIER_WORKERS: "1" });
}, 60_000);

afterAll(async () => {
  logcli?.kill("SIGKILL");
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
}, 30_000);

describe("logcli query --tail", () => {
  it("prints the recent line, then a line pushed after it started", async () => {
    // Cached by scripts/loki.sh (built once from the Go module proxy).
    const bin = execFileSync("sh", [join(ROOT, "scripts/loki.sh"), "logcli"], {
      encoding: "utf8",
    }).trim();
    await push("before the tail");
    let out = "";
    let err = "";
    logcli = spawn(
      bin,
      ["query", "--addr", sieve!.url, "--tail", "--quiet", "--output", "raw", '{app="cli"}'],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    logcli.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    logcli.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    await waitFor(
      () => Promise.resolve(out.includes("before the tail") ? true : undefined),
      `logcli to print the history (stderr: ${err})`,
    );
    expect(await tailsOpen()).toBe(1);
    await push("after the tail started");
    await waitFor(
      () => Promise.resolve(out.includes("after the tail started") ? true : undefined),
      `logcli to print the live line (stderr: ${err})`,
    );
    expect(out.trim().split("\n")).toEqual(["before the tail", "after the tail started"]);
    logcli.kill("SIGTERM");
    // The server lets the tail go when its client does.
    await waitFor(async () => ((await tailsOpen()) === 0 ? true : undefined), "the tail to end");
  }, 60_000);
});
