/**
 * `index/volume` and `index/volume_range`: Loki's parameter parsing (table, Loki's words),
 * and the routes run in process (`handleQuery`) over real chunks and index segments in a
 * FsObjectStore and real head chunks in an ingester, with byte sums computed here.
 */
import type { Entry } from "@sieve/chunk";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG, DEFAULT_QUERY_LIMITS, type QueryLimits } from "./config.js";
import { handleQuery, type QueryAnswer } from "./handler.js";
import { ParamError } from "./params.js";
import { Querier } from "./querier.js";
import { HeadIngester, tempStore, writeFlush, type TestStream } from "./testdata.test-helper.js";
import { parseVolumeInstantQuery, parseVolumeRangeQuery, type VolumeQuery } from "./volume.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S; // 2023-11-14T22:13:20Z
const NOW = T0 + 3600n * S;
const T0s = Number(T0 / S);
/** A sample's time `ms` after T0, as the answer writes it (seconds, to the millisecond). */
const at = (ms: number): number => (T0s * 1000 + ms) / 1000;

describe("volume parameters, as Loki's ParseVolumeInstantQuery / ParseVolumeRangeQuery", () => {
  const form = (o: Record<string, string>) => new URLSearchParams(o);
  const base = { query: '{app="api"}', start: String(T0s), end: String(T0s + 600) };

  test.each<[string, Record<string, string>, Partial<VolumeQuery>]>([
    ["defaults", base, { limit: 100, aggregateBy: "series", targetLabels: [], step: 0n }],
    ["limit 0 reads as 100", { ...base, limit: "0" }, { limit: 100 }],
    ["a limit", { ...base, limit: "7" }, { limit: 7 }],
    ["aggregateBy labels", { ...base, aggregateBy: "labels" }, { aggregateBy: "labels" }],
    ["targetLabels", { ...base, targetLabels: "app,pod" }, { targetLabels: ["app", "pod"] }],
    ["the range", base, { start: T0, end: T0 + 600n * S, query: '{app="api"}' }],
    ["since, without start", { query: "{}", since: "5m" }, { start: NOW - 300n * S, end: NOW }],
  ])("instant: %s", (_, params, want) => {
    expect(parseVolumeInstantQuery(form(params), NOW)).toMatchObject(want);
  });

  test.each<[string, Record<string, string>, Partial<VolumeQuery>]>([
    ["default step: range / 250, at least 1 s", base, { step: 2n * S }],
    ["a step", { ...base, step: "60" }, { step: 60n * S }],
    ["a duration step", { ...base, step: "1m" }, { step: 60n * S }],
  ])("range: %s", (_, params, want) => {
    expect(parseVolumeRangeQuery(form(params), NOW)).toMatchObject(want);
  });

  test.each<[string, "instant" | "range", Record<string, string>, string]>([
    [
      "a limit not a number",
      "instant",
      { ...base, limit: "ten" },
      'strconv.Atoi: parsing "ten": invalid syntax',
    ],
    ["a negative limit", "instant", { ...base, limit: "-1" }, "limit must be a positive value"],
    [
      "a negative limit (range)",
      "range",
      { ...base, limit: "-5" },
      "limit must be a positive value",
    ],
    [
      "an unknown aggregation",
      "instant",
      { ...base, aggregateBy: "pods" },
      "invalid aggregation option",
    ],
    [
      "an unknown aggregation (range)",
      "range",
      { ...base, aggregateBy: "x" },
      "invalid aggregation option",
    ],
    ["a bad direction", "instant", { ...base, direction: "up" }, "invalid direction 'up'"],
    [
      "a bad time",
      "instant",
      { ...base, time: "noon" },
      'strconv.ParseInt: parsing "noon": invalid syntax',
    ],
    [
      "a bad start",
      "instant",
      { ...base, start: "x" },
      `could not parse 'start' parameter: strconv.ParseInt: parsing "x": invalid syntax`,
    ],
    [
      "a bad end (range)",
      "range",
      { ...base, end: "y" },
      `could not parse 'end' parameter: strconv.ParseInt: parsing "y": invalid syntax`,
    ],
    [
      "end before start",
      "instant",
      { ...base, end: String(T0s - 1) },
      "end timestamp must not be before or equal to start time",
    ],
    [
      "end before start (range)",
      "range",
      { ...base, end: String(T0s - 1) },
      "end timestamp must not be before or equal to start time",
    ],
    [
      "a zero step",
      "range",
      { ...base, step: "0" },
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    ],
    [
      "too many points",
      "range",
      { ...base, step: "0.01" },
      "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter",
    ],
    ["a bad step", "range", { ...base, step: "often" }, `cannot parse "often" to a valid duration`],
  ])("refuses %s", (_, kind, params, message) => {
    const parse = kind === "instant" ? parseVolumeInstantQuery : parseVolumeRangeQuery;
    expect(() => parse(form(params), NOW)).toThrow(ParamError);
    expect(() => parse(form(params), NOW)).toThrow(message);
  });
});

// ---- the routes in process, over a real store and real heads ---------------------------

/** `n` entries of `labels`, 1 s apart from `from` (s after T0), lines of varied UTF-8. */
function stream(labels: Record<string, string>, from: number, n: number): TestStream {
  const entries: Entry[] = [];
  for (let i = 0; i < n; i++) {
    entries.push({
      timestamp: T0 + BigInt(from + i) * S,
      line: `${labels.app ?? ""} ${"é".repeat(i % 7)} line ${i}`,
      structuredMetadata: [],
    });
  }
  return { labels, entries };
}

const lineBytes = (entries: readonly Entry[]): number =>
  entries.reduce((n, e) => n + Buffer.byteLength(e.line, "utf8"), 0);

// Flushed: three series over [0, 100) s; unflushed: two of them again over [200, 250) s and
// one series only in the ingester.
const flushed = [
  stream({ app: "api", pod: "a" }, 0, 100),
  stream({ app: "api", pod: "b" }, 0, 60),
  stream({ app: "web", pod: "a" }, 0, 30),
];
const heads = [
  stream({ app: "api", pod: "a" }, 200, 50),
  stream({ app: "web", pod: "a" }, 200, 20),
  stream({ app: "db" }, 210, 10),
];
const bytesOf = (labels: Record<string, string>): number =>
  [...flushed, ...heads]
    .filter((s) => JSON.stringify(s.labels) === JSON.stringify(labels))
    .reduce((n, s) => n + lineBytes(s.entries), 0);

let closeStore: () => Promise<void>;
let querier: (limits?: Partial<QueryLimits>) => Querier;

beforeAll(async () => {
  const t = await tempStore();
  closeStore = t.close;
  await writeFlush(t.store, "fake", flushed, 25);
  const ingester = new HeadIngester();
  for (const h of heads) ingester.push("fake", h.labels, h.entries);
  querier = (limits = {}) =>
    new Querier({
      config: { ...DEFAULT_CONFIG, limits: { ...DEFAULT_QUERY_LIMITS, ...limits } },
      store: t.store,
      ingesters: ingester,
    });
});

afterAll(async () => {
  await closeStore();
});

type Json = Record<string, unknown>;
interface Data {
  resultType: string;
  result: {
    metric: Record<string, string>;
    value?: [number, string];
    values?: [number, string][];
  }[];
}

async function run(
  route: "index_volume" | "index_volume_range" | "index_stats",
  params: Record<string, string>,
  limits?: Partial<QueryLimits>,
): Promise<QueryAnswer & { json: () => Json; data: () => Data }> {
  const answer = await handleQuery(querier(limits), {
    route,
    form: new URLSearchParams(params).toString(),
    tenant: "fake",
    flags: [],
    nowNs: NOW,
  });
  const json = () => JSON.parse(answer.body) as Json;
  return { ...answer, json, data: () => json().data as Data };
}

const whole = { start: String(T0s), end: String(T0s + 1000) };

describe("index/volume over the index and the ingesters", () => {
  test("every series, its bytes from both sides, largest first: a vector at end", async () => {
    const a = await run("index_volume", { query: "{}", ...whole });
    expect(a.status).toBe(200);
    const data = a.data();
    expect(data.resultType).toBe("vector");
    const want = (
      [
        { app: "api", pod: "a" },
        { app: "api", pod: "b" },
        { app: "web", pod: "a" },
        { app: "db" },
      ] as Record<string, string>[]
    )
      .map((l) => ({ metric: l, value: [T0s + 1000, String(bytesOf(l))] }))
      .sort((x, y) => Number(y.value[1]) - Number(x.value[1]));
    expect(data.result).toEqual(want);
    expect(a.json().status).toBe("success");
    expect((a.json().data as Json).stats).toBeDefined();
  });

  test("named by the labels the query's matchers name", async () => {
    const data = (await run("index_volume", { query: '{app=~"api|web"}', ...whole })).data();
    const api = bytesOf({ app: "api", pod: "a" }) + bytesOf({ app: "api", pod: "b" });
    const web = bytesOf({ app: "web", pod: "a" });
    expect(data.result).toEqual(
      [
        { metric: { app: "api" }, value: [T0s + 1000, String(api)] },
        { metric: { app: "web" }, value: [T0s + 1000, String(web)] },
      ].sort((x, y) => Number(y.value[1]) - Number(x.value[1])),
    );
  });

  test("targetLabels: series lacking one are left out; aggregateBy=labels: per label", async () => {
    const byPod = (
      await run("index_volume", { query: "{}", targetLabels: "pod", ...whole })
    ).data();
    const podA = bytesOf({ app: "api", pod: "a" }) + bytesOf({ app: "web", pod: "a" });
    const podB = bytesOf({ app: "api", pod: "b" });
    expect(byPod.result).toEqual([
      { metric: { pod: "a" }, value: [T0s + 1000, String(podA)] },
      { metric: { pod: "b" }, value: [T0s + 1000, String(podB)] },
    ]);
    const labels = (
      await run("index_volume", { query: '{app=~".+"}', aggregateBy: "labels", ...whole })
    ).data();
    const all = [...flushed, ...heads].reduce((n, s) => n + lineBytes(s.entries), 0);
    expect(labels.result).toEqual([
      { metric: { app: "" }, value: [T0s + 1000, String(all)] },
      { metric: { pod: "" }, value: [T0s + 1000, String(all - bytesOf({ app: "db" }))] },
    ]);
  });

  test("limit keeps the largest", async () => {
    const data = (await run("index_volume", { query: "{}", limit: "1", ...whole })).data();
    expect(data.result).toEqual([
      {
        metric: { app: "api", pod: "a" },
        value: [T0s + 1000, String(bytesOf({ app: "api", pod: "a" }))],
      },
    ]);
  });

  test("volume_range: a matrix, each step's bytes; the steps add up to the whole", async () => {
    const a = await run("index_volume_range", {
      query: '{app="api", pod="a"}',
      start: String(T0s),
      end: String(T0s + 300),
      step: "100",
    });
    expect(a.status).toBe(200);
    const data = a.data();
    expect(data.resultType).toBe("matrix");
    const [series] = data.result;
    expect(series!.metric).toEqual({ app: "api", pod: "a" });
    // Chunks of 25 entries over [0,100) s lie in the first step; the head (200-249 s) in the third.
    const [f] = flushed;
    expect(series!.values).toEqual([
      [at(99_999), String(lineBytes(f!.entries))],
      [T0s + 300, String(lineBytes(heads[0]!.entries))],
    ]);
  });

  test("a chunk across steps is shared between them by time", async () => {
    const data = (
      await run("index_volume_range", {
        query: '{app="web"}',
        start: String(T0s),
        end: String(T0s + 40),
        step: "10",
      })
    ).data();
    // One flushed chunk of 25 entries at 0..24 s: 10/24, 10/24 and 4/24 of its bytes.
    const chunk = lineBytes(flushed[2]!.entries.slice(0, 25));
    expect(data.result[0]!.values).toEqual([
      [at(9_999), String(Math.floor((chunk * 10) / 24))],
      [at(19_999), String(Math.floor((chunk * 10) / 24))],
      [at(29_999), String(Math.floor((chunk * 4) / 24) + lineBytes(flushed[2]!.entries.slice(25)))],
    ]);
  });

  test("off for the tenant: 404 not found, as Loki's volume_enabled", async () => {
    const a = await run("index_volume", { query: "{}", ...whole }, { volumeEnabled: false });
    expect([a.status, a.body]).toEqual([404, "not found\n"]);
    const r = await run("index_volume_range", { query: "{}", ...whole }, { volumeEnabled: false });
    expect(r.status).toBe(404);
  });

  test("past volumeMaxSeries: 400 in Loki's words", async () => {
    const a = await run("index_volume", { query: "{}", ...whole }, { volumeMaxSeries: 3 });
    expect([a.status, a.body]).toEqual([
      400,
      "the query hit the max number of series limit (limit: 3 series)\n",
    ]);
  });

  test("past the query's memory budget (a value of a name in a step: 64 bytes): 400", async () => {
    const a = await run("index_volume", { query: "{}", ...whole }, { maxQueryMemoryBytes: 128 });
    expect(a.status).toBe(400);
    expect(a.body).toContain("the query would hold more than 128 bytes in memory");
  });

  test("a bad selector, a bad parameter: 400", async () => {
    const bad = await run("index_volume", { query: '{app="api"', ...whole });
    expect(bad.status).toBe(400);
    expect(bad.body).toContain("parse error");
    const pipeline = await run("index_volume", { query: '{app="api"} |= "x"', ...whole });
    expect(pipeline.status).toBe(400);
    const agg = await run("index_volume", { query: "{}", aggregateBy: "x", ...whole });
    expect([agg.status, agg.body]).toEqual([400, "invalid aggregation option\n"]);
  });
});

describe("index/stats counts the ingesters' unflushed chunks", () => {
  test("streams once, chunks, line bytes and entries of both sides", async () => {
    const a = await run("index_stats", { query: '{app=~".+"}', ...whole });
    expect(a.status).toBe(200);
    const all = [...flushed, ...heads];
    expect(a.json()).toEqual({
      streams: 4,
      // 4 + 3 + 2 flushed chunks of 25 entries, one head each.
      chunks: 4 + 3 + 2 + 3,
      bytes: all.reduce((n, s) => n + lineBytes(s.entries), 0),
      entries: all.reduce((n, s) => n + s.entries.length, 0),
    });
  });
});
