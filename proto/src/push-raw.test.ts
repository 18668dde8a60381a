import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ProtoError } from "./errors.js";
import {
  decodePushRaw,
  encodeQueueRecordRaw,
  rawLineBytes,
  rawMetadataBytes,
  rawPairCount,
} from "./push-raw.js";
import { decodePushRequest, encodePushRequest, timestampNs } from "./push.js";
import { encodeQueueRecord } from "./queue-record.js";

const text = fc.string({ unit: "grapheme", maxLength: 40 });
const pair = fc.record({ name: text, value: text });
const timestamp = fc.option(
  fc.record({
    seconds: fc.integer({ min: -1e10, max: 1e10 }),
    nanos: fc.integer({ min: -1_000_000_000, max: 999_999_999 }),
  }),
  { nil: null },
);
const entry = fc.record({
  timestamp,
  line: fc.string({ unit: "grapheme", maxLength: 300 }),
  structuredMetadata: fc.array(pair, { maxLength: 4 }),
  // Loki's EntryAdapter field 4: skipped by both readers.
  parsed: fc.array(pair, { maxLength: 2 }),
});
const push = fc.record({
  streams: fc.array(
    fc.record({ labels: text, entries: fc.array(entry, { maxLength: 12 }), hash: fc.nat() }),
    { maxLength: 5 },
  ),
});

/** One more pair for some kept entries (the distributor's detected_level), by position. */
interface Extra {
  readonly name: string;
  readonly values: readonly (string | undefined)[];
}

/** The records the string path writes for `request`, all entries or those `keep` picks. */
function viaStrings(bytes: Uint8Array, keep: (i: number) => boolean, extra?: Extra): Uint8Array[] {
  return decodePushRequest(bytes).streams.map((s) =>
    encodeQueueRecord({
      tenant: "tenant-ä",
      labels: s.labels,
      fingerprint: 0xfedcba9876543210n,
      entries: s.entries
        .filter((_e, i) => keep(i))
        .map((e, k) => {
          const value = extra?.values[k];
          return {
            timestampNs: timestampNs(e.timestamp),
            line: e.line,
            structuredMetadata:
              value === undefined
                ? e.structuredMetadata
                : [...e.structuredMetadata, { name: extra!.name, value }],
          };
        }),
    }),
  );
}

function viaRanges(bytes: Uint8Array, keep: (i: number) => boolean, extra?: Extra): Uint8Array[] {
  const raw = decodePushRaw(bytes);
  return raw.streams.map((s) => {
    const kept = Array.from({ length: s.count }, (_v, i) => i).filter(keep);
    return encodeQueueRecordRaw("tenant-ä", s.labels, 0xfedcba9876543210n, raw, s, kept, extra);
  });
}

// Names and values from a pool larger than the encoder remembers (64), and new ones.
const extra = fc.option(
  fc.record({
    name: fc.constantFrom("detected_level", "lvl", "ä"),
    values: fc.array(
      fc.option(fc.oneof(fc.integer({ min: 0, max: 99 }).map(String), text), { nil: undefined }),
      { maxLength: 12 },
    ),
  }),
  { nil: undefined },
);

describe("pushes read as byte ranges", () => {
  it("write the same queue records as the decoded strings, whole or filtered, with a pair added", () => {
    fc.assert(
      fc.property(push, fc.nat(3), extra, (request, modulo, more) => {
        const bytes = encodePushRequest(request);
        const keep = (i: number): boolean => modulo === 0 || i % (modulo + 1) !== 0;
        const a = viaStrings(bytes, keep, more);
        const b = viaRanges(bytes, keep, more);
        expect(b.map((r) => Buffer.from(r).toString("hex"))).toEqual(
          a.map((r) => Buffer.from(r).toString("hex")),
        );
      }),
      { numRuns: 300 },
    );
  });

  it("measure lines and metadata in bytes as Loki does", () => {
    fc.assert(
      fc.property(push, (request) => {
        const bytes = encodePushRequest(request);
        const raw = decodePushRaw(bytes);
        const decoded = decodePushRequest(bytes);
        raw.streams.forEach((s, si) => {
          expect(s.labels).toBe(decoded.streams[si]!.labels);
          decoded.streams[si]!.entries.forEach((e, i) => {
            expect(rawLineBytes(s, i)).toBe(Buffer.byteLength(e.line));
            expect(rawPairCount(s, i)).toBe(e.structuredMetadata.length);
            const md = e.structuredMetadata.reduce(
              (n, p) => n + Buffer.byteLength(p.name) + Buffer.byteLength(p.value),
              0,
            );
            expect(rawMetadataBytes(s, i)).toBe(md);
            expect(s.timestamps[i]).toBe(timestampNs(e.timestamp));
          });
        });
      }),
      { numRuns: 200 },
    );
  });

  it.each([
    // StreamAdapter{labels="a", labels="b"}: the last occurrence wins, as protobufjs reads it.
    ["a repeated labels field", "0a060a01610a0162"],
    // EntryAdapter{line="x", line="y", unknown field 9 varint 5}.
    ["a repeated line and an unknown field", "0a0a12081201781201794805"],
    // An entry with no timestamp at all reads at 0.
    ["an entry without a timestamp", "0a05120312017a"],
  ])("agree with protobufjs on %s", (_what, hex) => {
    const bytes = Buffer.from(hex, "hex");
    const all = (): boolean => true;
    expect(viaRanges(bytes, all)).toEqual(viaStrings(bytes, all));
  });

  it("refuse exactly the bodies protobufjs' reader refuses, with the same errors", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const a = errorOf(() => decodePushRequest(bytes, 20));
        const b = errorOf(() => decodePushRaw(bytes, 20));
        expect(b).toEqual(a);
      }),
      { numRuns: 2000 },
    );
  });
});

function errorOf(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ProtoError);
    return (error as ProtoError).code;
  }
}
