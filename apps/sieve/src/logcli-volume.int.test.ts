/**
 * Loki's own client against Sieve: `logcli volume` and `logcli volume_range` (the binary
 * `sh scripts/loki.sh logcli` builds once and caches, Loki 3.7's) against a real `sieve all`
 * over loopback holding lines both flushed and in its heads. logcli prints the answer's
 * result as JSON; it must hold exactly the UTF-8 bytes of the lines pushed here.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Cluster, waitFor, type SieveChild } from "./cluster.test-helper.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** logcli's path: built by scripts/loki.sh on first use and cached under .cache/loki. */
function logcliPath(): string {
  try {
    return execFileSync("sh", [join(ROOT, "scripts/loki.sh"), "logcli"], {
      encoding: "utf8",
      timeout: 30 * 60_000,
    }).trim();
  } catch (error) {
    throw new Error(
      `logcli is not available (sh scripts/loki.sh logcli builds it with Go): ${(error as Error).message}`,
    );
  }
}

const S = 1_000_000_000n;
/** A minute boundary 10 minutes ago: flushed lines in its minute, head lines in the next. */
const T_S = Math.floor(Date.now() / 60_000) * 60 - 600;
const T = BigInt(T_S) * S;

interface Pushed {
  readonly labels: Record<string, string>;
  readonly lines: readonly [bigint, string][];
}

function lines(tag: string, fromS: number, n: number): [bigint, string][] {
  return Array.from({ length: n }, (_, i) => [
    T + BigInt(fromS + i) * S,
    `level=info svc=${tag} msg="naïve café ${i}" took=${i * 3}ms`,
  ]);
}

const FLUSHED: Pushed[] = [
  { labels: { app: "lc-api", pod: "p1" }, lines: lines("api", 2, 30) },
  { labels: { app: "lc-web", pod: "p1" }, lines: lines("web", 2, 10) },
];
const HEADS: Pushed[] = [
  { labels: { app: "lc-api", pod: "p2" }, lines: lines("api2", 65, 25) },
  { labels: { app: "lc-web", pod: "p1" }, lines: lines("web-late", 70, 4) },
];
const ALL = [...FLUSHED, ...HEADS];

const bytes = (p: readonly Pushed[]): number =>
  p.reduce((n, s) => n + s.lines.reduce((m, [, l]) => m + Buffer.byteLength(l, "utf8"), 0), 0);
const of = (p: readonly Pushed[], f: (l: Record<string, string>) => boolean): number =>
  bytes(p.filter((s) => f(s.labels)));

async function push(url: string, streams: readonly Pushed[]): Promise<void> {
  const res = await fetch(`${url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      streams: streams.map((s) => ({
        stream: s.labels,
        values: s.lines.map(([ts, line]) => [String(ts), line]),
      })),
    }),
  });
  if (res.status !== 204) throw new Error(`push: ${res.status} ${await res.text()}`);
}

async function entriesIn(url: string): Promise<unknown> {
  const q = new URLSearchParams({
    query: '{app=~"lc-.+"}',
    start: String(T_S - 60),
    end: String(T_S + 180),
  });
  const res = await fetch(`${url}/loki/api/v1/index/stats?${q.toString()}`);
  return ((await res.json()) as { entries: number }).entries;
}

const cluster = new Cluster();
let dir: string | undefined;
let sieve: SieveChild;
let logcli: string;

beforeAll(async () => {
  logcli = logcliPath();
  const root = await mkdtemp(join(tmpdir(), "sieve-logcli-volume-"));
  dir = root;
  sieve = await cluster.start({ target: "all", args: ["--data-dir", join(root, "data")] });
  await push(sieve.url, FLUSHED);
  const flushedEntries = FLUSHED.reduce((n, s) => n + s.lines.length, 0);
  await waitFor("the first push to be ingested", async () =>
    (await entriesIn(sieve.url)) === flushedEntries ? true : undefined,
  );
  expect((await fetch(`${sieve.url}/flush`, { method: "POST" })).status).toBe(204);
  await push(sieve.url, HEADS);
  const allEntries = ALL.reduce((n, s) => n + s.lines.length, 0);
  await waitFor("the second push to be ingested", async () =>
    (await entriesIn(sieve.url)) === allEntries ? true : undefined,
  );
}, 120_000);

afterAll(async () => {
  await cluster.stopAll();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

interface Sample {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

/** Runs logcli with `args` against Sieve; answers the result it printed, parsed. */
async function cli(...args: string[]): Promise<Sample[]> {
  const { stdout } = await run(logcli, [...args, `--addr=${sieve.url}`, "--since=1h", "--quiet"], {
    timeout: 60_000,
    env: { ...process.env, LOKI_ADDR: "" },
  });
  return JSON.parse(stdout) as Sample[];
}

/** The answer without its sample times (logcli's `end` is its own now). */
const bytesBy = (result: Sample[]): [Record<string, string>, string][] =>
  result.map((s) => [s.metric, s.value![1]]);

test("logcli volume: per series named by the query's labels, flushed and head bytes", async () => {
  const result = await cli("volume", '{app=~"lc-.+"}');
  expect(bytesBy(result)).toEqual(
    [
      [{ app: "lc-api" }, String(of(ALL, (l) => l.app === "lc-api"))],
      [{ app: "lc-web" }, String(of(ALL, (l) => l.app === "lc-web"))],
    ].sort((a, b) => Number(b[1]) - Number(a[1])),
  );
});

test("logcli volume --targetLabels=pod, --aggregateByLabels, --limit", async () => {
  const byPod = await cli("volume", "--targetLabels=pod", '{app=~"lc-.+"}');
  expect(bytesBy(byPod)).toEqual(
    [
      [{ pod: "p1" }, String(of(ALL, (l) => l.pod === "p1"))],
      [{ pod: "p2" }, String(of(ALL, (l) => l.pod === "p2"))],
    ].sort((a, b) => Number(b[1]) - Number(a[1])),
  );
  const byLabel = await cli("volume", "--aggregateByLabels", '{app="lc-api"}');
  const api = String(of(ALL, (l) => l.app === "lc-api"));
  expect(bytesBy(byLabel)).toEqual([
    [{ app: "" }, api],
    [{ pod: "" }, api],
    [{ service_name: "" }, api],
  ]);
  const top = await cli("volume", "--limit=1", '{app=~"lc-.+"}');
  expect(top.map((s) => s.metric)).toEqual([{ app: "lc-api" }]);
});

test("logcli volume_range --step=1m: the flushed minute and the heads' minute", async () => {
  const result = await cli("volume_range", "--step=1m", '{app="lc-web", pod="p1"}');
  expect(result).toEqual([
    {
      metric: { app: "lc-web", pod: "p1" },
      values: [
        [(T_S * 1000 + 59_999) / 1000, String(bytes([FLUSHED[1]!]))],
        [(T_S * 1000 + 119_999) / 1000, String(bytes([HEADS[1]!]))],
      ],
    },
  ]);
});
