/**
 * The warm-up's rehearsal (warm.ts): it runs real queries through the handler on what it
 * loaded (the present needle finds its lines), on a querier that never asks the ingesters,
 * and nothing when told no rounds.
 */
import type { Entry } from "@sieve/chunk";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import type { IngesterQuerier } from "@sieve/proto";
import { NO_INGESTERS } from "./deps.js";
import { handleQuery, type QueryAnswer } from "./handler.js";
import { Querier } from "./querier.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";
import type { FsObjectStore } from "@sieve/storage";

const NOW_MS = Date.UTC(2026, 10, 27, 12);
const NOW = BigInt(NOW_MS) * 1_000_000n;
const S = 1_000_000_000n;

/** 30 lines a minute apart ending an hour ago, each trace id shared by 6 of them. */
function lines(app: string): Entry[] {
  return Array.from({ length: 30 }, (_, i) => ({
    timestamp: NOW - 3600n * S - BigInt(29 - i) * 60n * S,
    line: `${app} line ${i}`,
    structuredMetadata: [{ name: "trace_id", value: `${app}-trace-${i % 5}` }],
  }));
}

/** A `query_range` of tenant `t` over [start, NOW), answered by `querier`. */
function rangeQuery(querier: Querier, query: string, start: bigint): Promise<QueryAnswer> {
  const form = new URLSearchParams({ query, start: String(start), end: String(NOW) });
  return handleQuery(querier, {
    route: "query_range",
    form: form.toString(),
    tenant: "t",
    flags: [],
    nowNs: NOW,
  });
}

/** Ingesters that count the calls made to them. */
function countingIngesters(): { ingesters: IngesterQuerier; calls: () => number } {
  let calls = 0;
  const counted = Object.fromEntries(
    Object.entries(NO_INGESTERS).map(([name, method]) => [
      name,
      (...args: unknown[]) => {
        calls++;
        return (method as (...a: unknown[]) => unknown)(...args);
      },
    ]),
  ) as unknown as IngesterQuerier;
  return { ingesters: counted, calls: () => calls };
}

describe("the warm-up's rehearsal", () => {
  let store: FsObjectStore;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close } = await tempStore());
    await writeFlush(
      store,
      "t",
      ["api", "web"].map((app) => ({ labels: { app, env: "prod" }, entries: lines(app) })),
      30,
    );
  });
  afterAll(() => close());

  test("runs needles that find their lines, without asking the ingesters", async () => {
    const { ingesters, calls } = countingIngesters();
    const querier = new Querier({ config: DEFAULT_CONFIG, store, ingesters });
    const offline = querier.withoutIngesters();
    const report = await querier.warm(
      ["t"],
      { days: 1, bloomBytes: 0, rehearsals: 4, nowMs: NOW_MS },
      (task) => handleQuery(offline, task),
    );
    expect(report).toMatchObject({ tenants: 1, segments: 1, series: 2 });
    // Four queries a round; the present needle finds the 6 lines of its trace each time.
    expect(report.rehearsed).toMatchObject({ queries: 16, lines: 4 * 6 });
    expect(calls()).toBe(0);
    // Its four distinct queries, for the HTTP layer to ask again: the series, then a
    // present and an absent needle under its first label, over the series' chunk; then the
    // absent needle over every loaded chunk's time.
    const forms = report.rehearsed.tasks.map((t) => new URLSearchParams(t.form));
    const queries = forms.map((f) => f.get("query"));
    expect(queries).toHaveLength(4);
    expect(queries[0]).toMatch(/^\{app="(api|web)", env="prod"\}$/);
    expect(queries[1]).toMatch(/^\{app="(api|web)"\} \| \w+="[^"]+"$/);
    expect(queries[2]).toMatch(/-absent"$/);
    expect(queries[3]).toBe(queries[2]);
    const times = ["api", "web"].flatMap(lines).map((e) => e.timestamp);
    const first = times.reduce((a, b) => (a < b ? a : b));
    const last = times.reduce((a, b) => (a > b ? a : b));
    expect([forms[3]!.get("start"), forms[3]!.get("end")]).toEqual([
      String(first),
      String(last + 1n),
    ]);
    expect(report.rehearsed.tasks.every((t) => t.tenant === "t" && t.route === "query_range")).toBe(
      true,
    );
    // The same querier asks its ingesters when a query runs on it, not on the view.
    const answer = await rangeQuery(querier, '{app="api"}', NOW - 7200n * S);
    expect(answer.status).toBe(200);
    expect(calls()).toBeGreaterThan(0);
  });

  test("runs nothing with no rounds, or without a runner", async () => {
    const querier = new Querier({ config: DEFAULT_CONFIG, store });
    const offline = querier.withoutIngesters();
    const options = { days: 1, bloomBytes: 0, nowMs: NOW_MS };
    const none = await querier.warm(["t"], { ...options, rehearsals: 0 }, (task) =>
      handleQuery(offline, task),
    );
    expect(none.rehearsed).toEqual({ queries: 0, lines: 0, ms: 0, tasks: [] });
    expect((await querier.warm(["t"], { ...options, rehearsals: 3 })).rehearsed.queries).toBe(0);
  });
});

describe("the rehearsal's chunk", () => {
  let store: FsObjectStore;
  let close: () => Promise<void>;
  // One series: a chunk of 30 lines, then the newest, a flush's remainder of 2.
  const entries = [...lines("api"), ...lines("api").slice(0, 2)].map((e, i) => ({
    ...e,
    timestamp: NOW - 3600n * S - BigInt(31 - i) * 60n * S,
  }));
  beforeAll(async () => {
    ({ store, close } = await tempStore());
    await writeFlush(store, "t", [{ labels: { app: "api", env: "prod" }, entries }], 30);
  });
  afterAll(() => close());

  test("is the series' largest, and its present needle reads it out of the cache each round", async () => {
    const querier = new Querier({ config: DEFAULT_CONFIG, store });
    const offline = querier.withoutIngesters();
    const rounds = 5;
    const misses = querier.chunks.misses;
    const report = await querier.warm(
      ["t"],
      { days: 1, bloomBytes: 0, rehearsals: rounds, nowMs: NOW_MS },
      (task) => handleQuery(offline, task),
    );
    const form = new URLSearchParams(report.rehearsed.tasks[0]!.form);
    expect([form.get("start"), form.get("end")]).toEqual([
      String(entries[0]!.timestamp),
      String(entries[29]!.timestamp + 1n),
    ]);
    // The present needle finds its 6 lines of the 30 each round.
    expect(report.rehearsed).toMatchObject({ queries: 4 * rounds, lines: 6 * rounds });
    // Read once to pick the needle, then once by each round's present needle.
    expect(querier.chunks.misses - misses).toBe(1 + rounds);
  });
});

describe("the warm-up's chunk ends", () => {
  let store: FsObjectStore;
  let close: () => Promise<void>;
  /** 24 streams of 30 lines, each in one chunk; stream i ends 20·i minutes before the first. */
  const STREAMS = 24;
  const app = (i: number): string => `s${String(i).padStart(2, "0")}`;
  beforeAll(async () => {
    ({ store, close } = await tempStore());
    const streams = Array.from({ length: STREAMS }, (_, i) => ({
      labels: { app: app(i), env: "prod" },
      entries: lines(app(i)).map((e) => ({ ...e, timestamp: e.timestamp - BigInt(i) * 1200n * S })),
    }));
    await writeFlush(store, "t", streams, 30);
  });
  afterAll(() => close());

  /**
   * The store bytes an absent needle on stream `i` reads (its chunk kept: no gateway here).
   * A name and a value no chunk holds: the symbol filter says "maybe" to both at 2^-10.
   */
  async function absentReads(querier: Querier, i: number): Promise<number> {
    const needle = `{app="${app(i)}"} | no_such_key="absent"`;
    const answer = await rangeQuery(querier, needle, NOW - 48n * 3600n * S);
    expect(answer.status).toBe(200);
    const { sieve } = (
      JSON.parse(answer.body) as {
        data: { stats: { sieve: { bytesFetched: number; chunksRefusedByFilter: number } } };
      }
    ).data.stats;
    expect(sieve, app(i)).toMatchObject({ chunksRefusedByFilter: 1 });
    return sieve.bytesFetched;
  }

  const warm = (querier: Querier) => querier.warm(["t"], { days: 2, bloomBytes: 0, nowMs: NOW_MS });

  test("are loaded, so that a needle refuses a chunk by its filter without a read", async () => {
    const querier = new Querier({ config: DEFAULT_CONFIG, store });
    expect((await warm(querier)).chunkEnds).toBe(STREAMS);
    for (const i of [0, STREAMS - 1]) expect(await absentReads(querier, i)).toBe(0);
    // Without the warm-up, the same needle reads the chunk's end.
    const cold = new Querier({ config: DEFAULT_CONFIG, store });
    expect(await absentReads(cold, 0)).toBeGreaterThan(0);
  });

  test("newest first, a batch of 8 at a time, until they hold three quarters of their cache", async () => {
    const all = new Querier({ config: DEFAULT_CONFIG, store });
    await warm(all);
    const end = Math.ceil(all.chunkEnds.bytes / STREAMS); // each end weighs about this
    // An end cache (an eighth of the chunk cache) of ~11 ends: the first batch fills three
    // quarters of it.
    const config = { ...DEFAULT_CONFIG, chunkCacheBytes: 85 * end };
    const querier = new Querier({ config, store });
    expect((await warm(querier)).chunkEnds).toBe(8);
    for (let i = 0; i < 8; i++) expect(await absentReads(querier, i)).toBe(0);
    expect(await absentReads(querier, 8)).toBeGreaterThan(0);
  });
});
