import { describe, expect, test } from "vitest";
import { ProtoError } from "./errors.js";
import {
  MAX_OTLP_VALUE_DEPTH,
  OtlpJsonError,
  decodeOtlpLogsJson,
  decodeOtlpLogsProtobuf,
  decodeOtlpLogsResponse,
  encodeOtlpLogsJson,
  encodeOtlpLogsProtobuf,
  encodeOtlpLogsResponse,
  otlpLogsResponseJson,
} from "./otlp.js";
import type { OtlpLogRecord, OtlpLogs, OtlpValue } from "./otlp.js";

const record = (over: Partial<OtlpLogRecord> = {}): OtlpLogRecord => ({
  timeUnixNano: 1_714_521_600_123_456_789n,
  observedTimeUnixNano: 0n,
  severityNumber: 9,
  severityText: "INFO",
  body: { kind: "string", value: "hello" },
  attributes: [],
  droppedAttributesCount: 0,
  flags: 1,
  traceId: Uint8Array.from(Buffer.from("4bf92f3577b34da6a3ce929d0e0e4736", "hex")),
  spanId: Uint8Array.from(Buffer.from("00f067aa0ba902b7", "hex")),
  eventName: "",
  ...over,
});

const every: OtlpValue = {
  kind: "kvlist",
  values: [
    { key: "s", value: { kind: "string", value: "✓" } },
    { key: "b", value: { kind: "bool", value: true } },
    { key: "i", value: { kind: "int", value: -(2n ** 63n) } },
    { key: "d", value: { kind: "double", value: 1.5 } },
    { key: "y", value: { kind: "bytes", value: Uint8Array.of(0, 255) } },
    {
      key: "a",
      value: { kind: "array", values: [{ kind: "int", value: 7n }, { kind: "empty" }] },
    },
    { key: "e", value: { kind: "empty" } },
  ],
};

const logs: OtlpLogs = {
  resourceLogs: [
    {
      resource: {
        attributes: [{ key: "service.name", value: { kind: "string", value: "shop" } }],
        droppedAttributesCount: 2,
      },
      scopeLogs: [
        {
          scope: { name: "lib", version: "1.0", attributes: [], droppedAttributesCount: 0 },
          logRecords: [
            record(),
            record({
              body: every,
              attributes: [{ key: "x", value: every }],
              traceId: new Uint8Array(0),
            }),
          ],
        },
      ],
    },
  ],
};

describe("OTLP protobuf", () => {
  test("a request round-trips, every value kind and 64-bit field intact", () => {
    expect(decodeOtlpLogsProtobuf(encodeOtlpLogsProtobuf(logs), 10_000)).toEqual(logs);
  });

  test.each<[string, Uint8Array, string]>([
    ["not protobuf", Uint8Array.of(0x0a, 0xff), "runs past"],
    ["a wire type 7", Uint8Array.of(0x0f), "wire type 7"],
    [
      "a trace id of 3 bytes",
      encodeOtlpLogsProtobuf({
        resourceLogs: [
          {
            resource: { attributes: [], droppedAttributesCount: 0 },
            scopeLogs: [
              {
                scope: { name: "", version: "", attributes: [], droppedAttributesCount: 0 },
                logRecords: [record({ traceId: Uint8Array.of(1, 2, 3) })],
              },
            ],
          },
        ],
      }),
      "trace_id of 3 bytes",
    ],
  ])("refuses %s", (_name, bytes, message) => {
    let error: unknown;
    try {
      decodeOtlpLogsProtobuf(bytes, 10_000);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtoError);
    expect((error as ProtoError).code).toBe("malformed_protobuf");
    expect((error as Error).message).toContain(message);
  });

  test("counts messages before decoding, and bounds nesting", () => {
    const bytes = encodeOtlpLogsProtobuf(logs);
    expect(() => decodeOtlpLogsProtobuf(bytes, 5)).toThrow(
      expect.objectContaining({ code: "too_many_messages" }) as Error,
    );
    // In arrays (two messages a level), and in maps (three: past the 100 nested messages
    // protobufjs encodes by default).
    const inArray = (v: OtlpValue): OtlpValue => ({ kind: "array", values: [v] });
    const inMap = (v: OtlpValue): OtlpValue => ({
      kind: "kvlist",
      values: [{ key: "k", value: v }],
    });
    for (const wrap of [inArray, inMap]) {
      let deep: OtlpValue = { kind: "string", value: "x" };
      for (let i = 0; i < MAX_OTLP_VALUE_DEPTH + 5; i++) deep = wrap(deep);
      const nested = encodeOtlpLogsProtobuf({
        resourceLogs: [
          {
            resource: { attributes: [], droppedAttributesCount: 0 },
            scopeLogs: [
              {
                scope: { name: "", version: "", attributes: [], droppedAttributesCount: 0 },
                logRecords: [record({ body: deep })],
              },
            ],
          },
        ],
      });
      expect(() => decodeOtlpLogsProtobuf(nested, 10_000)).toThrow(/nested deeper/);
    }
  });

  test("responses: empty for a full success, partial_success otherwise, both encodings", () => {
    expect(encodeOtlpLogsResponse()).toHaveLength(0);
    expect(otlpLogsResponseJson()).toBe("{}");
    const partial = { rejectedLogRecords: 3, errorMessage: "too old" };
    expect(decodeOtlpLogsResponse(encodeOtlpLogsResponse(partial))).toEqual(partial);
    expect(JSON.parse(otlpLogsResponseJson(partial))).toEqual({
      partialSuccess: { rejectedLogRecords: "3", errorMessage: "too old" },
    });
  });
});

describe("OTLP JSON", () => {
  test("the specification's example shape: hex ids, string int64, camelCase, every value kind", () => {
    const doc = {
      resourceLogs: [
        {
          resource: {
            attributes: [{ key: "service.name", value: { stringValue: "shop" } }],
            droppedAttributesCount: 2,
          },
          scopeLogs: [
            {
              scope: { name: "lib", version: "1.0" },
              logRecords: [
                {
                  timeUnixNano: "1714521600123456789",
                  severityNumber: 9,
                  severityText: "INFO",
                  body: { stringValue: "hello" },
                  flags: 1,
                  traceId: "4BF92F3577B34DA6A3CE929D0E0E4736",
                  spanId: "00f067aa0ba902b7",
                },
                {
                  timeUnixNano: 1714521600123456789n.toString(),
                  severityNumber: "9",
                  severityText: "INFO",
                  body: {
                    kvlistValue: {
                      values: [
                        { key: "s", value: { stringValue: "✓" } },
                        { key: "b", value: { boolValue: true } },
                        { key: "i", value: { intValue: "-9223372036854775808" } },
                        { key: "d", value: { doubleValue: 1.5 } },
                        { key: "y", value: { bytesValue: "AP8=" } },
                        {
                          key: "a",
                          value: { arrayValue: { values: [{ intValue: 7 }, {}] } },
                        },
                        { key: "e", value: {} },
                      ],
                    },
                  },
                  attributes: [
                    {
                      key: "x",
                      value: {
                        kvlistValue: {
                          values: [
                            { key: "s", value: { stringValue: "✓" } },
                            { key: "b", value: { boolValue: true } },
                            { key: "i", value: { intValue: "-9223372036854775808" } },
                            { key: "d", value: { doubleValue: 1.5 } },
                            { key: "y", value: { bytesValue: "AP8=" } },
                            {
                              key: "a",
                              value: { arrayValue: { values: [{ intValue: "7" }, {}] } },
                            },
                            { key: "e" },
                          ],
                        },
                      },
                    },
                  ],
                  flags: 1,
                  spanId: "00f067aa0ba902b7",
                },
              ],
            },
          ],
        },
      ],
    };
    expect(decodeOtlpLogsJson(doc)).toEqual(logs);
  });

  test("what encodeOtlpLogsJson writes decodes to the same request", () => {
    expect(decodeOtlpLogsJson(JSON.parse(encodeOtlpLogsJson(logs)))).toEqual(logs);
  });

  const wrap = (r: object) => ({ resourceLogs: [{ scopeLogs: [{ logRecords: [r] }] }] });
  test.each<[string, unknown, string]>([
    ["a string document", "x", "$: expected an object"],
    ["resourceLogs not an array", { resourceLogs: {} }, "$.resourceLogs: expected an array"],
    ["a trace id of 3 bytes", wrap({ traceId: "010203" }), "traceId: expected 32 hex digits"],
    ["a span id with a non-hex digit", wrap({ spanId: "zz00000000000000" }), "spanId"],
    ["a fractional timestamp", wrap({ timeUnixNano: 1.5 }), "timeUnixNano: expected an integer"],
    ["a negative timestamp", wrap({ timeUnixNano: "-1" }), "timeUnixNano: -1 is out of range"],
    [
      "an int64 past its range",
      wrap({ body: { intValue: "9223372036854775808" } }),
      "out of range",
    ],
    ["two values at once", wrap({ body: { stringValue: "a", boolValue: true } }), "more than one"],
    ["an unknown value field", wrap({ body: { fooValue: 1 } }), "unknown value field"],
    ["a bool as a string", wrap({ body: { boolValue: "true" } }), "expected a boolean"],
    ["bytes that are not base64", wrap({ body: { bytesValue: "!!" } }), "expected base64"],
    ["attributes not an array", wrap({ attributes: {} }), "attributes: expected an array"],
  ])("refuses %s, naming the path", (_name, doc, message) => {
    expect(() => decodeOtlpLogsJson(doc)).toThrow(OtlpJsonError);
    expect(() => decodeOtlpLogsJson(doc)).toThrow(message);
  });

  test("bounds the nesting of values", () => {
    let deep: unknown = { stringValue: "x" };
    for (let i = 0; i < MAX_OTLP_VALUE_DEPTH + 2; i++) deep = { arrayValue: { values: [deep] } };
    expect(() => decodeOtlpLogsJson(wrap({ body: deep }))).toThrow(/nested deeper/);
  });
});
