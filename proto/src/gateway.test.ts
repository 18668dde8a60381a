import type { BloomTest } from "@sieve/logql";
import protobuf from "protobufjs";
import { describe, expect, test } from "vitest";
import { ProtoError } from "./errors.js";
import {
  MAX_TEST_DEPTH,
  MAX_TEST_NODES,
  decodeFilterRequest,
  decodeFilterResponse,
  encodeFilterRequest,
  encodeFilterResponse,
} from "./gateway.js";
import type { FilterRequest, FilterResponse } from "./gateway.js";

const chunk = (from: bigint, prefixed: boolean) => ({
  from,
  through: from + 999n,
  checksum: 0xfedcba98,
  bytes: 1234,
  entries: 56,
  prefixed,
});

const request: FilterRequest = {
  tenant: "team-a",
  from: -5n,
  through: 1_714_521_600_000_000_000n,
  test: {
    kind: "and",
    children: [
      { kind: "kv", name: "trace_id", value: "abc" },
      {
        kind: "or",
        children: [
          { kind: "key", name: "user" },
          { kind: "kv", name: "level", value: "" },
          { kind: "line", literal: "GET /api ✓" },
        ],
      },
    ],
  },
  series: [
    {
      fingerprint: 0xffff_ffff_ffff_fffen,
      labels: '{app="api"}',
      bloom: { kind: "block", key: "team-a/blooms/x", offset: 2 ** 40, length: 4096 },
      chunks: [chunk(1_714_521_600_123_456_789n, true), chunk(-(2n ** 63n), false)],
    },
    {
      fingerprint: 1n,
      labels: '{app="db"}',
      bloom: { kind: "missing", reason: "too_large" },
      chunks: [chunk(7n, false)],
    },
  ],
};

describe("gateway messages", () => {
  test("a request round-trips, 64-bit values and the test tree intact", () => {
    expect(decodeFilterRequest(encodeFilterRequest(request))).toEqual(request);
  });

  test("a response round-trips, stats and reasons intact", () => {
    const response: FilterResponse = {
      series: [{ fingerprint: 2n ** 64n - 1n, chunks: [chunk(3n, true)] }],
      stats: {
        series: 5,
        seriesSkipped: 2,
        chunks: 40,
        chunksPruned: 30,
        chunksPrunedByLine: 12,
        blocksRead: 3,
        cacheHits: 1,
        failedOpen: { missing_bloom: 4, timeout: 2 },
      },
    };
    expect(decodeFilterResponse(encodeFilterResponse(response))).toEqual(response);
  });

  test("explain and the chunk verdicts round-trip; without them nothing is added", () => {
    const explained = { ...request, explain: true };
    expect(decodeFilterRequest(encodeFilterRequest(explained))).toEqual(explained);
    expect(decodeFilterRequest(encodeFilterRequest(request))).not.toHaveProperty("explain");
    const response: FilterResponse = {
      series: [],
      stats: decodeFilterResponse(new Uint8Array(0)).stats,
      verdicts: [
        {
          fingerprint: 2n ** 64n - 1n,
          from: -(2n ** 63n),
          through: 7n,
          checksum: 0xfedcba98,
          outcome: "series",
          test: 'trace_id="abc"',
        },
        { fingerprint: 1n, from: 1n, through: 2n, checksum: 3, outcome: "chunk", test: '|= "x"' },
        {
          fingerprint: 1n,
          from: 3n,
          through: 4n,
          checksum: 5,
          outcome: "failed_open",
          reason: "timeout",
        },
      ],
    };
    expect(decodeFilterResponse(encodeFilterResponse(response))).toEqual(response);
    const plain = { series: response.series, stats: response.stats };
    expect(decodeFilterResponse(encodeFilterResponse(plain))).not.toHaveProperty("verdicts");
  });

  test("a verdict without an outcome is refused", () => {
    const bytes = encodeFilterResponse({
      series: [],
      stats: decodeFilterResponse(new Uint8Array(0)).stats,
      verdicts: [{ fingerprint: 1n, from: 1n, through: 2n, checksum: 3, outcome: "chunk" }],
    });
    // Field 3 (verdicts), field 5 (outcome) = 2 → 0: the last two bytes of the message.
    const zeroed = Uint8Array.from(bytes);
    expect(zeroed[zeroed.length - 2]).toBe((5 << 3) | 0);
    zeroed[zeroed.length - 1] = 0;
    expect(() => decodeFilterResponse(zeroed)).toThrow(/verdict 0: outcome 0/);
  });

  test("an absent test is `all` and an empty response has zero stats", () => {
    const bytes = encodeFilterRequest({ ...request, test: { kind: "all" }, series: [] });
    expect(decodeFilterRequest(bytes).test).toEqual({ kind: "all" });
    expect(decodeFilterResponse(new Uint8Array(0))).toEqual({
      series: [],
      stats: {
        series: 0,
        seriesSkipped: 0,
        chunks: 0,
        chunksPruned: 0,
        chunksPrunedByLine: 0,
        blocksRead: 0,
        cacheHits: 0,
        failedOpen: {},
      },
    });
  });

  const deep = (n: number): BloomTest =>
    n === 0 ? { kind: "key", name: "a" } : { kind: "and", children: [deep(n - 1)] };
  const wide: BloomTest = {
    kind: "or",
    children: Array.from({ length: MAX_TEST_NODES }, (_, i) => ({ kind: "key", name: `k${i}` })),
  };
  const root = protobuf.Root.fromJSON({
    nested: {
      T: {
        fields: {
          kind: { type: "uint32", id: 1 },
          name: { type: "string", id: 2 },
          children: { rule: "repeated", type: "T", id: 4 },
        },
      },
      R: { fields: { test: { type: "T", id: 4 }, series: { rule: "repeated", type: "S", id: 5 } } },
      S: {
        fields: { bloom: { type: "L", id: 3 } },
      },
      L: { fields: { block: { type: "B", id: 1 } } },
      B: { fields: { key: { type: "string", id: 1 }, offset: { type: "uint64", id: 2 } } },
    },
  });
  const raw = (obj: object) => root.lookupType("R").encode(obj).finish();

  test.each<[string, Uint8Array, string]>([
    ["not protobuf", Uint8Array.of(0x0a, 0xff), "malformed protobuf"],
    ["a tree too deep", encodeFilterRequest({ ...request, test: deep(MAX_TEST_DEPTH) }), "deeper"],
    ["a tree too large", encodeFilterRequest({ ...request, test: wide }), "nodes"],
    ["an unknown kind", raw({ test: { kind: 9 } }), "kind 9"],
    ["a key without a name", raw({ test: { kind: 1 } }), "without a name"],
    ["an `and` without children", raw({ test: { kind: 3 } }), "without children"],
    ["a line test without a literal", raw({ test: { kind: 5 } }), "without a literal"],
    ["a series without a bloom location", raw({ series: [{}] }), "no bloom location"],
    ["a block without a key", raw({ series: [{ bloom: { block: { offset: 1 } } }] }), "key"],
    [
      "an offset past 2^53",
      raw({ series: [{ bloom: { block: { key: "k", offset: "18014398509481984" } } }] }),
      "too large",
    ],
  ])("refuses %s", (_name, bytes, message) => {
    let error: unknown;
    try {
      decodeFilterRequest(bytes);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtoError);
    expect((error as ProtoError).code).toBe("malformed_protobuf");
    expect((error as Error).message).toContain(message);
  });

  test("a truncated field in a Buffer is refused, as in a Uint8Array", () => {
    const bytes = Uint8Array.of(0x0a, 0xff, 0x01);
    expect(() => decodeFilterRequest(Buffer.from(bytes))).toThrow(/index out of range/);
    expect(() => decodeFilterResponse(Buffer.from(Uint8Array.of(0x0a, 0x05)))).toThrow(ProtoError);
  });

  test("a tree nested past the stack is refused, not a crash", () => {
    // 100,000 nested `children` fields (field 4, length-delimited), built back to front
    // in O(n): no encoder recurses that deep.
    const back: number[] = [0x61, 0x01, 0x12, 0x01, 0x08]; // T{kind=1, name="a"}, reversed
    for (let i = 0; i <= 100_000; i++) {
      let n = back.length;
      const varint: number[] = [];
      do {
        varint.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
        n >>>= 7;
      } while (n > 0);
      back.push(...varint.reverse(), (4 << 3) | 2);
    }
    expect(() => decodeFilterRequest(Uint8Array.from(back.reverse()))).toThrow(ProtoError);
  });
});
