// Issue 10, case 8: with `server.internalPort` set, the internal APIs (`/flush`, the
// ingester's query API, the bloom gateway's filter API) answer only on the internal
// listener; the public port serves what a client may call. Unset, both share one port.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeQueryResponse, encodeQueryRequest, encodeTailRequest } from "@sieve/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSieve, waitFor, type SieveProcess } from "./sieve.test-helper.js";

const PROTOBUF = "application/x-protobuf";
const INTERNAL_ROUTES = [
  { path: "/flush", body: "" },
  {
    path: "/ingester/v1/query",
    // The ingester's query API speaks protobuf (proto/ingester.proto).
    body: encodeQueryRequest({
      tenant: "fake",
      selector: '{app="internal"}',
      start: 0n,
      end: BigInt(Date.now() + 60_000) * 1_000_000n,
      direction: "forward",
      limit: 10,
    }),
  },
  { path: "/bloomgateway/v1/filter", body: "" },
];

async function post(base: string, path: string, body: string | Uint8Array): Promise<number> {
  const response = await fetch(new URL(path, base), {
    method: "POST",
    ...(body !== "" && { headers: { "content-type": PROTOBUF }, body }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** The first chunk of a streamed body. */
async function readFirst(response: Response): Promise<ArrayBuffer> {
  const reader = response.body!.getReader();
  const { value } = (await reader.read()) as { value?: Uint8Array };
  return (value ?? new Uint8Array(0)).slice().buffer;
}

async function pushOne(base: string): Promise<void> {
  const ts = String(BigInt(Date.now()) * 1_000_000n);
  const response = await fetch(new URL("/loki/api/v1/push", base), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ streams: [{ stream: { app: "internal" }, values: [[ts, "line"]] }] }),
  });
  expect(response.status).toBe(204);
}

describe("sieve all with server.internalPort", () => {
  let dir: string;
  let sieve: SieveProcess;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sieve-internal-"));
    sieve = await spawnSieve(["all", "--data-dir", dir], { SIEVE_INTERNAL_PORT: "0" });
  }, 60_000);
  // A graceful stop flushes on every ingest worker: beside other suites it can pass 10 s.
  afterAll(async () => {
    await sieve.stop();
    await rm(dir, { recursive: true, force: true });
  }, 30_000);

  it("listens on two ports", () => {
    expect(sieve.internalUrl).not.toBe(sieve.url);
  });

  it.each(INTERNAL_ROUTES)("refuses $path on the public port", async ({ path, body }) => {
    expect(await post(sieve.url, path, body)).toBe(404);
  });

  it("serves the internal APIs on the internal port", async () => {
    await pushOne(sieve.url);
    const query = INTERNAL_ROUTES[1]!;
    // An acknowledged push is in the write-ahead log; an ingest worker applies it a moment
    // later (reads are eventually consistent, as Loki's Kafka ingest path): poll until then.
    const lines = await waitFor(async () => {
      const response = await fetch(new URL(query.path, sieve.internalUrl), {
        method: "POST",
        headers: { "content-type": PROTOBUF, "x-scope-orgid": "fake" },
        body: query.body,
      });
      expect(response.status).toBe(200);
      const streams = decodeQueryResponse(new Uint8Array(await response.arrayBuffer()));
      const got = streams.flatMap((s) => s.entries.map((e) => e.line));
      return got.length > 0 ? got : undefined;
    }, "the ingester to hold the pushed line");
    expect(lines).toEqual(["line"]);
    expect(await post(sieve.internalUrl, "/flush", "")).toBe(204);
  });

  it("serves the public API only on the public port, /ready on both", async () => {
    for (const base of [sieve.url, sieve.internalUrl]) {
      expect((await fetch(new URL("/ready", base))).status).toBe(200);
    }
    const labels = await fetch(new URL("/loki/api/v1/labels", sieve.internalUrl));
    expect(labels.status).toBe(404);
  });

  it("serves the ingester's tail only on the internal port", async () => {
    const body = encodeTailRequest({ tenant: "fake", selector: '{app="internal"}' });
    const abort = new AbortController();
    const ask = (base: string) =>
      fetch(new URL("/ingester/v1/tail", base), {
        method: "POST",
        headers: { "content-type": PROTOBUF, "x-scope-orgid": "fake" },
        body,
        signal: abort.signal,
      });
    const refused = await ask(sieve.url);
    await refused.arrayBuffer();
    expect(refused.status).toBe(404);
    // A streamed answer: its first frame (empty: the tail is held) is all this reads; the
    // abort ends it (a `break` out of the body's iterator waits for an end that never comes).
    const held = await ask(sieve.internalUrl);
    expect(held.status).toBe(200);
    const first = new Uint8Array(await readFirst(held));
    abort.abort();
    expect([...first.subarray(0, 4)]).toEqual([0, 0, 0, 0]);
  });
});

describe("sieve all without server.internalPort", () => {
  it("serves the internal APIs on its one port, as before", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sieve-internal-"));
    const sieve = await spawnSieve(["all", "--data-dir", dir]);
    try {
      expect(sieve.internalUrl).toBe(sieve.url);
      await pushOne(sieve.url);
      expect(await post(sieve.url, "/flush", "")).toBe(204);
    } finally {
      await sieve.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
