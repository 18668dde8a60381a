import protobuf from "protobufjs";
import { describe, expect, test } from "vitest";
import { ProtoError } from "./errors.js";
import {
  decodeSampleRequest,
  decodeSampleResponse,
  encodeSampleRequest,
  encodeSampleResponse,
  MAX_SELECTOR_LENGTH,
  decodeQueryRequest,
  decodeQueryResponse,
  decodeSeriesRequest,
  decodeSeriesResponse,
  decodeTailRequest,
  encodeQueryRequest,
  encodeQueryResponse,
  encodeSeriesRequest,
  encodeSeriesResponse,
  encodeTailRequest,
  decodeStatsRequest,
  decodeStatsResponse,
  decodeVolumeRequest,
  decodeVolumeResponse,
  encodeStatsRequest,
  encodeStatsResponse,
  encodeVolumeRequest,
  encodeVolumeResponse,
  decodePatternsRequest,
  decodePatternsResponse,
  encodePatternsRequest,
  encodePatternsResponse,
} from "./ingester.js";
import type {
  IngesterPatternsRequest,
  IngesterQueryRequest,
  IngesterStream,
  PatternSeries,
} from "./ingester.js";

const request: IngesterQueryRequest = {
  tenant: "team-a",
  selector: `{app="api"} |= "x" | json`,
  start: -(2n ** 63n),
  end: 1_714_521_600_123_456_789n,
  direction: "backward",
  limit: 5000,
  maxBytes: 2 ** 40,
};

const streams: IngesterStream[] = [
  {
    labels: `{app="api", pod="p-1"}`,
    labelMap: { app: "api", pod: "p-1" },
    fingerprint: 2n ** 64n - 1n,
    entries: [
      // Labels as the stream's overlaid with the metadata: not sent.
      { timestamp: 1n, line: "a", structuredMetadata: { trace_id: "t-1" } },
      // Labels of its own, after a parser.
      {
        timestamp: -5n,
        line: "line_format made this",
        structuredMetadata: {},
        labels: { app: "api", pod: "p-1", level: "error" },
      },
      // `| drop` may remove every label: an empty set, yet present.
      { timestamp: 7n, line: "", structuredMetadata: {}, labels: {} },
    ],
  },
  { labels: "{}", labelMap: {}, fingerprint: 0n, entries: [] },
];

describe("ingester messages", () => {
  test("a query request round-trips, 64-bit values intact; absent bounds stay absent", () => {
    expect(decodeQueryRequest(encodeQueryRequest(request))).toEqual(request);
    const unbounded: IngesterQueryRequest = {
      tenant: request.tenant,
      selector: request.selector,
      start: request.start,
      end: request.end,
      direction: request.direction,
      limit: request.limit,
    };
    expect(decodeQueryRequest(encodeQueryRequest(unbounded))).toEqual(unbounded);
  });

  test("a query response round-trips: present and absent entry labels told apart", () => {
    const back = decodeQueryResponse(encodeQueryResponse(streams));
    expect(back).toEqual(streams);
    expect("labels" in back[0]!.entries[0]!).toBe(false);
    expect(back[0]!.entries[2]!.labels).toEqual({});
  });

  test("series requests and responses round-trip; an empty selector is no selector", () => {
    const req = { tenant: "t", selector: `{a="b"}`, start: 0n, end: 10n };
    expect(decodeSeriesRequest(encodeSeriesRequest(req))).toEqual(req);
    const all = { tenant: "t", start: 0n, end: 10n };
    expect(decodeSeriesRequest(encodeSeriesRequest(all))).toEqual(all);
    const series = [{ labels: `{a="b"}`, fingerprint: 2n ** 63n + 1n }];
    expect(decodeSeriesResponse(encodeSeriesResponse(series))).toEqual(series);
  });

  // What the grammar allows but the API does not, written with field numbers alone.
  const root = protobuf.Root.fromJSON({
    nested: {
      Q: {
        fields: {
          tenant: { type: "string", id: 1 },
          selector: { type: "string", id: 2 },
          start: { type: "int64", id: 3 },
          end: { type: "int64", id: 4 },
          direction: { type: "uint32", id: 5 },
          maxBytes: { type: "uint64", id: 7 },
        },
      },
      P: { fields: { name: { type: "string", id: 1 }, value: { type: "string", id: 2 } } },
      E: { fields: { structuredMetadata: { rule: "repeated", type: "P", id: 3 } } },
      S: { fields: { entries: { rule: "repeated", type: "E", id: 3 } } },
      R: { fields: { streams: { rule: "repeated", type: "S", id: 1 } } },
    },
  });
  const raw = (type: string, obj: object) => root.lookupType(type).encode(obj).finish();
  const ok = { tenant: "t", selector: '{a="b"}', start: 1, end: 2 };

  test.each<[string, () => void, string]>([
    ["not protobuf", () => decodeQueryRequest(Uint8Array.of(0x0a, 0xff)), "malformed protobuf"],
    ["no tenant", () => decodeQueryRequest(raw("Q", { ...ok, tenant: "" })), "tenant"],
    ["no selector", () => decodeQueryRequest(raw("Q", { ...ok, selector: "" })), "selector"],
    [
      "a selector too long",
      () => decodeQueryRequest(raw("Q", { ...ok, selector: "x".repeat(MAX_SELECTOR_LENGTH + 1) })),
      "selector longer",
    ],
    ["end before start", () => decodeQueryRequest(raw("Q", { ...ok, start: 5 })), "before start"],
    [
      "an unknown direction",
      () => decodeQueryRequest(raw("Q", { ...ok, direction: 2 })),
      "direction 2",
    ],
    [
      "max_bytes past 2^53",
      () => decodeQueryRequest(raw("Q", { ...ok, maxBytes: "18014398509481984" })),
      "max_bytes",
    ],
    [
      "a series request ending before it starts",
      () => decodeSeriesRequest(raw("Q", { tenant: "t", start: 2, end: 1 })),
      "before start",
    ],
    [
      "a metadata pair without a name",
      () =>
        decodeQueryResponse(
          raw("R", { streams: [{ entries: [{ structuredMetadata: [{ value: "v" }] }] }] }),
        ),
      "without a name",
    ],
  ])("refuses %s", (_name, decode, message) => {
    let error: unknown;
    try {
      decode();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtoError);
    expect((error as ProtoError).code).toBe("malformed_protobuf");
    expect((error as Error).message).toContain(message);
  });

  test("a truncated answer in a Buffer is refused, as in a Uint8Array", () => {
    const bytes = encodeQueryResponse(streams);
    const cut = bytes.subarray(0, bytes.length - 3);
    expect(() => decodeQueryResponse(Buffer.from(cut))).toThrow(ProtoError);
    expect(() => decodeSeriesResponse(Buffer.from(Uint8Array.of(0x0a, 0x05)))).toThrow(ProtoError);
  });
});

describe("tail request", () => {
  test("carries the tenant and the selector, and is refused without them", () => {
    const req = { tenant: "t1", selector: '{app="api"} |= "x"' };
    expect(decodeTailRequest(encodeTailRequest(req))).toEqual(req);
    expect(() => decodeTailRequest(encodeTailRequest({ tenant: "", selector: '{a="b"}' }))).toThrow(
      /tenant is empty/,
    );
    expect(() => decodeTailRequest(encodeTailRequest({ tenant: "t", selector: "" }))).toThrow(
      /selector is empty/,
    );
  });
});

describe("ingester volume and stats messages", () => {
  test("volume requests and responses round-trip", () => {
    const req = {
      tenant: "t",
      selector: `{app=~".+"}`,
      start: -5n,
      end: 3600n * 10n ** 9n,
      step: 60n * 10n ** 9n,
      targetLabels: ["service_name", "pod"],
      aggregateBy: "labels" as const,
      maxSeries: 1000,
    };
    expect(decodeVolumeRequest(encodeVolumeRequest(req))).toEqual(req);
    const any = { ...req, step: 0n, targetLabels: [], aggregateBy: "series" as const };
    const noSelector: typeof any = { ...any };
    delete (noSelector as { selector?: string }).selector;
    expect(decodeVolumeRequest(encodeVolumeRequest(noSelector))).toEqual(noSelector);
    const volumes = [
      { name: `{app="api"}`, bucket: 0, bytes: 2 ** 53 - 1 },
      { name: "app", bucket: 11_000, bytes: 0 },
    ];
    expect(decodeVolumeResponse(encodeVolumeResponse(volumes))).toEqual(volumes);
  });

  test("stats requests and responses round-trip", () => {
    const req = { tenant: "t", selector: `{a="b"}`, start: 0n, end: 10n };
    expect(decodeStatsRequest(encodeStatsRequest(req))).toEqual(req);
    const stats = { streams: 2, chunks: 3, bytes: 2 ** 40, entries: 7 };
    expect(decodeStatsResponse(encodeStatsResponse(stats))).toEqual(stats);
  });

  const base = {
    tenant: "t",
    start: 0n,
    end: 100n,
    step: 0n,
    targetLabels: [],
    aggregateBy: "series" as const,
    maxSeries: 10,
  };
  test.each<[string, () => unknown, string]>([
    [
      "a volume request without a tenant",
      () => decodeVolumeRequest(encodeVolumeRequest({ ...base, tenant: "" })),
      "tenant",
    ],
    [
      "a negative step",
      () => decodeVolumeRequest(encodeVolumeRequest({ ...base, step: -1n })),
      "step -1",
    ],
    [
      "more buckets than Loki's points",
      () => decodeVolumeRequest(encodeVolumeRequest({ ...base, end: 20_000n, step: 1n })),
      "buckets",
    ],
    [
      "no series allowed",
      () => decodeVolumeRequest(encodeVolumeRequest({ ...base, maxSeries: 0 })),
      "max_series",
    ],
    [
      "end before start",
      () => decodeStatsRequest(encodeStatsRequest({ tenant: "t", start: 2n, end: 1n })),
      "before start",
    ],
    [
      "bytes past 2^53",
      () =>
        decodeStatsResponse(
          encodeStatsResponse({ streams: 0, chunks: 0, bytes: 2 ** 53 + 2, entries: 0 }),
        ),
      "bytes",
    ],
  ])("refuses %s", (_name, decode, message) => {
    expect(decode).toThrow(ProtoError);
    expect(decode).toThrow(message);
  });
});

describe("patterns", () => {
  const req: IngesterPatternsRequest = {
    tenant: "team-a",
    selector: `{app="api"}`,
    start: 1_700_000_000_000_000_000n,
    end: 1_700_000_600_000_000_000n,
    stepMs: 60_000,
  };

  test("requests and responses round-trip", () => {
    expect(decodePatternsRequest(encodePatternsRequest(req))).toEqual(req);
    const series: PatternSeries[] = [
      {
        pattern: "level=info msg=<_>",
        level: "info",
        samples: [
          [1_700_000_000, 3],
          [1_700_000_060, 1],
        ],
      },
      { pattern: "<_> failed", level: "unknown", samples: [] },
    ];
    expect(decodePatternsResponse(encodePatternsResponse(series))).toEqual(series);
  });

  test.each<[string, IngesterPatternsRequest, string]>([
    ["no tenant", { ...req, tenant: "" }, "tenant"],
    ["no selector", { ...req, selector: "" }, "selector is empty"],
    ["no step", { ...req, stepMs: 0 }, "step_ms 0"],
    ["end before start", { ...req, end: 1n }, "before start"],
  ])("refuses %s", (_name, bad, message) => {
    expect(() => decodePatternsRequest(encodePatternsRequest(bad))).toThrow(message);
  });
});

describe("sample call (pushed-down metric queries)", () => {
  test("request and response round-trip, parts with and without a chunk", () => {
    const req = {
      tenant: "t",
      query: 'sum by (level) (count_over_time({app="a"} | logfmt [1m]))',
      start: 1_700_000_000_000_000_000n,
      end: 1_700_000_060_000_000_000n,
      step: 60_000_000_000n,
      maxSamples: 1000,
    };
    expect(decodeSampleRequest(encodeSampleRequest(req))).toEqual(req);
    // A read across tenants labels every stream with its tenant.
    const labelled = { ...req, streamLabels: { __tenant_id__: "a" } };
    expect(decodeSampleRequest(encodeSampleRequest(labelled))).toEqual(labelled);
    const parts = [
      {
        chunk: {
          fingerprint: 0xfedcba9876543210n,
          from: 1_700_000_000_000_000_001n,
          through: 1_700_000_059_000_000_000n,
          checksum: 0xffffffff,
        },
        series: [
          {
            agg: 0,
            labels: { level: "info" },
            lo: 3,
            n: [2, 0, 5],
            a: [1.5, 0, -2],
            b: [],
            ts: [],
            v: [],
          },
        ],
      },
      {
        series: [
          { agg: 1, labels: {}, lo: 0, n: [], a: [], b: [], ts: [12.5, 1e12], v: [NaN, Infinity] },
        ],
      },
    ];
    expect(decodeSampleResponse(encodeSampleResponse(parts))).toEqual(parts);
  });

  test("decoding refuses an empty query and a negative step, naming them", () => {
    const base = { tenant: "t", query: "x", start: 0n, end: 1n, step: 0n };
    expect(() => decodeSampleRequest(encodeSampleRequest({ ...base, query: "" }))).toThrow(
      /query is empty/,
    );
    expect(() => decodeSampleRequest(encodeSampleRequest({ ...base, step: -1n }))).toThrow(
      /step -1/,
    );
    expect(() => decodeSampleRequest(encodeSampleRequest({ ...base, tenant: "" }))).toThrow(
      ProtoError,
    );
  });
});

describe("delete requests carried by queries (query-time filtering)", () => {
  const deletes = [
    {
      query: '{app="a"} |= "secret"',
      start: 1_700_000_000_000_000_000n,
      end: 1_700_000_001_000_000_000n,
    },
    { query: '{app="b"}', start: 0n, end: 5n },
  ];

  test("a query request and a sample request carry them both ways", () => {
    const q: IngesterQueryRequest = { ...request, deletes };
    expect(decodeQueryRequest(encodeQueryRequest(q))).toEqual(q);
    const s = {
      tenant: "t",
      query: 'count_over_time({app="a"}[1m])',
      start: 1n,
      end: 2n,
      step: 1n,
      deletes,
    };
    expect(decodeSampleRequest(encodeSampleRequest(s))).toEqual(s);
    // None: the field is absent, as before it existed.
    expect(decodeQueryRequest(encodeQueryRequest(request))).not.toHaveProperty("deletes");
  });

  test.each([
    ["an empty selector", { query: "", start: 0n, end: 1n }, "a delete without a selector"],
    ["end before start", { query: '{a="b"}', start: 5n, end: 1n }, "delete end 1 before start 5"],
  ])("refuses %s", (_name, bad, message) => {
    expect(() => decodeQueryRequest(encodeQueryRequest({ ...request, deletes: [bad] }))).toThrow(
      message,
    );
  });
});
