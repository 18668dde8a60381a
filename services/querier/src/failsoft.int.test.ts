/**
 * The read side fails soft: a stored series whose labels do not parse (a lone surrogate,
 * written before the distributor refused such labels) or a damaged segment is left out,
 * logged once and counted, and every endpoint answers for the rest; a bloom gateway that
 * throws keeps every ref, logged and counted by reason. Real segments and chunks in a real
 * FsObjectStore, the real server over loopback.
 */
import { SegmentListings } from "./listings.js";
import { NO_RETENTION, Retention } from "@sieve/logql";
import { NO_DELETES } from "./deletes.js";
import { Writable } from "node:stream";
import { encodeChunk, chunkKey, type Entry } from "@sieve/chunk";
import { dayOf, encodeSegment, segmentKey, type SegmentSeries } from "@sieve/index";
import { fingerprint } from "@sieve/labels";
import { extractBloomTests, parseExpr, parseSyntax } from "@sieve/logql";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ObjectCache } from "./cache.js";
import { DEFAULT_CONFIG, DEFAULT_QUERY_LIMITS } from "./config.js";
import { QueryContext, type QuerierParts } from "./context.js";
import { KEEP_ALL_FILTER, NO_INGESTERS } from "./deps.js";
import type { ChunkFilter, IngesterQuerier } from "@sieve/proto";
import { createQuerierServer } from "./http.js";
import { createQuerier } from "./index.js";
import { FIRST_END_BYTES, TailSizes } from "./fetch.js";
import { ParsedLabels, ReadReport } from "./labels.js";
import { parseSelector } from "./parse.js";
import { readSeries } from "./index-read.js";
import { plan } from "./plan.js";
import { readIndexStats, selectSeries } from "./series.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";
import type { FsObjectStore } from "@sieve/storage";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const TENANT = "fake";
/** The canonical string a lone surrogate gave before the door refused it (Go's quoting). */
const POISONED = '{app="bad", k="\\ud800"}';
const GOOD = '{app="good", env="prod"}';

function entries(tag: string, n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    timestamp: T0 + BigInt(i) * S,
    line: `${tag} line ${i}`,
    structuredMetadata: [{ name: "trace_id", value: `t${i}` }],
  }));
}

/** One segment holding each of `series` (canonical label string → entries), one chunk each. */
async function writeSegment(
  store: FsObjectStore,
  id: string,
  series: [canonical: string, entries: Entry[]][],
): Promise<string> {
  const listed: SegmentSeries[] = [];
  for (const [canonical, es] of series) {
    const fp = fingerprint(canonical);
    const encoded = encodeChunk(es, { blockTargetBytes: 512 });
    const ref = { from: encoded.from, through: encoded.through, checksum: encoded.checksum };
    await store.put(chunkKey({ tenant: TENANT, fingerprint: fp, ...ref }), encoded.bytes);
    listed.push({
      fingerprint: fp,
      labels: canonical,
      bloom: { kind: "missing", reason: "disabled" },
      chunks: [
        { ...ref, bytes: encoded.bytes.byteLength, entries: encoded.entryCount, prefixed: false },
      ],
    });
  }
  const key = segmentKey(TENANT, dayOf(T0), id);
  await store.put(key, encodeSegment({ tenant: TENANT, day: dayOf(T0), series: listed }));
  return key;
}

/** An ingester whose recent data holds the poisoned series too (before its flush). */
const poisonedIngester: IngesterQuerier = {
  query: () => Promise.resolve([]),
  patterns: () => Promise.resolve([]),
  querySample: () => Promise.resolve([]),
  series: (req) =>
    Promise.resolve(
      req.selector === undefined || req.selector.includes("bad") || req.selector.includes("~")
        ? [{ labels: POISONED, fingerprint: fingerprint(POISONED) }]
        : [],
    ),
  volume: () => Promise.resolve([]),
  stats: () => Promise.resolve({ streams: 0, chunks: 0, bytes: 0, entries: 0 }),
};

let store: FsObjectStore;
let closeStore: () => Promise<void>;
let server: FastifyInstance;
let url: string;
let damagedKey: string;

beforeAll(async () => {
  const t = await tempStore();
  store = t.store;
  closeStore = t.close;
  // The poisoned series shares its segment with a good one: the segment must still serve it.
  await writeSegment(store, "000000000000100-mixed-00000000", [
    [GOOD, entries("good", 30)],
    [POISONED, entries("bad", 30)],
  ]);
  await writeFlush(
    store,
    TENANT,
    [{ labels: { app: "other" }, entries: entries("other", 20) }],
    10,
  );
  // A damaged segment (one flipped byte: the checksum fails) is left out too.
  damagedKey = await writeSegment(store, "000000000000101-damaged-00000000", [
    ['{app="gone"}', entries("gone", 5)],
  ]);
  const bytes = await store.get(damagedKey);
  bytes[20] = bytes[20]! ^ 0xff;
  await store.put(damagedKey, bytes);

  const registry = new Registry();
  const querier = createQuerier({
    config: DEFAULT_CONFIG,
    store,
    ingesters: poisonedIngester,
    registry,
  });
  server = await createQuerierServer({
    querier,
    authEnabled: false,
    registry,
    now: () => T0 + 3600n * S,
  });
  url = await server.listen({ port: 0, host: "127.0.0.1" });
});

afterAll(async () => {
  await server.close();
  await closeStore();
});

async function get(path: string, params: Record<string, string>) {
  const res = await fetch(`${url}${path}?${new URLSearchParams(params).toString()}`);
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as { data: unknown } };
}

const range = { start: String(T0 - 60n * S), end: String(T0 + 120n * S) };

describe("one unreadable series or segment never fails an answer", () => {
  test("labels and label values answer for the other series", async () => {
    const labels = await get("/loki/api/v1/labels", range);
    expect(labels.status, labels.text).toBe(200);
    expect(labels.json().data).toEqual(["app", "env"]);
    const values = await get("/loki/api/v1/label/app/values", range);
    expect(values.status, values.text).toBe(200);
    expect(values.json().data).toEqual(["good", "other"]);
  });

  test("series and index stats answer for the other series, unrelated selectors too", async () => {
    const series = await get("/loki/api/v1/series", { ...range, "match[]": '{app=~".+"}' });
    expect(series.status, series.text).toBe(200);
    expect(series.json().data).toEqual([{ app: "good", env: "prod" }, { app: "other" }]);
    const stats = await get("/loki/api/v1/index/stats", { ...range, query: '{app="good"}' });
    expect(stats.status, stats.text).toBe(200);
    expect(stats.json()).toMatchObject({ streams: 1, chunks: 1, entries: 30 });
  });

  test("query_range answers the lines of the readable series", async () => {
    for (const query of ['{app="good"}', '{app=~".+"}', 'count_over_time({app=~".+"}[5m])']) {
      const res = await get("/loki/api/v1/query_range", {
        ...range,
        query,
        limit: "1000",
        step: "60s",
      });
      expect(res.status, `${query}: ${res.text}`).toBe(200);
      const result = (
        res.json().data as {
          result: { stream?: Record<string, string>; metric?: Record<string, string> }[];
        }
      ).result;
      const apps = [...new Set(result.map((r) => (r.stream ?? r.metric)?.app))].sort();
      expect(apps, query).toEqual(query === '{app="good"}' ? ["good"] : ["good", "other"]);
    }
  });
});

/** Parts over the store with a report whose log lines and metrics the test reads. */
function partsWith(chunkFilter: ChunkFilter) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const registry = new Registry();
  const report = new ReadReport({ logger: pino({ level: "warn" }, sink), registry });
  const parts: QuerierParts = {
    config: DEFAULT_CONFIG,
    store,
    ingesters: NO_INGESTERS,
    chunkFilter,
    metrics: undefined,
    segments: new ObjectCache(1 << 20, (v) => v.bytes),
    listings: new SegmentListings(undefined),
    chunks: new ObjectCache(1 << 20, (v) => v.retainedBytes),
    tails: new TailSizes(),
    chunkEnds: new ObjectCache(1 << 20, (v) => v.retainedBytes),
    endSizes: new TailSizes(FIRST_END_BYTES),
    labels: new ParsedLabels(report),
    retention: new Retention(NO_RETENTION),
    deletes: NO_DELETES,
  };
  return { parts, report, lines, registry };
}

describe("what is left out is logged once and counted", () => {
  test("the unreadable series and the damaged segment, each logged once with its key", async () => {
    const { parts, report, lines, registry } = partsWith(KEEP_ALL_FILTER);
    for (let i = 0; i < 3; i++) {
      const ctx = new QueryContext(DEFAULT_QUERY_LIMITS);
      const all = await readSeries(parts, TENANT, T0 - 60n * S, T0 + 120n * S, ctx);
      expect(all.map((s) => s.labels).sort()).toEqual([GOOD, '{app="other"}']);
      const sets = await selectSeries(parts, TENANT, [], [], T0, T0 + 120n * S, ctx);
      expect(sets).toHaveLength(2);
      const stats = await readIndexStats(
        parts,
        TENANT,
        '{app="good"}',
        parseSelector('{app="good"}'),
        T0,
        T0 + 120n * S,
        ctx,
      );
      expect(stats.streams).toBe(1);
    }
    const series = lines.filter((l) => l.labels === POISONED);
    expect(series).toHaveLength(1);
    expect(series[0]!.where).toContain("segment fake/index/");
    expect(lines.filter((l) => l.key === damagedKey)).toHaveLength(1);
    const counts = report.counts();
    expect(counts.unreadableSegments).toBe(1); // cached as empty: read once
    expect(counts.unreadableSeries).toBeGreaterThanOrEqual(1);
    const text = await registry.metrics();
    expect(text).toMatch(/sieve_querier_unreadable_series_total [1-9]/);
    expect(text).toMatch(/sieve_querier_unreadable_segments_total 1/);
  });

  test("a bloom gateway that throws keeps every ref, logged with the error and counted", async () => {
    const failing: ChunkFilter = {
      filterChunkRefs: () => Promise.reject(new TypeError("gateway bug")),
    };
    const { parts, lines, registry } = partsWith(failing);
    const expr = parseExpr('{app="good"} | trace_id="t3"');
    const selector = parseSyntax('{app="good"}');
    if (selector.kind !== "log" || expr.kind !== "log") throw new Error("not a log query");
    const ctx = new QueryContext(DEFAULT_QUERY_LIMITS);
    const planned = await plan(
      parts,
      TENANT,
      [selector.matchers],
      T0,
      T0 + 120n * S,
      extractBloomTests(expr),
      ctx,
    );
    expect(planned).toHaveLength(1); // kept: "may match"
    expect(ctx.stats.bloom?.failedOpen).toEqual({ gateway_error: 1 });
    const logged = lines.find((l) => l.reason === "gateway_error");
    expect(logged?.err).toMatchObject({ message: "gateway bug" });
    expect(await registry.metrics()).toContain(
      'sieve_querier_bloom_failed_open_chunks_total{reason="gateway_error"} 1',
    );
  });
});
