/**
 * Crash safety of delete processing: the processor runs in a child process
 * (crash.test-child.ts) that is SIGKILLed at random times, then started again. After
 * every kill the store is consistent (every chunk and bloom block an index segment lists
 * exists), no line that should remain is missing and none is there twice; at the end
 * exactly the deleted lines are gone. Over the file store and the real S3 server.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand, DeleteBucketCommand } from "@aws-sdk/client-s3";
import { S3ObjectStore, type ObjectStore } from "@sieve/storage";
import { describe, expect, test } from "vitest";
import { DeleteRequestsStore } from "./requests.js";
import { consistent, raw } from "./suite.test-helper.js";
import { entry, tempStore, writeFlush, type TestStream } from "./testdata.test-helper.js";

const here = dirname(fileURLToPath(import.meta.url));
const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

/** 12 streams of 60 lines in 4 flushes: every 3rd line says "gdpr", every 7th "pii". */
function streams(flush: number): TestStream[] {
  return Array.from({ length: 3 }, (_, s) => {
    const app = `app-${flush}-${s}`;
    return {
      labels: { app, team: s % 2 === 0 ? "a" : "b" },
      entries: Array.from({ length: 60 }, (_, i) =>
        entry(
          T0 + BigInt(flush * 100 + i) * S,
          `${app} ${i}${i % 3 === 0 ? " gdpr" : ""}${i % 7 === 0 ? " pii" : ""}`,
          {
            trace_id: `${app}-${i}`,
          },
        ),
      ),
    };
  });
}

/** Runs the child until it prints `running`, then kills it after `killAfterMs` (or lets it finish). */
async function runChild(
  env: Record<string, string>,
  killAfterMs?: number,
): Promise<"killed" | "done"> {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "crash.test-child.ts")], {
    cwd: join(here, "../.."),
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("running")) resolve();
    });
    void exited.then((code) => {
      reject(new Error(`child exited ${code} before running: ${err}`));
    });
  });
  if (killAfterMs === undefined) {
    expect(await exited).toBe(0);
    return "done";
  }
  await new Promise((resolve) => setTimeout(resolve, killAfterMs));
  child.kill("SIGKILL");
  await exited;
  return out.includes("done") ? "done" : "killed";
}

async function crashRounds(
  store: ObjectStore,
  env: Record<string, string>,
  rounds: number,
  spanMs: number,
) {
  for (let f = 0; f < 4; f++) await writeFlush(store, "t", streams(f), 15);
  const before = await raw(store, "t", '{app=~".+"}');
  expect(before).toHaveLength(720);
  const requests = new DeleteRequestsStore(store);
  await requests.add({
    tenant: "t",
    query: '{team="a"} |= "gdpr"',
    startMs: 1_699_999_000_000,
    endMs: 1_700_001_000_000,
  });
  await requests.add({
    tenant: "t",
    query: '{app=~"app-[12]-.*"} |= "pii"',
    startMs: 1_699_999_000_000,
    endMs: 1_700_001_000_000,
  });
  const gone = (l: string): boolean =>
    (/ gdpr/.test(l) && /^app-\d-[02] /.test(l)) || (/ pii/.test(l) && /^app-[12]-/.test(l));
  const remain = before.filter((l) => !gone(l));
  let kills = 0;
  for (let round = 0; round < rounds; round++) {
    const outcome = await runChild(env, Math.floor(Math.random() * spanMs));
    if (outcome === "done") break;
    kills++;
    await consistent(store, "t");
    const now = await raw(store, "t", '{app=~".+"}');
    expect(new Set(now).size).toBe(now.length);
    for (const l of remain) expect(now).toContain(l);
  }
  await runChild(env);
  expect(await raw(store, "t", '{app=~".+"}')).toEqual(remain);
  expect((await requests.list("t")).map((r) => r.status)).toEqual(["processed", "processed"]);
  await consistent(store, "t");
  return kills;
}

describe("delete processing killed at random points", () => {
  test("over the file store", async () => {
    const { store, close } = await tempStore();
    try {
      const kills = await crashRounds(
        store,
        { CRASH_STORE: "fs", CRASH_DIR: store.root, CRASH_DELAY_MS: "5" },
        12,
        400,
      );
      expect(kills).toBeGreaterThanOrEqual(3);
    } finally {
      await close();
    }
  }, 240_000);

  test("over the S3 server", async () => {
    const endpoint = process.env.S3_ENDPOINT;
    if (endpoint === undefined)
      throw new Error("S3_ENDPOINT is not set: run via `sh scripts/test.sh`");
    const bucket = `sieve-delcrash-${randomBytes(6).toString("hex")}`;
    const store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
    await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
    try {
      const kills = await crashRounds(
        store,
        { CRASH_STORE: "s3", CRASH_BUCKET: bucket, CRASH_DELAY_MS: "5" },
        8,
        700,
      );
      expect(kills).toBeGreaterThanOrEqual(2);
    } finally {
      for (const key of await store.list("")) await store.delete(key);
      await store.client.send(new DeleteBucketCommand({ Bucket: bucket }));
    }
  }, 240_000);
});
