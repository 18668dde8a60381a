// POST /otlp/v1/logs over loopback into a real write-ahead log: both encodings, gzip, what
// reaches the queue, partial success, and every refusal as a google.rpc.Status with the
// status the OTLP specification gives it.
import { gzipSync } from "node:zlib";
import { decodeOtlpLogsResponse, decodeOtlpStatus, encodeOtlpLogsProtobuf } from "@sieve/proto";
import type { OtlpLogRecord, OtlpLogs } from "@sieve/proto";
import { afterEach, describe, expect, it } from "vitest";
import { readUntil, startDistributor, testConfig } from "./harness.test-helper.js";
import type { Harness } from "./harness.test-helper.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const nowNs = () => BigInt(Date.now()) * 1_000_000n;

const record = (line: string, over: Partial<OtlpLogRecord> = {}): OtlpLogRecord => ({
  timeUnixNano: nowNs(),
  observedTimeUnixNano: 0n,
  severityNumber: 9,
  severityText: "INFO",
  body: { kind: "string", value: line },
  attributes: [{ key: "http.method", value: { kind: "string", value: "GET" } }],
  droppedAttributesCount: 0,
  flags: 0,
  traceId: Uint8Array.from(Buffer.from("4bf92f3577b34da6a3ce929d0e0e4736", "hex")),
  spanId: Uint8Array.from(Buffer.from("00f067aa0ba902b7", "hex")),
  eventName: "",
  ...over,
});

const request = (records: OtlpLogRecord[]): OtlpLogs => ({
  resourceLogs: [
    {
      resource: {
        attributes: [{ key: "service.name", value: { kind: "string", value: "checkout" } }],
        droppedAttributesCount: 0,
      },
      scopeLogs: [
        {
          scope: { name: "lib", version: "", attributes: [], droppedAttributesCount: 0 },
          logRecords: records,
        },
      ],
    },
  ],
});

/** The same request in OTLP/JSON. */
function json(records: { line: string; time: bigint }[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "checkout" } }] },
        scopeLogs: [
          {
            scope: { name: "lib" },
            logRecords: records.map((r) => ({
              timeUnixNano: r.time.toString(),
              severityNumber: 9,
              severityText: "INFO",
              body: { stringValue: r.line },
              attributes: [{ key: "http.method", value: { stringValue: "GET" } }],
              traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
              spanId: "00f067aa0ba902b7",
            })),
          },
        ],
      },
    ],
  });
}

async function post(
  body: Uint8Array | string,
  headers: Record<string, string>,
): Promise<{ status: number; type: string; bytes: Uint8Array }> {
  const res = await fetch(`${h!.url}/otlp/v1/logs`, { method: "POST", headers, body });
  return {
    status: res.status,
    type: res.headers.get("content-type") ?? "",
    bytes: new Uint8Array(await res.arrayBuffer()),
  };
}

const PROTOBUF = { "content-type": "application/x-protobuf" };
const JSON_TYPE = { "content-type": "application/json" };
const text = (b: Uint8Array) => Buffer.from(b).toString("utf8");

describe("POST /otlp/v1/logs", () => {
  it.each([
    ["protobuf", false],
    ["protobuf, gzip", true],
  ])(
    "%s: 200 with an empty response, the records in the queue as Loki maps them",
    async (_n, gz) => {
      h = await startDistributor();
      const bytes = encodeOtlpLogsProtobuf(request([record("one"), record("two")]));
      const res = await post(gz ? gzipSync(bytes) : bytes, {
        ...PROTOBUF,
        ...(gz && { "content-encoding": "gzip" }),
      });
      expect(res.status).toBe(200);
      expect(res.type).toBe("application/x-protobuf");
      expect(decodeOtlpLogsResponse(res.bytes)).toBeUndefined();
      const [r] = await readUntil(h.wal.consumer, (rs) => rs.length === 1);
      expect(r!.labels).toBe('{service_name="checkout"}');
      expect(r!.entries.map((e) => e.line)).toEqual(["one", "two"]);
      expect(r!.entries[0]!.structuredMetadata).toEqual([
        { name: "http_method", value: "GET" },
        { name: "severity_number", value: "9" },
        { name: "severity_text", value: "INFO" },
        { name: "trace_id", value: "4bf92f3577b34da6a3ce929d0e0e4736" },
        { name: "span_id", value: "00f067aa0ba902b7" },
        { name: "scope_name", value: "lib" },
      ]);
    },
  );

  it("JSON: 200 with {} and the same records", async () => {
    h = await startDistributor();
    const res = await post(json([{ line: "one", time: nowNs() }]), JSON_TYPE);
    expect([res.status, res.type, text(res.bytes)]).toEqual([
      200,
      "application/json; charset=utf-8",
      "{}",
    ]);
    const [r] = await readUntil(h.wal.consumer, (rs) => rs.length === 1);
    expect(r!.labels).toBe('{service_name="checkout"}');
    expect(r!.entries[0]!.structuredMetadata).toContainEqual({
      name: "trace_id",
      value: "4bf92f3577b34da6a3ce929d0e0e4736",
    });
  });

  it("a partial success: 200, the refused count and why, the rest stored", async () => {
    h = await startDistributor();
    const old = { timeUnixNano: 1_000_000_000n };
    const res = await post(
      encodeOtlpLogsProtobuf(
        request([record("fresh"), record("stale", old), record("stale", old)]),
      ),
      PROTOBUF,
    );
    expect(res.status).toBe(200);
    const partial = decodeOtlpLogsResponse(res.bytes)!;
    expect(partial.rejectedLogRecords).toBe(2);
    expect(partial.errorMessage).toContain("has timestamp too old");
    const [r] = await readUntil(h.wal.consumer, (rs) => rs.length === 1);
    expect(r!.entries.map((e) => e.line)).toEqual(["fresh"]);
    const js = await post(
      json([
        { line: "fresh", time: nowNs() },
        { line: "stale", time: 1n },
      ]),
      JSON_TYPE,
    );
    expect(js.status).toBe(200);
    expect(JSON.parse(text(js.bytes))).toEqual({
      partialSuccess: {
        rejectedLogRecords: "1",
        errorMessage: expect.stringContaining("has timestamp too old") as string,
      },
    });
  });

  /** A refusal's Status, from either encoding. */
  const status = (res: { bytes: Uint8Array; type: string }) =>
    res.type.startsWith("application/json")
      ? (JSON.parse(text(res.bytes)) as { code: number; message: string })
      : decodeOtlpStatus(res.bytes);

  it.each<[string, () => [Uint8Array | string, Record<string, string>], number, number, RegExp]>([
    [
      "every record refused",
      () => [encodeOtlpLogsProtobuf(request([record("stale", { timeUnixNano: 1n })])), PROTOBUF],
      400,
      3,
      /timestamp too old/,
    ],
    [
      "malformed protobuf",
      () => [Uint8Array.of(0x0a, 0xff), PROTOBUF],
      400,
      3,
      /malformed protobuf/,
    ],
    ["malformed JSON", () => ["{", JSON_TYPE], 400, 3, /JSON/],
    [
      "a JSON trace id of 3 bytes",
      () => ['{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"010203"}]}]}]}', JSON_TYPE],
      400,
      3,
      /logRecords\[0\]\.traceId: expected 32 hex digits/,
    ],
    [
      "a gzip body that does not inflate",
      () => ["nope", { ...PROTOBUF, "content-encoding": "gzip" }],
      400,
      3,
      /gzip/,
    ],
    ["another content type", () => ["x", { "content-type": "text/plain" }], 415, 3, /text\/plain/],
    ["another encoding", () => ["x", { ...PROTOBUF, "content-encoding": "br" }], 415, 3, /br/],
  ])("%s: %d and a Status", async (_name, make, code, grpc, message) => {
    h = await startDistributor();
    const [body, headers] = make();
    const res = await post(body, headers);
    expect(res.status).toBe(code);
    const s = status(res);
    expect(s.code).toBe(grpc);
    expect(s.message).toMatch(message);
  });

  it("413 for a gzip bomb, stopped at maxDecompressedBytes without inflating the rest", async () => {
    h = await startDistributor({ config: testConfig({ maxDecompressedBytes: 1 << 20 }) });
    const bomb = gzipSync(Buffer.alloc(64 << 20));
    expect(bomb.length).toBeLessThan(128 << 10);
    const res = await post(bomb, { ...PROTOBUF, "content-encoding": "gzip" });
    expect(res.status).toBe(413);
    expect(status(res)).toMatchObject({
      code: 8,
      message: expect.stringMatching(/decompressed/) as string,
    });
  });

  it("503 (retryable) with a Status when the queue cannot store the push", async () => {
    h = await startDistributor({
      queue: {
        partitions: 4,
        append: () => Promise.reject(new Error("disk full")),
        close: () => Promise.resolve(),
      },
    });
    const res = await post(encodeOtlpLogsProtobuf(request([record("x")])), PROTOBUF);
    expect(res.status).toBe(503);
    expect(status(res)).toMatchObject({
      code: 14,
      message: expect.stringMatching(/disk full/) as string,
    });
  });

  it("413 for a body past maxBodyBytes, 429 (retryable) past the tenant's rate, 401 without a tenant", async () => {
    h = await startDistributor({
      config: testConfig(
        { maxBodyBytes: 2048, authEnabled: true },
        { ingestionRateBytes: 10, ingestionBurstBytes: 10 },
      ),
    });
    const tenant = { "x-scope-orgid": "team-a" };
    const big = await post(new Uint8Array(4096), { ...PROTOBUF, ...tenant });
    expect([big.status, status(big).code]).toEqual([413, 8]);
    const limited = await post(encodeOtlpLogsProtobuf(request([record("a line of some size")])), {
      ...PROTOBUF,
      ...tenant,
    });
    expect(limited.status).toBe(429);
    expect(status(limited)).toMatchObject({
      code: 8,
      message: expect.stringMatching(/rate limit/) as string,
    });
    const anonymous = await post(encodeOtlpLogsProtobuf(request([record("x")])), PROTOBUF);
    expect([anonymous.status, status(anonymous).message]).toEqual([401, "no org id"]);
  });
});
