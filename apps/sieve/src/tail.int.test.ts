// `GET /loki/api/v1/tail` on a real `sieve all` over loopback, with the `ws` client: the
// recent lines first, then every line pushed, in order, none lost or repeated across a
// flush; Loki's refusals before and after the upgrade; a client that stops reading is cut
// off (lines dropped and counted, never buffered without bound).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

let dir: string;
let sieve: SieveProcess | undefined;

interface Frame {
  streams?: { stream: Record<string, string>; values: [string, string][] }[];
  dropped_entries?: { timestamp: string; labels: Record<string, string> }[];
}

/** A tail client: every frame as it comes, and how the server closed it. */
class TailClient {
  readonly frames: Frame[] = [];
  readonly ws: WebSocket;
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly opened: Promise<void>;

  constructor(params: Record<string, string>) {
    const url = new URL("/loki/api/v1/tail", sieve!.url.replace(/^http/, "ws"));
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    this.ws = new WebSocket(url);
    this.ws.on("message", (data: Buffer) => this.frames.push(JSON.parse(data.toString()) as Frame));
    this.opened = new Promise((resolve, reject) => {
      this.ws.once("open", () => {
        resolve();
      });
      this.ws.once("error", reject);
    });
    this.closed = new Promise((resolve) => {
      this.ws.once("close", (code, reason) => {
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  lines(): string[] {
    return this.frames.flatMap((f) => (f.streams ?? []).flatMap((s) => s.values.map((v) => v[1])));
  }

  waitLines(n: number, what: string): Promise<string[]> {
    return waitFor(
      () => Promise.resolve(this.lines().length >= n ? this.lines() : undefined),
      what,
    );
  }
}

async function push(
  app: string,
  lines: readonly string[],
  startNs = BigInt(Date.now()) * 1_000_000n,
): Promise<void> {
  const response = await fetch(new URL("/loki/api/v1/push", sieve!.url), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      streams: [
        {
          stream: { app },
          values: lines.map((line, i) => [(startNs + BigInt(i)).toString(), line]),
        },
      ],
    }),
  });
  expect(response.status, await response.text()).toBe(204);
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(new URL("/metrics", sieve!.url))).text();
  const line = text.split("\n").find((l) => l.startsWith(name));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-tail-"));
  sieve = await spawnSieve(["all", "--data-dir", dir], {
    SIEVE_QUERIER_LIMITS_MAX_CONCURRENT_TAIL_REQUESTS: "3",
    SIEVE_QUERIER_TAIL_SLOW_READER_MS: "1000",
    SIEVE_QUERIER_TAIL_MAX_BUFFERED_BYTES: "65536",
    SIEVE_QUERIER_WORKERS: "1",
    SIEVE_INGESTER_WORKERS: "2",
    // The slow reader's test pushes 24 MB in a few seconds.
    SIEVE_DISTRIBUTOR_LIMITS_INGESTION_RATE_BYTES: String(256 * 1024 * 1024),
    SIEVE_DISTRIBUTOR_LIMITS_INGESTION_BURST_BYTES: String(256 * 1024 * 1024),
    SIEVE_DISTRIBUTOR_LIMITS_PER_STREAM_RATE_BYTES: String(256 * 1024 * 1024),
    SIEVE_DISTRIBUTOR_LIMITS_PER_STREAM_BURST_BYTES: String(256 * 1024 * 1024),
  });
}, 60_000);

afterAll(async () => {
  await sieve?.stop();
  await rm(dir, { recursive: true, force: true });
}, 30_000);

describe("tail over WebSocket (sieve all)", () => {
  it("sends the recent lines, then every line pushed, in order, none lost across a flush", async () => {
    await push("history", ["h0", "h1", "h2", "h3", "h4"]);
    const tail = new TailClient({ query: '{app="history"}', limit: "3" });
    await tail.opened;
    // The last `limit` lines, oldest first.
    expect(await tail.waitLines(3, "the history")).toEqual(["h2", "h3", "h4"]);
    const live = Array.from({ length: 60 }, (_, i) => `live ${i}`);
    for (let i = 0; i < live.length; i++) {
      await push("history", [live[i]!]);
      // A flush half-way: lines of the flushed heads are neither lost nor sent twice.
      if (i === 30) {
        const flushed = await fetch(new URL("/flush", sieve!.url), { method: "POST" });
        expect(flushed.status).toBe(204);
      }
    }
    const got = await tail.waitLines(3 + live.length, "every live line");
    expect(got).toEqual(["h2", "h3", "h4", ...live]);
    // Loki's frame shape: streams of [ns, line] values, labels as a map.
    const first = tail.frames.find((f) => (f.streams ?? []).length > 0)!;
    expect(first.streams![0]!.stream).toMatchObject({ app: "history" });
    expect(first.streams![0]!.values[0]![0]).toMatch(/^\d{19}$/);
    expect(tail.frames.every((f) => f.dropped_entries === undefined)).toBe(true);
    // Nothing more arrives (no repeats).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(tail.lines()).toHaveLength(3 + live.length);
    tail.ws.close(1000);
    await tail.closed;
  });

  it("runs the pipeline: only matching lines, after line_format", async () => {
    const tail = new TailClient({
      query: '{app="piped"} |= "keep" | line_format "got {{__line__}}"',
    });
    await tail.opened;
    await waitFor(
      async () => ((await metric("sieve_querier_tail_active")) >= 1 ? true : undefined),
      "the tail",
    );
    await push("piped", ["keep 1", "drop 2", "keep 3"]);
    expect(await tail.waitLines(2, "the kept lines")).toEqual(["got keep 1", "got keep 3"]);
    tail.ws.close(1000);
    await tail.closed;
  });

  it("refuses bad parameters before the upgrade, with Loki's status and words", async () => {
    /** The HTTP answer a WebSocket handshake got instead of an upgrade. */
    const refused = (params: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const url = new URL("/loki/api/v1/tail", sieve!.url.replace(/^http/, "ws"));
        for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
        const ws = new WebSocket(url);
        ws.on("open", () => {
          reject(new Error("upgraded"));
        });
        ws.on("error", () => undefined);
        ws.on("unexpected-response", (_request, response) => {
          let body = "";
          response.on("data", (chunk: Buffer) => (body += chunk.toString()));
          response.on("end", () => {
            resolve({ status: response.statusCode ?? 0, body });
          });
        });
      });
    expect(await refused({ query: '{app="x"}', delay_for: "6" })).toEqual({
      status: 400,
      body: "delay_for can't be greater than 5\n",
    });
    expect(await refused({ query: '{app="x"}', limit: "x" })).toEqual({
      status: 400,
      body: 'strconv.Atoi: parsing "x": invalid syntax\n',
    });
    const parse = await refused({ query: "{app=" });
    expect(parse.status).toBe(400);
    expect(parse.body).toMatch(/^parse error at line 1/);
    const plain = await fetch(
      new URL(`/loki/api/v1/tail?query=${encodeURIComponent('{app="x"}')}`, sieve!.url),
    );
    expect(plain.status).toBe(400);
    expect(await plain.text()).toMatch(/not using the websocket protocol/);
  });

  it("closes a tail past the tenant's limit with Loki's message", async () => {
    const open = [0, 1, 2].map(() => new TailClient({ query: '{app="limit"}' }));
    await Promise.all(open.map((t) => t.opened));
    await waitFor(
      async () => ((await metric("sieve_querier_tail_active")) === 3 ? true : undefined),
      "three tails",
    );
    const fourth = new TailClient({ query: '{app="limit"}' });
    expect(await fourth.closed).toEqual({
      code: 1011,
      reason: "max concurrent tail requests limit exceeded, count > limit (4 > 3)",
    });
    for (const t of open) t.ws.close(1000);
    await Promise.all(open.map((t) => t.closed));
    // A slot freed is a slot usable again.
    const again = new TailClient({ query: '{app="limit"}' });
    await again.opened;
    await push("limit", ["ok"]);
    expect(await again.waitLines(1, "the line")).toEqual(["ok"]);
    again.ws.close(1000);
    await again.closed;
  });

  it("drops lines for a client that does not read, and closes it with a reason", async () => {
    const tail = new TailClient({ query: '{app="slow"}' });
    await tail.opened;
    await waitFor(
      async () => ((await metric("sieve_querier_tail_active")) >= 1 ? true : undefined),
      "the tail",
    );
    // The client stops reading: the kernel's buffers fill, then the server's (64 KiB here).
    const socket = (tail.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    const big = "x".repeat(60_000);
    const closedBefore = await metric('sieve_querier_tail_closed_total{reason="slow_reader"}');
    for (let i = 0; i < 40; i++) {
      await push(
        "slow",
        Array.from({ length: 10 }, (_, j) => `${i * 10 + j} ${big}`),
      );
    }
    // Closed after being blocked 1 s (the configured time), lines dropped rather than held.
    await waitFor(
      async () =>
        (await metric('sieve_querier_tail_closed_total{reason="slow_reader"}')) > closedBefore
          ? true
          : undefined,
      "the slow reader to be closed",
    );
    expect(await metric("sieve_querier_tail_dropped_lines_total")).toBeGreaterThan(0);
    // Reading again, the client gets what was sent, then the close frame and its reason.
    socket.resume();
    const closed = await tail.closed;
    expect(closed.code).toBe(1011);
    expect(closed.reason).toMatch(/did not read the tail/);
    expect(tail.lines().length).toBeLessThan(400);
  }, 60_000);
});

describe("tail max duration", () => {
  let own: SieveProcess | undefined;
  let ownDir: string | undefined;
  afterAll(async () => {
    await own?.stop();
    if (ownDir !== undefined) await rm(ownDir, { recursive: true, force: true });
  }, 30_000);

  it("closes a tail open longer than tailMaxDurationMs with Loki's words", async () => {
    ownDir = await mkdtemp(join(tmpdir(), "sieve-tail-max-"));
    own = await spawnSieve(["all", "--data-dir", ownDir], {
      SIEVE_QUERIER_TAIL_MAX_DURATION_MS: "1500",
      SIEVE_QUERIER_WORKERS: "1",
      SIEVE_INGESTER_WORKERS: "1",
    });
    const url = new URL("/loki/api/v1/tail", own.url.replace(/^http/, "ws"));
    url.searchParams.set("query", '{app="max"}');
    const started = Date.now();
    const ws = new WebSocket(url);
    const closed = await new Promise<{ code: number; reason: string }>((resolve) => {
      ws.once("close", (code, reason) => {
        resolve({ code, reason: reason.toString() });
      });
    });
    expect(closed).toEqual({ code: 1011, reason: "reached tail max duration limit" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  }, 60_000);
});

describe("tail on shutdown", () => {
  it("closes the tails it serves with 1001 (going away) when the server stops", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sieve-tail-stop-"));
    try {
      const server = await spawnSieve(["all", "--data-dir", dir], {
        SIEVE_QUERIER_WORKERS: "1",
        SIEVE_INGESTER_WORKERS: "1",
      });
      const url = new URL("/loki/api/v1/tail", server.url.replace(/^http/, "ws"));
      url.searchParams.set("query", '{app="stopping"}');
      const ws = new WebSocket(url);
      await new Promise((resolve, reject) => {
        ws.once("open", resolve);
        ws.once("error", reject);
      });
      const closed = new Promise<{ code: number; reason: string }>((resolve) => {
        ws.once("close", (code, reason) => {
          resolve({ code, reason: reason.toString() });
        });
      });
      expect(await server.stop()).toBe(0);
      expect(await closed).toEqual({ code: 1001, reason: "the server is shutting down" });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
