import { compress } from "snappyjs";
import { describe, expect, it } from "vitest";
import { encodePushRequest } from "@sieve/proto";
import { DecodeError, decodeJsonPush, decodeProtobufPush } from "./decode.js";

describe("decodeJsonPush", () => {
  it.each<[string, string, unknown]>([
    ["no streams", "{}", []],
    ["null streams", '{"streams": null}', []],
    [
      "two and three elements, {} metadata",
      '{"streams":[{"stream":{"b":"2","a":"1"},"values":[["1","x"],["2","y",{}],["3","z",{"k":"v"}]]}]}',
      [
        {
          labelsText: '{a="1", b="2"}',
          labels: [
            { name: "a", value: "1" },
            { name: "b", value: "2" },
          ],
          entries: [
            { timestampNs: 1n, line: "x", structuredMetadata: [] },
            { timestampNs: 2n, line: "y", structuredMetadata: [] },
            { timestampNs: 3n, line: "z", structuredMetadata: [{ name: "k", value: "v" }] },
          ],
        },
      ],
    ],
    [
      "empty label value dropped, 19-digit timestamp kept exactly",
      '{"streams":[{"stream":{"a":"","b":"x"},"values":[["1767268800123456789","l"]]}]}',
      [
        {
          labelsText: '{b="x"}',
          labels: [{ name: "b", value: "x" }],
          entries: [{ timestampNs: 1767268800123456789n, line: "l", structuredMetadata: [] }],
        },
      ],
    ],
  ])("%s", (_name, text, streams) => {
    expect(decodeJsonPush(text)).toEqual(streams);
  });

  it.each([
    ["not JSON", "{", /JSON/],
    ["array root", "[]", /^\$: expected an object/],
    ["streams not array", '{"streams":1}', /^\$\.streams: expected an array/],
    ["stream not object", '{"streams":[1]}', /^\$\.streams\[0\]: expected an object/],
    ["label value not string", '{"streams":[{"stream":{"a":1}}]}', /\$\.streams\[0\]\.stream\.a/],
    [
      "values not array",
      '{"streams":[{"stream":{"a":"b"},"values":{}}]}',
      /values: expected an array/,
    ],
    [
      "one element",
      '{"streams":[{"values":[["1"]]}]}',
      /values\[0\]: expected \[timestamp, line\]/,
    ],
    ["four elements", '{"streams":[{"values":[["1","a",{},1]]}]}', /values\[0\]/],
    ["numeric timestamp", '{"streams":[{"values":[[1,"a"]]}]}', /values\[0\]\[0\]/],
    ["float timestamp", '{"streams":[{"values":[["1.5","a"]]}]}', /values\[0\]\[0\]/],
    ["out of int64", '{"streams":[{"values":[["9999999999999999999","a"]]}]}', /int64/],
    ["line not string", '{"streams":[{"values":[["1",2]]}]}', /values\[0\]\[1\]/],
    ["metadata array", '{"streams":[{"values":[["1","a",[]]]}]}', /values\[0\]\[2\]/],
    [
      "metadata value number",
      '{"streams":[{"values":[["1","a",{"k":1}]]}]}',
      /values\[0\]\[2\]\.k/,
    ],
  ])("refuses %s", (_name, text, message) => {
    let caught: unknown;
    try {
      decodeJsonPush(text);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(DecodeError);
    expect((caught as DecodeError).code).toBe("malformed_json");
    expect((caught as DecodeError).message).toMatch(message);
  });
});

describe("decodeProtobufPush", () => {
  it("decodes streams, timestamps in ns and structured metadata", () => {
    const body = compress(
      encodePushRequest({
        streams: [
          {
            labels: '{a="b"}',
            entries: [
              {
                timestamp: { seconds: 1_767_268_800, nanos: 123 },
                line: "l",
                structuredMetadata: [{ name: "trace_id", value: "t" }],
              },
            ],
          },
        ],
      }),
    );
    const push = decodeProtobufPush(body, 1 << 20);
    expect(push.streams).toHaveLength(1);
    const stream = push.streams[0]!;
    expect(stream.labels).toBe('{a="b"}');
    expect(stream.timestamps).toEqual([1_767_268_800_000_000_123n]);
    // The line and the pair as ranges of the decompressed body.
    const [lineStart, lineEnd, pairFrom, pairTo] = stream.entries;
    expect(push.bytes.toString("utf8", lineStart, lineEnd)).toBe("l");
    expect([pairFrom, pairTo]).toEqual([0, 1]);
    const [nameStart, nameEnd, valueStart, valueEnd] = stream.pairs;
    expect(push.bytes.toString("utf8", nameStart, nameEnd)).toBe("trace_id");
    expect(push.bytes.toString("utf8", valueStart, valueEnd)).toBe("t");
  });

  it("refuses a push of more messages than its size allows (heap bound)", () => {
    // 10,000 empty entries: 20 KB that would decode to ~2 MB of objects.
    const inner = new Uint8Array(20_000).map((_, i) => (i % 2 === 0 ? 0x12 : 0));
    const body = compress(Uint8Array.from([0x0a, 0xa0, 0x9c, 0x01, ...inner]));
    let caught: unknown;
    try {
      decodeProtobufPush(body, 64 * 1024);
    } catch (error) {
      caught = error;
    }
    expect((caught as DecodeError).code).toBe("too_many_messages");
    expect((caught as DecodeError).message).toMatch(/too many messages: 10001, limit 4096/);
    expect(decodeProtobufPush(body, 1 << 20).streams[0]!.count).toBe(10_000);
  });

  it.each([
    ["a snappy bomb", Uint8Array.from([0xff, 0xff, 0xff, 0x7f, 0x00]), "body_too_large"],
    ["not snappy", Uint8Array.from([0x05, 0xff]), "malformed_protobuf"],
    ["snappy of garbage", compress(Uint8Array.from([0x0a, 0x09, 0xff])), "malformed_protobuf"],
  ])("refuses %s", (_name, body, code) => {
    let caught: unknown;
    try {
      decodeProtobufPush(body, 1 << 20);
    } catch (error) {
      caught = error;
    }
    expect((caught as DecodeError).code).toBe(code);
  });
});
