// A lone querier reads what the ingesters have not flushed yet: started without their
// addresses it used to answer from the store alone, silently. It now refuses, by name,
// unless `querier.queryStoreOnly` says that is the point (Loki's `query_store_only`).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeSegment, segmentKey } from "@sieve/index";
import { FsObjectStore } from "@sieve/storage";
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

describe("sieve compactor", () => {
  it("two on one store: one holds the lock and merges the index, the other takes over when it stops", async () => {
    const data = join(dir, "compactor");
    const store = new FsObjectStore(join(data, "store"));
    const day = Math.floor(Date.now() / 86_400_000) - 1;
    const at = BigInt(day) * 86_400_000_000_000n;
    for (let i = 0; i < 3; i++) {
      const chunk = {
        from: at + BigInt(i),
        through: at + BigInt(i),
        checksum: i,
        bytes: 1,
        entries: 1,
        prefixed: false,
      };
      const segment = {
        tenant: "fake",
        day,
        series: [
          {
            fingerprint: 1n,
            labels: '{app="a"}',
            bloom: { kind: "missing", reason: "disabled" } as const,
            chunks: [chunk],
          },
        ],
      };
      await store.put(
        segmentKey("fake", day, `00000000000000${i}-ingester-00000000`),
        encodeSegment(segment),
      );
    }
    const env = {
      SIEVE_COMPACTOR_COMPACTION_INTERVAL_MS: "200",
      SIEVE_COMPACTOR_LOCK_TTL_MS: "2000",
      SIEVE_COMPACTOR_LOCK_RETRY_MS: "100",
    };
    const a = await spawnSieve(["compactor", "--data-dir", data], {
      ...env,
      SIEVE_COMPACTOR_INSTANCE_ID: "a",
    });
    const b = await spawnSieve(["compactor", "--data-dir", data], {
      ...env,
      SIEVE_COMPACTOR_INSTANCE_ID: "b",
    });
    const held = async (url: string): Promise<boolean> => {
      const text = await (await fetch(new URL("/metrics", url))).text();
      return /^sieve_compactor_lock_held 1$/m.test(text);
    };
    const until = async (ok: () => Promise<boolean>): Promise<void> => {
      for (let i = 0; i < 200 && !(await ok()); i++) await new Promise((r) => setTimeout(r, 50));
    };
    try {
      for (const p of [a, b]) expect((await fetch(new URL("/ready", p.url))).status).toBe(200);
      await until(async () => (await store.list("fake/index/")).length === 1);
      expect(await store.list("fake/index/")).toHaveLength(1);
      const holders = [await held(a.url), await held(b.url)];
      expect(holders.filter(Boolean)).toHaveLength(1);
      const [holder, other] = holders[0] ? [a, b] : [b, a];
      const metrics = await (await fetch(new URL("/metrics", holder.url))).text();
      expect(metrics).toMatch(/^sieve_compactor_runs_total\{outcome="success"\} [1-9]/m);
      expect(metrics).toMatch(/^sieve_compactor_segments_compacted_total 3$/m);
      expect(await holder.stop()).toBe(0);
      await until(() => held(other.url));
      expect(await held(other.url)).toBe(true);
    } finally {
      await Promise.all([a.stop(), b.stop()].map((p) => p.catch(() => null)));
    }
  });
});
