import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ProtoError } from "./errors.js";
import { countPushMessages, decodePushRequest, encodePushRequest, timestampNs } from "./push.js";

/** Protobuf bytes written field by field from Loki's push.proto numbering, not by protobufjs. */
function handEncoded(): Uint8Array {
  const str = (field: number, s: string): number[] => {
    const b = [...Buffer.from(s)];
    return [(field << 3) | 2, b.length, ...b];
  };
  const msg = (field: number, body: number[]): number[] => [(field << 3) | 2, body.length, ...body];
  // Timestamp{seconds=1700000000 (varint), nanos=5}
  const ts = [0x08, 0x80, 0xe2, 0xcf, 0xaa, 0x06, 0x10, 0x05];
  const entry = [
    ...msg(1, ts),
    ...str(2, "hello"),
    ...msg(3, [...str(1, "trace_id"), ...str(2, "abc")]),
  ];
  const stream = [...str(1, '{app="x"}'), ...msg(2, entry), 0x18, 0x07 /* hash = 7 */];
  return Uint8Array.from(msg(1, stream));
}

describe("PushRequest", () => {
  it("decodes Loki's field numbers", () => {
    const req = decodePushRequest(handEncoded());
    expect(req.streams).toHaveLength(1);
    const stream = req.streams[0]!;
    expect(stream.labels).toBe('{app="x"}');
    const entry = stream.entries[0]!;
    expect(entry.line).toBe("hello");
    expect(entry.structuredMetadata).toEqual([{ name: "trace_id", value: "abc" }]);
    expect(timestampNs(entry.timestamp)).toBe(1_700_000_000_000_000_005n);
  });

  it("encodes to the same bytes it decodes", () => {
    const bytes = handEncoded();
    const again = decodePushRequest(encodePushRequest(decodePushRequest(bytes)));
    expect(again.streams[0]!.entries[0]!.line).toBe("hello");
  });

  it.each([
    ["truncated length", Uint8Array.from([0x0a, 0x10, 0x01])],
    ["bad wire type", Uint8Array.from([0x0f, 0x01])],
    ["string where a message belongs", Uint8Array.from([0x0a, 0x02, 0x12, 0x05])],
    ["field past its message", Uint8Array.from([0x0a, 0x02, 0x0a, 0x05, 0x61, 0x62])],
    ["group", Uint8Array.from([0x0b, 0x0c])],
  ])("rejects %s with malformed_protobuf", (_name, bytes) => {
    expect(() => decodePushRequest(bytes)).toThrow(ProtoError);
    try {
      decodePushRequest(bytes);
    } catch (error) {
      expect((error as ProtoError).code).toBe("malformed_protobuf");
    }
  });

  it("counts nested messages without decoding them", () => {
    expect(countPushMessages(new Uint8Array(0))).toBe(0);
    // 1 stream, 1 entry, its timestamp and 1 metadata pair.
    expect(countPushMessages(handEncoded())).toBe(4);
    const many = encodePushRequest({
      streams: [
        { labels: "{}", entries: [] },
        {
          labels: '{a="b"}',
          entries: Array.from({ length: 10 }, () => ({
            timestamp: { seconds: 1, nanos: 1 },
            line: "x",
            structuredMetadata: [
              { name: "a", value: "1" },
              { name: "b", value: "2" },
            ],
          })),
        },
      ],
    });
    expect(countPushMessages(many)).toBe(2 + 10 * 4);
    expect(() => decodePushRequest(many, 41)).toThrow(/too many messages: 42, limit 41/);
    expect(decodePushRequest(many, 42).streams).toHaveLength(2);
  });

  it("bounds the heap of a request of empty messages", () => {
    const inner = new Uint8Array(2000).fill(0).map((_, i) => (i % 2 === 0 ? 0x12 : 0));
    const bytes = Uint8Array.from([0x0a, 0xd0, 0x0f, ...inner]); // one stream of 1000 entries
    expect(countPushMessages(bytes)).toBe(1001);
    expect(() => decodePushRequest(bytes, 1000)).toThrow(ProtoError);
  });

  it("passes only what protobufjs then decodes; refuses the rest with ProtoError", () => {
    const accepted = (bytes: Uint8Array) => {
      if (countPushMessages(bytes) >= 0) expect(() => decodePushRequest(bytes)).not.toThrow();
      else expect(() => decodePushRequest(bytes)).toThrow(ProtoError);
    };
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), accepted), { numRuns: 2000 });
    // Valid requests with a byte changed: mostly still structured, so the walk goes deep.
    const valid = handEncoded();
    fc.assert(
      fc.property(fc.nat(valid.length - 1), fc.nat(255), (i, b) => {
        accepted(valid.with(i, b));
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses a line cut short, from a Buffer too (protobufjs alone would cut it)", () => {
    const whole = Buffer.from(handEncoded());
    for (let cut = 1; cut < whole.length; cut++) {
      expect(() => decodePushRequest(whole.subarray(0, cut))).toThrow(ProtoError);
    }
  });

  it.each([
    [{ seconds: 0, nanos: 0 }, 0n],
    [{ seconds: -1, nanos: 999_999_999 }, -1n],
    [{ seconds: { low: 0x5f5e0ff, high: 0 }, nanos: 1 }, 99_999_999_000_000_001n],
    [{ seconds: { low: -1, high: -1 }, nanos: 5 }, -999_999_995n],
    [{ seconds: { low: 0, high: 1 }, nanos: 0 }, 4_294_967_296_000_000_000n],
    [null, 0n],
  ])("timestampNs(%j) = %s", (ts, ns) => {
    expect(timestampNs(ts)).toBe(ns);
  });
});
