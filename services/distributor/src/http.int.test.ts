import { once } from "node:events";
import { createGzip, deflateSync, gzipSync } from "node:zlib";
import { compress } from "snappyjs";
import { afterEach, describe, expect, it } from "vitest";
import { encodePushRequest } from "@sieve/proto";
import type { PushRequest } from "@sieve/proto";
import { fingerprint, fingerprintKey, partitionOf } from "@sieve/labels";
import { linesOf, readUntil, startDistributor, testConfig } from "./harness.test-helper.js";
import type { Harness } from "./harness.test-helper.js";

const nowNs = () => BigInt(Date.now()) * 1_000_000n;

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function push(
  body: Uint8Array | string,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${h!.url}/loki/api/v1/push`, { method: "POST", body, headers });
  return { status: res.status, text: await res.text() };
}

function jsonBody(streams: unknown[]): string {
  return JSON.stringify({ streams });
}

function protoBody(request: PushRequest): Uint8Array {
  return compress(encodePushRequest(request));
}

function protoEntry(line: string, ns = nowNs(), metadata: { name: string; value: string }[] = []) {
  return {
    timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
    line,
    structuredMetadata: metadata,
  };
}

describe("POST /loki/api/v1/push", () => {
  it("accepts JSON with structured metadata and an empty {} third element", async () => {
    h = await startDistributor();
    const ts = nowNs();
    const body = jsonBody([
      {
        stream: { job: "api", app: "x" },
        values: [
          [String(ts), "first", { trace_id: "abc" }],
          [String(ts + 1n), "second", {}],
          [String(ts + 2n), "third"],
        ],
      },
    ]);
    const res = await push(body, { "content-type": "application/json" });
    expect(res).toEqual({ status: 204, text: "" });
    const records = await readUntil(h.wal.consumer, (r) => r.length === 1);
    const record = records[0]!;
    expect(record.tenant).toBe("fake");
    expect(record.labels).toBe('{app="x", job="api"}');
    expect(record.fingerprint).toBe(fingerprint('{app="x", job="api"}'));
    expect([...record.key]).toEqual([...fingerprintKey(record.fingerprint)]);
    expect(record.partition).toBe(partitionOf(record.fingerprint, 4));
    expect(record.entries).toEqual([
      { timestampNs: ts, line: "first", structuredMetadata: [{ name: "trace_id", value: "abc" }] },
      { timestampNs: ts + 1n, line: "second", structuredMetadata: [] },
      { timestampNs: ts + 2n, line: "third", structuredMetadata: [] },
    ]);
  });

  it.each([
    ["gzip", gzipSync],
    ["deflate", deflateSync],
  ])("accepts JSON with Content-Encoding %s", async (encoding, zip) => {
    h = await startDistributor();
    const body = jsonBody([
      { stream: { app: "z" }, values: [[String(nowNs()), `via ${encoding}`]] },
    ]);
    const res = await push(zip(Buffer.from(body)), {
      "content-type": "application/json",
      "content-encoding": encoding,
    });
    expect(res.status).toBe(204);
    expect(linesOf(await readUntil(h.wal.consumer, (r) => r.length === 1))).toEqual([
      `via ${encoding}`,
    ]);
  });

  it("accepts protobuf + snappy with unsorted labels, quoted names and extra spaces", async () => {
    h = await startDistributor();
    const res = await push(
      protoBody({
        streams: [
          {
            labels: '{ "job" = "b" ,  app="a" }',
            entries: [protoEntry("one", nowNs(), [{ name: "trace_id", value: "t1" }])],
          },
          { labels: '{app="a", job="b"}', entries: [protoEntry("two")] },
        ],
      }),
      { "content-type": "application/x-protobuf" },
    );
    expect(res.status).toBe(204);
    const records = await readUntil(h.wal.consumer, (r) => r.length === 2);
    expect(records.map((r) => r.labels)).toEqual(['{app="a", job="b"}', '{app="a", job="b"}']);
    expect(records[0]!.fingerprint).toBe(records[1]!.fingerprint);
    expect(linesOf(records).sort()).toEqual(["one", "two"]);
  });

  it("accepts the valid streams and lists the rejected ones (partial success, 400)", async () => {
    h = await startDistributor({ config: testConfig({}, { maxLineBytes: 10 }) });
    const ts = String(nowNs());
    const res = await push(
      jsonBody([
        {
          stream: { app: "ok" },
          values: [
            [ts, "fine"],
            [ts, "much too long a line"],
          ],
        },
        { stream: {}, values: [[ts, "no labels"]] },
        { stream: { "bad-name": "x" }, values: [[ts, "bad"]] },
      ]),
      { "content-type": "application/json" },
    );
    expect(res.status).toBe(400);
    expect(res.text.trim().split("\n")).toEqual([
      "Max entry size '10' bytes exceeded for stream '{app=\"ok\"}' while adding an entry with length '20' bytes",
      "error at least one label pair is required per stream",
      `Error parsing labels '{"bad-name"="x"}' with error: invalid label name: "bad-name"`,
    ]);
    expect(linesOf(await readUntil(h.wal.consumer, (r) => r.length === 1))).toEqual(["fine"]);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain(
      'sieve_discarded_lines_total{tenant="fake",reason="line_too_long"} 1',
    );
    expect(metrics).toContain(
      'sieve_discarded_lines_total{tenant="fake",reason="missing_labels"} 1',
    );
    expect(metrics).toContain(
      'sieve_discarded_lines_total{tenant="fake",reason="invalid_labels"} 1',
    );
    expect(metrics).toContain('sieve_distributor_lines_received_total{tenant="fake"} 1');
    expect(metrics).toContain(
      'sieve_discarded_bytes_total{tenant="fake",reason="line_too_long"} 20',
    );
  });

  it.each([
    ["malformed JSON", "{", "application/json", /JSON/],
    ["wrong JSON shape", '{"streams": {}}', "application/json", /\$\.streams: expected an array/],
    [
      "bad timestamp",
      '{"streams":[{"stream":{"a":"b"},"values":[["12x","l"]]}]}',
      "application/json",
      /\$\.streams\[0\]\.values\[0\]\[0\]: expected a string of Unix nanoseconds/,
    ],
    ["not snappy", "not snappy at all", "application/x-protobuf", /snappy/],
    ["snappy, not protobuf", compress(Buffer.from([0x0a, 0x50, 0x01])), "", /malformed protobuf/],
  ])("answers 400 for %s", async (_name, body, type, message) => {
    h = await startDistributor();
    const res = await push(body, type === "" ? {} : { "content-type": type });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(message);
  });

  it("answers 415 for an unknown Content-Encoding", async () => {
    h = await startDistributor();
    const res = await push("{}", { "content-type": "application/json", "content-encoding": "br" });
    expect(res.status).toBe(415);
  });

  it("answers 400 for a gzip body that does not inflate", async () => {
    h = await startDistributor();
    const res = await push("not gzip", {
      "content-type": "application/json",
      "content-encoding": "gzip",
    });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/gzip body does not decompress/);
  });
});

describe("tenants", () => {
  it("uses tenant fake when auth is off, whatever the header", async () => {
    h = await startDistributor();
    const body = jsonBody([{ stream: { a: "b" }, values: [[String(nowNs()), "x"]] }]);
    const res = await push(body, { "content-type": "application/json", "x-scope-orgid": "other" });
    expect(res.status).toBe(204);
    const records = await readUntil(h.wal.consumer, (r) => r.length === 1);
    expect(records[0]!.tenant).toBe("fake");
  });

  it.each([
    [undefined, 401, /no org id/],
    ["", 401, /no org id/],
    ["a/b", 400, /tenant ID 'a\/b' contains unsupported character '\/'/],
    ["..", 400, /tenant ID is '\.' or '\.\.'/],
    ["x".repeat(151), 400, /tenant ID is too long: max 150 characters/],
    ["team-a_(1)", 204, /^$/],
  ])("with auth on, X-Scope-OrgID %j answers %i", async (tenant, status, message) => {
    h = await startDistributor({ config: testConfig({ authEnabled: true }) });
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (tenant !== undefined) headers["x-scope-orgid"] = tenant;
    const res = await push(
      jsonBody([{ stream: { a: "b" }, values: [[String(nowNs()), "x"]] }]),
      headers,
    );
    expect(res.status).toBe(status);
    expect(res.text).toMatch(message);
    if (status === 204) {
      const records = await readUntil(h.wal.consumer, (r) => r.length === 1);
      expect(records[0]!.tenant).toBe(tenant);
    } else {
      expect(
        h.wal.endOffset(0) + h.wal.endOffset(1) + h.wal.endOffset(2) + h.wal.endOffset(3),
      ).toBe(0);
    }
  });
});

describe("body limits", () => {
  it("answers 413 for a body over maxBodyBytes", async () => {
    h = await startDistributor({ config: testConfig({ maxBodyBytes: 1000 }) });
    const res = await push("x".repeat(5000), { "content-type": "application/json" });
    expect(res.status).toBe(413);
    expect(res.text).toMatch(/request body too large: 5000 bytes, limit: 1000 bytes/);
  });

  it("stops inflating a gzip bomb at the cap, without allocating its size", async () => {
    h = await startDistributor({ config: testConfig({ maxDecompressedBytes: 1 << 20 }) });
    // 256 MiB of zeros in about 256 KB of gzip, made as a stream so the test holds 1 MiB.
    const gzip = createGzip({ level: 9 });
    const chunks: Buffer[] = [];
    gzip.on("data", (c: Buffer) => chunks.push(c));
    const zeros = Buffer.alloc(1 << 20);
    for (let i = 0; i < 256; i++) if (!gzip.write(zeros)) await once(gzip, "drain");
    gzip.end();
    await once(gzip, "end");
    const bomb = Buffer.concat(chunks);
    expect(bomb.length).toBeLessThan(1 << 20);
    const before = process.memoryUsage();
    const res = await push(bomb, {
      "content-type": "application/json",
      "content-encoding": "gzip",
    });
    const after = process.memoryUsage();
    expect(res.status).toBe(413);
    expect(res.text).toMatch(/request body too large: \d+ bytes, limit: 1048576 bytes/);
    // The server shares this process: had it inflated the bomb, 256 MiB would show here.
    expect(
      after.arrayBuffers + after.heapUsed - before.arrayBuffers - before.heapUsed,
    ).toBeLessThan(32 << 20);
  });

  it("refuses a snappy bomb by its declared length (413)", async () => {
    h = await startDistributor({ config: testConfig({ maxDecompressedBytes: 1 << 20 }) });
    const bomb = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x61, 0xfe, 0x01, 0x00]);
    const res = await push(bomb, { "content-type": "application/x-protobuf" });
    expect(res.status).toBe(413);
    expect(res.text).toMatch(/request body too large: 4294967295 bytes, limit: 1048576 bytes/);
  });
});

describe("operations", () => {
  it("serves /ready and /metrics", async () => {
    h = await startDistributor();
    const ready = await fetch(`${h.url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.text()).toBe("ready\n");
    await push(jsonBody([{ stream: { a: "b" }, values: [[String(nowNs()), "x"]] }]), {
      "content-type": "application/json",
    });
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toMatch(
      /sieve_distributor_request_duration_seconds_count\{status_code="204"\} 1/,
    );
    expect(metrics).toMatch(/sieve_queue_write_duration_seconds_count\{outcome="ok"\} 1/);
    expect(metrics).toContain('sieve_distributor_bytes_received_total{tenant="fake"} 1');
  });
});

describe("detected_level", () => {
  it("takes a level word that names an Object property as a word (was a 500 for the whole push)", async () => {
    h = await startDistributor({ config: testConfig({}, { discoverLogLevels: true }) });
    const res = await push(
      protoBody({
        streams: [
          { labels: '{app="a"}', entries: [protoEntry("level=constructor x")] },
          { labels: '{app="b", level="__proto__"}', entries: [protoEntry("ok")] },
          {
            labels: '{app="c"}',
            entries: [protoEntry("ok", nowNs(), [{ name: "severity", value: "valueOf" }])],
          },
        ],
      }),
      { "content-type": "application/x-protobuf" },
    );
    expect(res).toEqual({ status: 204, text: "" });
    const records = await readUntil(h.wal.consumer, (r) => r.length === 3);
    const level = (app: string) =>
      records
        .find((r) => r.labels.includes(`app="${app}"`))!
        .entries[0]!.structuredMetadata.find((p) => p.name === "detected_level")?.value;
    expect([level("a"), level("b"), level("c")]).toEqual(["unknown", "__proto__", "valueOf"]);
  });
});

describe("odd requests", () => {
  it.each([
    ["no body, no content type", undefined, {}, 400],
    ["empty JSON body", "", { "content-type": "application/json" }, 400],
    ["JSON without streams", "{}", { "content-type": "application/json" }, 204],
  ])("%s answers %s", async (_name, body, headers, status) => {
    h = await startDistributor();
    const res = await fetch(`${h.url}/loki/api/v1/push`, {
      method: "POST",
      headers,
      ...(body !== undefined && { body }),
    });
    expect(res.status).toBe(status);
  });
});
