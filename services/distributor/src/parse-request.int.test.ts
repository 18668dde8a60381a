// Loki's TestParseRequest table (pkg/loghttp/push/push_test.go), case for case, over HTTP
// against a real distributor: each push answers as Loki's parser does (accepted, or refused
// with Loki's status and, where Loki's error is worded, its words).
import { deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LIMITS } from "./limits.js";
import { readUntil, startDistributor, testConfig } from "./harness.test-helper.js";
import type { Harness, ReadRecord } from "./harness.test-helper.js";

/** A 2019 timestamp, as Loki's table has it: old samples are allowed here. */
const TS = "1570818238000000000";
const line = (labels: string, extra = "") =>
  `{"streams": [{ "stream": ${labels}, "values": [ [ "${TS}", "fizzbuzz"${extra} ] ] }]}`;
const FOO = line(`{ "foo": "bar2" }`);
const FOO4 = line(`{ "foo4": "bar2" }`);

/** Go's `compress/flate` writes raw DEFLATE, no zlib header: Loki's deflate bodies. */
const deflateRaw = (s: string) => deflateRawSync(Buffer.from(s), { level: 6 });
const gzip = (s: string) => gzipSync(Buffer.from(s));

interface Case {
  readonly name: string;
  readonly body: string | Uint8Array;
  readonly type?: string;
  readonly encoding?: string;
  /** 204 when Loki accepts the push; 400 when its parser refuses it. */
  readonly status: 204 | 400;
  /** Words of Loki's own error, when the refusal is Go's and not a decoder's. */
  readonly words?: RegExp;
  /** The accepted stream's labels and structured metadata, as the queue receives them. */
  readonly labels?: string;
  readonly metadata?: { name: string; value: string }[];
  /** Pushed as a tenant with service_name discovery on (Loki's default list). */
  readonly discover?: boolean;
}

const CASES: Case[] = [
  { name: "empty JSON body", body: "", type: "application/json", status: 400 },
  { name: "JSON without a Content-Type", body: FOO, status: 400 },
  { name: "JSON", body: FOO, type: "application/json", status: 204, labels: '{foo="bar2"}' },
  {
    name: "JSON, empty Content-Encoding",
    body: FOO,
    type: "application/json",
    encoding: "",
    status: 204,
    labels: '{foo="bar2"}',
  },
  {
    name: "JSON with an object for a line",
    body: `{"streams": [{ "stream": { "foo": "bar2" }, "values": [ [ "${TS}", {"fizz": "buzz"} ] ] }]}`,
    type: "application/json",
    status: 400,
  },
  {
    name: "gzip JSON",
    body: gzip(FOO),
    type: "application/json",
    encoding: "gzip",
    status: 204,
    labels: '{foo="bar2"}',
  },
  {
    name: "raw deflate JSON",
    body: deflateRaw(FOO),
    type: "application/json",
    encoding: "deflate",
    status: 204,
    labels: '{foo="bar2"}',
  },
  {
    name: "gzip bytes declared snappy (read as sent: not JSON)",
    body: gzip(FOO),
    type: "application/json",
    encoding: "snappy",
    status: 400,
  },
  {
    name: "gzip JSON with a charset",
    body: gzip(FOO),
    type: "application/json; charset=utf-8",
    encoding: "gzip",
    status: 204,
    labels: '{foo="bar2"}',
  },
  {
    name: "raw deflate JSON with a charset",
    body: deflateRaw(FOO),
    type: "application/json; charset=utf-8",
    encoding: "deflate",
    status: 204,
    labels: '{foo="bar2"}',
  },
  {
    name: "gzip, type application/jsonn (read as protobuf)",
    body: gzip(FOO),
    type: "application/jsonn; charset=utf-8",
    encoding: "gzip",
    status: 400,
  },
  {
    name: "raw deflate, type application/jsonn (read as protobuf)",
    body: deflateRaw(FOO),
    type: "application/jsonn; charset=utf-8",
    encoding: "deflate",
    status: 400,
  },
  {
    name: "gzip, malformed parameter charsetutf-8",
    body: gzip(FOO4),
    type: "application/json; charsetutf-8",
    encoding: "gzip",
    status: 400,
    words: /^mime: invalid media parameter/,
  },
  {
    name: "raw deflate, malformed parameter charsetutf-8",
    body: deflateRaw(FOO4),
    type: "application/json; charsetutf-8",
    encoding: "deflate",
    status: 400,
    words: /^mime: invalid media parameter/,
  },
  {
    name: "raw deflate, type application/jsonn again",
    body: deflateRaw(FOO),
    type: "application/jsonn; charset=utf-8",
    encoding: "deflate",
    status: 400,
  },
  {
    name: "raw deflate, malformed parameter again",
    body: deflateRaw(FOO4),
    type: "application/json; charsetutf-8",
    encoding: "deflate",
    status: 400,
    words: /^mime: invalid media parameter/,
  },
  {
    name: "raw deflate JSON with structured metadata",
    body: deflateRaw(line(`{ "foo": "bar2" }`, `, {"a": "a", "b": "b"}`)),
    type: "application/json; charset=utf-8",
    encoding: "deflate",
    status: 204,
    labels: '{foo="bar2"}',
    metadata: [
      { name: "a", value: "a" },
      { name: "b", value: "b" },
    ],
  },
  // Loki's last three cases turn service_name discovery on (its default list).
  {
    name: "JSON with a job label",
    body: line(`{ "foo": "bar2", "job": "stuff" }`),
    type: "application/json",
    status: 204,
    discover: true,
    labels: '{foo="bar2", job="stuff", service_name="stuff"}',
  },
  {
    name: "JSON, no service label",
    body: FOO,
    type: "application/json",
    status: 204,
    discover: true,
    labels: '{foo="bar2", service_name="unknown_service"}',
  },
  {
    name: "JSON, an aggregated metric stream",
    body: line(`{ "__aggregated_metric__": "stuff", "foo": "bar2", "job": "stuff" }`),
    type: "application/json",
    status: 204,
    discover: true,
    labels: '{__aggregated_metric__="stuff", foo="bar2", job="stuff"}',
  },
];

/** The bomb bound of this distributor: small, so a bomb test costs little. */
const MAX_DECOMPRESSED_BYTES = 1024 * 1024;

let h: Harness;
beforeAll(async () => {
  // Loki's table pushes 2019 samples: no age limit here.
  const config = {
    ...testConfig(
      { maxDecompressedBytes: MAX_DECOMPRESSED_BYTES, authEnabled: true },
      { rejectOldSamples: false },
    ),
    overrides: { discover: { discoverServiceName: DEFAULT_LIMITS.discoverServiceName } },
  };
  h = await startDistributor({ config });
});
afterAll(async () => {
  await h.close();
});

async function push(c: Pick<Case, "body" | "type" | "encoding" | "discover">) {
  const headers: Record<string, string> = { "x-scope-orgid": c.discover ? "discover" : "fake" };
  if (c.type !== undefined) headers["content-type"] = c.type;
  if (c.encoding) headers["content-encoding"] = c.encoding;
  const res = await fetch(`${h.url}/loki/api/v1/push`, { method: "POST", body: c.body, headers });
  return { status: res.status, text: await res.text() };
}

/** An entry as text (timestamp, line, metadata pairs), to compare decoded records by value. */
const entryText = (e: ReadRecord["entries"][number]) =>
  JSON.stringify([
    String(e.timestampNs),
    e.line,
    e.structuredMetadata.map((m) => [m.name, m.value]),
  ]);

/** How many records hold exactly the one entry, and the labels, an accepted case expects. */
function matching(records: readonly ReadRecord[], c: Case): number {
  const expected = entryText({
    timestampNs: BigInt(TS),
    line: "fizzbuzz",
    structuredMetadata: c.metadata ?? [],
  });
  return records.filter(
    (r) =>
      (c.labels === undefined || r.labels === c.labels) &&
      r.entries.length === 1 &&
      entryText(r.entries[0]!) === expected,
  ).length;
}

describe("Loki's TestParseRequest table over HTTP", () => {
  // One distributor for the table, cases in order: each accepted case must add one record,
  // holding its entry (records of several partitions come back in no global order).
  let before: ReadRecord[] = [];
  it.each(CASES)("$name: $status", async (c) => {
    const res = await push(c);
    expect(res.status, res.text).toBe(c.status);
    if (c.words !== undefined) expect(res.text).toMatch(c.words);
    if (c.status !== 204) return;
    const after = await readUntil(h.wal.consumer, (r) => r.length > before.length);
    expect(after).toHaveLength(before.length + 1);
    expect(matching(after, c)).toBe(matching(before, c) + 1);
    before = after;
  });
});

describe("Content-Encoding and Content-Type beyond Loki's table", () => {
  it("inflates zlib-wrapped deflate too (RFC 9110 clients)", async () => {
    const res = await push({
      body: deflateSync(Buffer.from(FOO)),
      type: "application/json",
      encoding: "deflate",
    });
    expect(res).toEqual({ status: 204, text: "" });
  });

  it.each([
    ["raw", deflateRawSync],
    ["zlib", deflateSync],
  ])("refuses a %s deflate bomb past maxDecompressedBytes with 413", async (_kind, zip) => {
    const bomb = zip(Buffer.alloc(MAX_DECOMPRESSED_BYTES + 1024, 0x20));
    const res = await push({ body: bomb, type: "application/json", encoding: "deflate" });
    expect(res.status).toBe(413);
    expect(res.text).toMatch(/decompressed/);
  });

  it("refuses deflate bytes that inflate neither way with 400", async () => {
    const res = await push({ body: "not deflate", type: "application/json", encoding: "deflate" });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/deflate body does not decompress/);
  });

  it("accepts uncompressed JSON declared snappy, as Loki reads it as sent", async () => {
    const res = await push({ body: FOO, type: "application/json", encoding: "snappy" });
    expect(res).toEqual({ status: 204, text: "" });
  });

  it.each([
    ["application/json; charset", /^mime: invalid media parameter/],
    ["application/json; a=1; a=2", /^mime: duplicate parameter name/],
    ["/json", /^mime: no media type/],
    ["application json", /^mime: expected slash after first token/],
    ["application/", /^mime: expected token after slash/],
    ["application/json/x", /^mime: unexpected content after media subtype/],
    ['application/json; charset="utf-8', /^mime: invalid media parameter/],
  ])("refuses Content-Type %j with Go's words", async (type, words) => {
    const res = await push({ body: FOO, type });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(words);
  });

  it.each(["application/json;", 'APPLICATION/JSON; Charset="utf-8"', "application/json ; x=y"])(
    "accepts Content-Type %j as JSON, as Go parses it",
    async (type) => {
      const res = await push({ body: FOO, type });
      expect(res).toEqual({ status: 204, text: "" });
    },
  );
});
