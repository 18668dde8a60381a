import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StreamRecordType } from "./codec.js";
import { ProtoError } from "./errors.js";
import {
  QUEUE_RECORD_HEADER_BYTES,
  QueueEntryView,
  decodeQueueRecord,
  encodeQueueRecord,
  readQueueRecord,
  writeRecordEnvelope,
} from "./queue-record.js";
import type { QueueRecord } from "./queue-record.js";

const record: QueueRecord = {
  tenant: "fake",
  labels: '{app="api", env="prod"}',
  fingerprint: 0xfedcba9876543210n,
  entries: [
    { timestampNs: 1_700_000_000_123_456_789n, line: "hello", structuredMetadata: [] },
    {
      timestampNs: -5n,
      line: "ünïcödé ✓",
      structuredMetadata: [{ name: "trace_id", value: "4bf92f3577b34da6" }],
    },
  ],
};

const recordArb: fc.Arbitrary<QueueRecord> = fc.record({
  tenant: fc.string(),
  labels: fc.string(),
  fingerprint: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  entries: fc.array(
    fc.record({
      timestampNs: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      line: fc.string({ unit: "grapheme" }),
      structuredMetadata: fc.array(fc.record({ name: fc.string(), value: fc.string() }), {
        maxLength: 3,
      }),
    }),
    { maxLength: 5 },
  ),
});

function codeOf(bytes: Uint8Array): string {
  try {
    decodeQueueRecord(bytes);
    return "ok";
  } catch (error) {
    expect(error).toBeInstanceOf(ProtoError);
    return (error as ProtoError).code;
  }
}

describe("queue record", () => {
  it("round-trips", () => {
    const bytes = encodeQueueRecord(record);
    expect([...bytes.subarray(0, 5)]).toEqual([0x53, 0x56, 0x51, 0x52, 1]);
    expect(decodeQueueRecord(bytes)).toEqual(record);
  });

  it("round-trips any record", () => {
    fc.assert(
      fc.property(recordArb, (r) => {
        expect(decodeQueueRecord(encodeQueueRecord(r))).toEqual(r);
      }),
    );
  });

  it("reads what protobufjs writes from queue.proto, unknown fields skipped", () => {
    fc.assert(
      fc.property(recordArb, fc.uint8Array({ maxLength: 6 }), (r, unknown) => {
        const message = StreamRecordType.fromObject({
          ...r,
          fingerprint: r.fingerprint.toString(),
          entries: r.entries.map((e) => ({ ...e, timestampNs: e.timestampNs.toString() })),
        });
        // Field 15, length-delimited: in no message of the format.
        const extra = Buffer.from([(15 << 3) | 2, unknown.length, ...unknown]);
        const body = Buffer.concat([extra, StreamRecordType.encode(message).finish(), extra]);
        const out = Buffer.alloc(QUEUE_RECORD_HEADER_BYTES + body.length);
        out.set(body, QUEUE_RECORD_HEADER_BYTES);
        writeRecordEnvelope(out);
        expect(decodeQueueRecord(out)).toEqual(r);
      }),
    );
  });

  it("reads metadata names apart however alike (the reader remembers the last few)", () => {
    const names = ["a", "b", "ab", "ac", "ba", "trace_id", "trace_ie", "span_id", "x".repeat(65)];
    const alike: QueueRecord = {
      ...record,
      entries: [...names, ...names.toReversed(), "b", "a"].map((name, i) => ({
        timestampNs: BigInt(i),
        line: `line ${i}`,
        structuredMetadata: [{ name, value: `v${i}` }],
      })),
    };
    expect(decodeQueueRecord(encodeQueueRecord(alike))).toEqual(alike);
  });

  it("reads an entry's line as a view of the record, decoded when asked", () => {
    fc.assert(
      fc.property(recordArb, (r) => {
        const read = readQueueRecord(encodeQueueRecord(r));
        read.entries.forEach((e, i) => {
          expect(e).toBeInstanceOf(QueueEntryView);
          expect(e.timestamp).toBe(e.timestampNs);
          const bytes = e.source.subarray(e.lineStart, e.lineEnd);
          expect(bytes.equals(Buffer.from(r.entries[i]!.line))).toBe(true);
          expect(e.line).toBe(r.entries[i]!.line);
        });
      }),
    );
  });

  it.each([
    ["empty", () => new Uint8Array(0), "record_truncated"],
    ["header only, cut", (b: Uint8Array) => b.subarray(0, 11), "record_truncated"],
    ["bad magic", (b: Uint8Array) => b.with(0, 0x00), "record_bad_magic"],
    ["version 2", (b: Uint8Array) => b.with(4, 2), "record_unsupported_version"],
    ["flags set", (b: Uint8Array) => b.with(5, 1), "record_corrupt"],
    ["flipped body byte", (b: Uint8Array) => b.with(20, b[20]! ^ 1), "record_bad_checksum"],
    ["cut body", (b: Uint8Array) => b.subarray(0, b.length - 3), "record_bad_checksum"],
  ])("rejects %s", (_name, damage, code) => {
    expect(codeOf(damage(encodeQueueRecord(record)))).toBe(code);
  });
});

describe("queue record bodies", () => {
  it("refuse any damaged body in a valid envelope with record_corrupt, never anything else", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (body) => {
        const out = Buffer.alloc(QUEUE_RECORD_HEADER_BYTES + body.length);
        out.set(body, QUEUE_RECORD_HEADER_BYTES);
        writeRecordEnvelope(out);
        expect(["ok", "record_corrupt"]).toContain(codeOf(out));
      }),
      { numRuns: 3000 },
    );
  });
});
