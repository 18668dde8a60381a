/**
 * `index/volume`, `index/volume_range` and `index/stats` end to end: a real `sieve all`
 * (write-ahead log, filesystem store) over loopback holding data both flushed (pushed,
 * then `POST /flush`) and only in its heads (pushed after), and a separate `sieve querier`
 * process over the same store that reaches the `all` process's ingester over HTTP (the
 * cluster path: `/ingester/v1/volume` and `/ingester/v1/stats`). Every byte count is the
 * UTF-8 length of the pushed lines, summed here.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster, waitFor, type SieveChild } from "./cluster.test-helper.js";

const S = 1_000_000_000n;
/** A minute boundary 10 minutes ago: flushed data in its minute, heads in the next. */
const T_S = Math.floor(Date.now() / 60_000) * 60 - 600;
const T = BigInt(T_S) * S;

interface Pushed {
  readonly labels: Record<string, string>;
  readonly lines: [bigint, string][];
}

/** `n` lines of a stream from `fromS` seconds after T, 1 s apart, of varied UTF-8. */
function lines(tag: string, fromS: number, n: number): [bigint, string][] {
  return Array.from({ length: n }, (_, i) => [
    T + BigInt(fromS + i) * S,
    `${tag} ${"ü".repeat(i % 5)} request ${i} took ${i * 7} ms ✓`,
  ]);
}

// Flushed: pushed and flushed before anything else; in heads: pushed after the flush.
const FLUSHED: Pushed[] = [
  { labels: { app: "vol-a", pod: "p1" }, lines: lines("a1", 1, 20) },
  { labels: { app: "vol-a", pod: "p2" }, lines: lines("a2", 1, 12) },
  { labels: { app: "vol-b" }, lines: lines("b", 5, 9) },
];
const HEADS: Pushed[] = [
  { labels: { app: "vol-a", pod: "p1" }, lines: lines("a1-late", 61, 15) },
  { labels: { app: "vol-c", pod: "p1" }, lines: lines("c", 70, 6) },
];
const ALL = [...FLUSHED, ...HEADS];

const bytes = (p: readonly Pushed[]): number =>
  p.reduce((n, s) => n + s.lines.reduce((m, [, l]) => m + Buffer.byteLength(l, "utf8"), 0), 0);
const where = (p: readonly Pushed[], f: (l: Record<string, string>) => boolean): Pushed[] =>
  p.filter((s) => f(s.labels));
const entries = (p: readonly Pushed[]): number => p.reduce((n, s) => n + s.lines.length, 0);

async function push(url: string, streams: readonly Pushed[]): Promise<void> {
  const body = {
    streams: streams.map((s) => ({
      stream: s.labels,
      values: s.lines.map(([ts, line]) => [String(ts), line]),
    })),
  };
  const res = await fetch(`${url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 204) throw new Error(`push: ${res.status} ${await res.text()}`);
}

async function get(url: string, path: string, params: Record<string, string>) {
  const res = await fetch(`${url}${path}?${new URLSearchParams(params).toString()}`);
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

interface PromData {
  resultType: string;
  result: {
    metric: Record<string, string>;
    value?: [number, string];
    values?: [number, string][];
  }[];
}

async function volume(
  url: string,
  route: "volume" | "volume_range",
  params: Record<string, string>,
): Promise<PromData> {
  const res = await get(url, `/loki/api/v1/index/${route}`, params);
  if (res.status !== 200) throw new Error(`${route}: ${res.status} ${res.text}`);
  const body = res.json() as { status: string; data: PromData };
  expect(body.status).toBe("success");
  return body.data;
}

const RANGE = { start: String(T_S - 120), end: String(T_S + 180) };
const QUERY = '{app=~"vol-.+"}';

const cluster = new Cluster();
let dir: string | undefined;
let all: SieveChild;
let querier: SieveChild;

beforeAll(async () => {
  const root = await mkdtemp(join(tmpdir(), "sieve-volume-"));
  dir = root;
  const dataDir = join(root, "data");
  all = await cluster.start({ target: "all", args: ["--data-dir", dataDir] });
  await push(all.url, FLUSHED);
  await waitFor("the flushed part to be ingested", async () => {
    const s = (await get(all.url, "/loki/api/v1/index/stats", { query: QUERY, ...RANGE })).json();
    return s.entries === entries(FLUSHED) ? true : undefined;
  });
  const flushed = await fetch(`${all.url}/flush`, { method: "POST" });
  expect(flushed.status).toBe(204);
  await push(all.url, HEADS);
  await waitFor("the heads to be ingested", async () => {
    const s = (await get(all.url, "/loki/api/v1/index/stats", { query: QUERY, ...RANGE })).json();
    return s.entries === entries(ALL) ? true : undefined;
  });
  // A lone querier over the same store, asking the `all` process's ingester over HTTP.
  const config = join(root, "querier.yaml");
  await writeFile(
    config,
    toYaml({ storage: { backend: "filesystem", dir: join(dataDir, "store") } }),
  );
  querier = await cluster.start({
    target: "querier",
    configFile: config,
    env: { SIEVE_INGESTER_URLS: all.url },
  });
}, 120_000);

afterAll(async () => {
  await cluster.stopAll();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

/** Both processes: `sieve all` (its ingester over a worker port) and the lone querier (HTTP). */
const targets = (): [string, string][] => [
  ["sieve all", all.url],
  ["sieve querier", querier.url],
];

describe.each(["all", "querier"] as const)("through sieve %s", (which) => {
  const url = (): string => (which === "all" ? all.url : querier.url);

  test("volume by the query's matcher labels: flushed and head bytes, exact", async () => {
    const data = await volume(url(), "volume", { query: QUERY, ...RANGE });
    expect(data.resultType).toBe("vector");
    const end = T_S + 180;
    const want = ["vol-a", "vol-b", "vol-c"]
      .map((app) => ({
        metric: { app },
        value: [end, String(bytes(where(ALL, (l) => l.app === app)))] as [number, string],
      }))
      .sort((x, y) => Number(y.value[1]) - Number(x.value[1]));
    expect(data.result).toEqual(want);
  });

  test("targetLabels=pod: only series with a pod, by pod", async () => {
    const data = await volume(url(), "volume", { query: QUERY, targetLabels: "pod", ...RANGE });
    expect(data.result).toEqual([
      {
        metric: { pod: "p1" },
        value: [T_S + 180, String(bytes(where(ALL, (l) => l.pod === "p1")))],
      },
      {
        metric: { pod: "p2" },
        value: [T_S + 180, String(bytes(where(ALL, (l) => l.pod === "p2")))],
      },
    ]);
  });

  test("aggregateBy=labels: each label's bytes (service_name is Loki's discovered one)", async () => {
    const data = await volume(url(), "volume", { query: QUERY, aggregateBy: "labels", ...RANGE });
    const total = String(bytes(ALL));
    const pods = String(bytes(where(ALL, (l) => l.pod !== undefined)));
    expect(data.result).toEqual([
      { metric: { app: "" }, value: [T_S + 180, total] },
      { metric: { service_name: "" }, value: [T_S + 180, total] },
      { metric: { pod: "" }, value: [T_S + 180, pods] },
    ]);
  });

  test("volume_range by minute: the flushed minute and the heads' minute", async () => {
    const data = await volume(url(), "volume_range", {
      query: '{app="vol-a", pod="p1"}',
      step: "60",
      ...RANGE,
    });
    expect(data.resultType).toBe("matrix");
    expect(data.result).toEqual([
      {
        metric: { app: "vol-a", pod: "p1" },
        values: [
          [(T_S * 1000 + 59_999) / 1000, String(bytes([FLUSHED[0]!]))],
          [(T_S * 1000 + 119_999) / 1000, String(bytes([HEADS[0]!]))],
        ],
      },
    ]);
  });

  test("limit=1: the largest only", async () => {
    const data = await volume(url(), "volume", { query: QUERY, limit: "1", ...RANGE });
    expect(data.result.map((r) => r.metric)).toEqual([{ app: "vol-a" }]);
  });

  test("index/stats: streams once, chunks, line bytes and entries of both sides", async () => {
    const stats = (await get(url(), "/loki/api/v1/index/stats", { query: QUERY, ...RANGE })).json();
    // One flushed chunk per stream pushed before the flush; one head per stream after.
    expect(stats).toEqual({
      streams: 4,
      chunks: FLUSHED.length + HEADS.length,
      bytes: bytes(ALL),
      entries: entries(ALL),
    });
  });

  test("Loki's refusals: a bad aggregation, a bad selector", async () => {
    const agg = await get(url(), "/loki/api/v1/index/volume", { query: QUERY, aggregateBy: "x" });
    expect([agg.status, agg.text]).toEqual([400, "invalid aggregation option\n"]);
    const sel = await get(url(), "/loki/api/v1/index/volume_range", { query: "{app=" });
    expect(sel.status).toBe(400);
    expect(sel.text).toContain("parse error");
  });
});

test("both processes answer alike, POST included", async () => {
  const answers = await Promise.all(
    targets().map(async ([, url]) => {
      const res = await fetch(`${url}/loki/api/v1/index/volume`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ query: "{}", ...RANGE }).toString(),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { data: PromData }).data.result;
    }),
  );
  expect(answers[0]).toEqual(answers[1]);
  // `{}`: every series, by all its labels (service_name included).
  expect(answers[0]!.length).toBe(4);
});
