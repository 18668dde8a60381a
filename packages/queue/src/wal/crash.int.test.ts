import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { parseCrashRecordValue } from "./crash.test-helper.js";
import { openWal } from "./wal.js";
import { drain, tempDir } from "./wal.test-helper.js";

// The child runs the TypeScript source through tsx's loader, as vitest runs this file.
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
const childFile = new URL("./crash.test-child.ts", import.meta.url).pathname;

const ROUNDS = 6;
const PARTITIONS = 3;

/**
 * Starts a writer, lets it run until it has acknowledged records and then for a random
 * further moment, SIGKILLs it and returns the ids it acknowledged.
 */
async function writeAndKill(dir: string, firstId: number, seed: number): Promise<number[]> {
  const child = spawn(
    process.execPath,
    ["--import", tsxLoader, childFile, dir, String(PARTITIONS), String(firstId), String(seed)],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const acked: number[] = [];
  let stderr = "";
  let pending = "";
  let killAt = -1;
  const killDelayMs = 5 + (seed % 250);
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve(signal ?? code);
    });
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop()!;
    for (const line of lines) {
      if (line.startsWith("ack ")) acked.push(Number(line.slice(4)));
    }
    // The random moment: some time after the first acknowledgement.
    if (killAt < 0 && acked.length > 0) {
      killAt = Date.now() + killDelayMs;
      setTimeout(() => child.kill("SIGKILL"), killDelayMs);
    }
  });
  const how = await exited;
  expect(how, `writer ended by itself: ${stderr}`).toBe("SIGKILL");
  // Lines already in the pipe when the writer died were acknowledged too.
  await new Promise<void>((resolve) => {
    if (child.stdout.readableEnded) resolve();
    else child.stdout.once("end", resolve);
  });
  for (const line of pending.split("\n"))
    if (line.startsWith("ack ")) acked.push(Number(line.slice(4)));
  return acked;
}

describe("write-ahead log under kill -9", () => {
  it("reads back every acknowledged record exactly once and never a torn one", async () => {
    const dir = await tempDir();
    const acked = new Set<number>();
    let recovered = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const seed = (Math.random() * 2 ** 32) >>> 0;
      const ids = await writeAndKill(dir, round * 10_000_000, seed);
      expect(ids.length, `round ${round} (seed ${seed}) acknowledged nothing`).toBeGreaterThan(0);
      for (const id of ids) acked.add(id);

      const wal = await openWal({ dir, partitions: PARTITIONS, segmentBytes: 256 * 1024 });
      recovered += wal.stats.truncatedBytes;
      const read = await drain(wal);
      await wal.close();

      const seen = new Map<number, number>();
      for (const [p, records] of read.entries()) {
        expect(records.map((r) => r.offset)).toEqual([...Array(records.length).keys()]);
        for (const record of records) {
          expect(record.partition).toBe(p);
          const id = parseCrashRecordValue(record.value);
          expect(
            id,
            `round ${round} (seed ${seed}): damaged record at ${p}/${record.offset}`,
          ).toBeDefined();
          seen.set(id!, (seen.get(id!) ?? 0) + 1);
        }
      }
      for (const [id, times] of seen) expect(times, `record ${id} read ${times} times`).toBe(1);
      const missing = [...acked].filter((id) => !seen.has(id));
      expect(missing, `round ${round} (seed ${seed}) lost acknowledged records`).toEqual([]);
    }
    // Not an assertion of the test's subject, a note of what the rounds exercised.
    console.log(
      `crash test: ${acked.size} acknowledged records, ${recovered} torn bytes cut over ${ROUNDS} rounds`,
    );
  }, 120_000);
});
