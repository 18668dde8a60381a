// Line n-gram blooms end to end, as a user runs them: `sieve all` with `ngramLength: 4` for
// tenant "grams" and none for tenant "plain", the same lines pushed to both. A substring
// of one line (`|= "order 7-512 "`) is found in both tenants; in "grams" the line filter
// prunes nearly every other chunk, in "plain" nothing is pruned. An absent substring
// prunes nearly everything in "grams". The stats say who pruned.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJson, spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const STREAMS = 40;
const LINES = 1000;
const BASE_MS = Date.now() - 30 * 60_000;
const TENANTS = ["grams", "plain"] as const;

const lineOf = (s: number, i: number) =>
  `level=info msg="order ${s}-${i} shipped" path=/api/v1/items/${(i * 31) % 97} took=${i % 250}ms`;

let dir: string;
let sieve: SieveProcess | undefined;
const window = {
  start: String(BigInt(BASE_MS - 60_000) * 1_000_000n),
  end: String(BigInt(BASE_MS + 3_600_000) * 1_000_000n),
};

interface Answer {
  lines: string[];
  chunksInRange: number;
  prunedByBlooms: number;
  prunedByLine: number;
}

async function query(tenant: string, q: string): Promise<Answer> {
  const body = (await getJson(
    sieve!.url,
    "/loki/api/v1/query_range",
    { query: q, limit: "100", ...window },
    { "X-Scope-OrgID": tenant },
  )) as {
    data: {
      result: { values: [string, string][] }[];
      stats: {
        sieve: {
          chunksInRange: number;
          chunksPrunedByBlooms: number;
          chunksPrunedByLineFilters: number;
        };
      };
    };
  };
  const { sieve: s } = body.data.stats;
  return {
    lines: body.data.result.flatMap((r) => r.values.map((v) => v[1])).sort(),
    chunksInRange: s.chunksInRange,
    prunedByBlooms: s.chunksPrunedByBlooms,
    prunedByLine: s.chunksPrunedByLineFilters,
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-ngrams-"));
  const config = join(dir, "sieve.yaml");
  await writeFile(
    config,
    [
      "authEnabled: true",
      "ingester:",
      // Small chunks: each stream spans several, so there is something to prune.
      "  chunkTargetBytes: 4096",
      "  chunkBlockBytes: 8192",
      "  overrides:",
      "    grams:",
      "      ngramLength: 4",
      "",
    ].join("\n"),
  );
  sieve = await spawnSieve(["all", "--data-dir", join(dir, "data"), "--config-file", config]);
  // In pushes of 100 lines a stream: a head is cut once a push takes it past the target.
  for (const tenant of TENANTS) {
    for (let from = 0; from < LINES; from += 100) {
      const streams = Array.from({ length: STREAMS }, (_, s) => ({
        stream: { app: "shop", pod: `pod-${s}` },
        values: Array.from({ length: 100 }, (_, k) => [
          String(BigInt(BASE_MS + from + k) * 1_000_000n),
          lineOf(s, from + k),
        ]),
      }));
      const response = await fetch(new URL("/loki/api/v1/push", sieve.url), {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Scope-OrgID": tenant },
        body: JSON.stringify({ streams }),
      });
      if (response.status !== 204)
        throw new Error(`push: ${response.status} ${await response.text()}`);
    }
  }
  await waitFor(
    async () => {
      await fetch(new URL("/flush", sieve!.url), { method: "POST" });
      for (const tenant of TENANTS) {
        const stats = (await getJson(
          sieve!.url,
          "/loki/api/v1/index/stats",
          { query: '{app="shop"}', ...window },
          { "X-Scope-OrgID": tenant },
        )) as { entries: number };
        if (stats.entries !== STREAMS * LINES) return undefined;
      }
      return true;
    },
    "every line to be flushed",
    60_000,
  );
  // index/stats counts the heads too: every line is in, so one more flush stores them all.
  expect((await fetch(new URL("/flush", sieve.url), { method: "POST" })).status).toBe(204);
}, 120_000);

afterAll(async () => {
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("line n-gram blooms through sieve all", { timeout: 60_000 }, () => {
  it("a substring of one line: found in both tenants, the other chunks pruned by the line filter only where n-grams are on", async () => {
    for (const [s, i] of [
      [7, 512],
      [0, 0],
      [39, 999],
      [23, 400],
    ] as const) {
      const q = `{app="shop"} |= "order ${s}-${i} "`;
      const grams = await query("grams", q);
      const plain = await query("plain", q);
      expect(grams.lines, q).toEqual([lineOf(s, i)]);
      expect(plain.lines, q).toEqual(grams.lines);
      expect(grams.chunksInRange).toBeGreaterThanOrEqual(STREAMS * 3);
      // fp 1% per n-gram and three or more n-grams a test: a stray chunk or two at most.
      expect(grams.prunedByLine, q).toBeGreaterThanOrEqual(grams.chunksInRange - 3);
      expect(grams.prunedByBlooms).toBe(grams.prunedByLine);
      expect(plain).toMatchObject({ prunedByBlooms: 0, prunedByLine: 0 });
    }
  });

  it("an absent substring prunes nearly every chunk where n-grams are on, nothing elsewhere", async () => {
    const q = `{app="shop"} |= "order 99-99 "`;
    const grams = await query("grams", q);
    const plain = await query("plain", q);
    expect(grams.lines).toEqual([]);
    expect(plain.lines).toEqual([]);
    expect(grams.prunedByLine / grams.chunksInRange).toBeGreaterThanOrEqual(0.95);
    expect(plain.prunedByBlooms).toBe(0);
  });

  it("literals it cannot test are not pruned, and `or` chains and regexes are", async () => {
    // Shorter than 4 code points; a negative filter; a case-insensitive regex.
    for (const q of [
      '{app="shop"} |= "7-5"',
      '{app="shop"} != "order 7-512 "',
      '{app="shop"} |~ "(?i)ORDER 7-512 "',
    ]) {
      const grams = await query("grams", q);
      expect(grams.prunedByBlooms, q).toBe(0);
      expect(grams.lines.length, q).toBeGreaterThan(0);
    }
    for (const q of [
      '{app="shop"} |= "order 7-512 " or "order 8-3 "',
      '{app="shop"} |~ "order (7-512|8-3) "',
    ]) {
      const grams = await query("grams", q);
      expect(grams.lines, q).toEqual([lineOf(7, 512), lineOf(8, 3)].sort());
      expect(grams.prunedByLine, q).toBeGreaterThanOrEqual(grams.chunksInRange - 5);
    }
  });
});
