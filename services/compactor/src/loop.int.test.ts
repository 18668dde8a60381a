/**
 * Two whole compactors (loop.test-child.ts) started at once over one store, the file store
 * and MinIO: one works, the other waits; killed (SIGKILL), the worker is replaced once its
 * lease has stopped changing for a whole ttl; stopped gracefully, it hands over at once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LOCK_KEY, parseLease } from "./lock.js";
import { openTestStore } from "./testdata.test-helper.js";

const here = dirname(fileURLToPath(import.meta.url));
const TTL_MS = 2000;

interface Loop {
  readonly id: string;
  readonly child: ChildProcess;
  /** Times (ms) of this compactor's runs. */
  readonly runs: number[];
  readonly exited: Promise<number | null>;
}

function startLoop(id: string, env: Record<string, string>): Loop {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "loop.test-child.ts")], {
    cwd: join(here, ".."),
    env: { ...process.env, ...env, LOOP_ID: id },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const runs: number[] = [];
  let buffer = "";
  child.stdout.on("data", (d: Buffer) => {
    buffer += d.toString();
    for (const m of buffer.matchAll(/^run (\S+) (\d+)$/gm))
      if (m[1] === id) runs.push(Number(m[2]));
    buffer = buffer.slice(buffer.lastIndexOf("\n") + 1);
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on("exit", (code) => {
      resolve(code);
    }),
  );
  return { id, child, runs, exited };
}

async function until(what: string, ok: () => boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(["fs", "s3"] as const)("two compactors over %s", (kind) => {
  const cleanup: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanup) await c();
  });

  it(
    "one works, the other waits and takes over when the first dies",
    { timeout: 120_000 },
    async () => {
      const { store, close, env } = await openTestStore(kind);
      cleanup.push(close);
      const a = startLoop("cmp-a", env);
      const b = startLoop("cmp-b", env);
      const c = startLoop("cmp-c", env);
      cleanup.push(async () => {
        for (const l of [a, b, c]) l.child.kill("SIGKILL");
        await Promise.all([a.exited, b.exited, c.exited]);
      });
      const loops = [a, b, c];
      await until("runs", () => loops.some((l) => l.runs.length >= 5));
      // Exactly one has run.
      const [first, ...others] = [...loops].sort((x, y) => y.runs.length - x.runs.length);
      expect(others.map((l) => l.runs.length)).toEqual([0, 0]);
      expect(parseLease(await store.get(LOCK_KEY))!.owner).toBe(first!.id);
      // It dies: no release, its lease simply stops changing.
      first!.child.kill("SIGKILL");
      const killedAt = Date.now();
      await first!.exited;
      await until("a takeover", () => others.some((l) => l.runs.length > 0));
      const [second, third] = [...others].sort((x, y) => y.runs.length - x.runs.length);
      // Not before the lease lapsed: a waiter needs a whole ttl of an unchanged lease.
      expect(second!.runs[0]! - killedAt).toBeGreaterThanOrEqual(TTL_MS - 500);
      await until("more runs", () => second!.runs.length >= 5);
      expect(third!.runs).toEqual([]);
      expect(parseLease(await store.get(LOCK_KEY))!.owner).toBe(second!.id);
      // Stopped gracefully, it releases the lease: the last one takes over at once.
      second!.child.kill("SIGTERM");
      expect(await second!.exited).toBe(0);
      const stoppedAt = Date.now();
      await until("a handover", () => third!.runs.length > 0);
      expect(third!.runs[0]! - stoppedAt).toBeLessThan(TTL_MS);
    },
  );
});
