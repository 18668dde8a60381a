// A lone querier reads what the ingesters have not flushed yet: started without their
// addresses it used to answer from the store alone, silently. It now refuses, by name,
// unless `querier.queryStoreOnly` says that is the point (Loki's `query_store_only`).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIEVE_MAIN, spawnSieve } from "./sieve.test-helper.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-targets-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("sieve querier", () => {
  it("refuses to start without ingester URLs, naming the option and the way out", async () => {
    const child = spawn(
      process.execPath,
      [SIEVE_MAIN, "querier", "--host", "127.0.0.1", "--port", "0", "--data-dir", dir],
      { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let err = "";
    child.stderr.on("data", (data: Buffer) => (err += data.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).toBe(1);
    expect(err).toMatch(/invalid configuration value: cluster\.ingesterUrls: .*queryStoreOnly/);
  });

  it("starts reading only the store when querier.queryStoreOnly says so", async () => {
    const querier = await spawnSieve(["querier", "--data-dir", dir], {
      SIEVE_QUERIER_QUERY_STORE_ONLY: "true",
      SIEVE_QUERIER_WORKERS: "1",
    });
    try {
      const response = await fetch(new URL("/ready", querier.url));
      expect(response.status).toBe(200);
    } finally {
      expect(await querier.stop()).toBe(0);
    }
  });
});
