import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { IngesterError } from "./errors.js";
import {
  decodeManifest,
  encodeManifest,
  manifestKey,
  manifestId,
  manifestMaxOffset,
} from "./manifest.js";
import type { FlushManifest } from "./manifest.js";

const sample: FlushManifest = {
  partition: 3,
  epoch: 4,
  seq: 17,
  writer: "ingester-0",
  createdMs: 1_714_521_600_000,
  segments: [
    "t/index/2024-05-01/001714521600000-ingester-0-00000001",
    "u/index/2024-05-01/001714521600000-ingester-0-00000001",
  ],
  segmentBytes: [new Uint8Array([1, 2, 3]), new Uint8Array(0)],
  blooms: ["t/blooms/2024-05-01/001714521600000-ingester-0-00000001"],
  streams: [
    { tenant: "t", fingerprint: 0xffffffffffffffffn, maxOffset: 41 },
    { tenant: "u", fingerprint: 1n, maxOffset: 7 },
  ],
};

describe("flush manifest", () => {
  it("round-trips", () => {
    expect(decodeManifest(encodeManifest(sample))).toEqual(sample);
    expect(manifestMaxOffset(sample)).toBe(41);
  });

  it("round-trips arbitrary manifests", () => {
    const arb = fc.record({
      partition: fc.nat(4095),
      epoch: fc.nat(),
      seq: fc.nat(),
      writer: fc.string(),
      createdMs: fc.nat(),
      segments: fc.array(fc.tuple(fc.string({ minLength: 1 }), fc.uint8Array({ maxLength: 64 }))),
      blooms: fc.array(fc.string({ minLength: 1 })),
      streams: fc.array(
        fc.record({
          tenant: fc.string(),
          fingerprint: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
          maxOffset: fc.nat(),
        }),
      ),
    });
    fc.assert(
      fc.property(arb, ({ segments, ...rest }) => {
        const m: FlushManifest = {
          ...rest,
          segments: segments.map(([key]) => key),
          segmentBytes: segments.map(([, bytes]) => bytes),
        };
        expect(decodeManifest(encodeManifest(m))).toEqual(m);
      }),
    );
  });

  it("rejects every flipped byte and every truncation with corrupt_manifest", () => {
    const bytes = encodeManifest(sample);
    for (let i = 0; i < bytes.length; i++) {
      const damaged = bytes.slice();
      damaged[i]! ^= 0x41;
      expect(() => decodeManifest(damaged), `byte ${i}`).toThrow(IngesterError);
    }
    for (let n = 0; n < bytes.length; n++) {
      expect(() => decodeManifest(bytes.subarray(0, n)), `length ${n}`).toThrow(
        expect.objectContaining({ code: "corrupt_manifest" }) as Error,
      );
    }
  });

  it("keys sort by epoch then seq and parse back", () => {
    expect(manifestKey(2, 3, 5)).toBe("_ingester/partitions/2/0000000003-0000000005");
    expect(manifestId(2, manifestKey(2, 7, 123))).toEqual({ epoch: 7, seq: 123 });
    expect(manifestId(3, manifestKey(2, 7, 123))).toBeUndefined();
    expect(manifestId(2, "_ingester/partitions/2/x")).toBeUndefined();
    // A version-1 key (seq only) is not one of this version's.
    expect(manifestId(2, "_ingester/partitions/2/0000000000000005")).toBeUndefined();
    expect(manifestKey(1, 1, 9) < manifestKey(1, 1, 10)).toBe(true);
    expect(manifestKey(1, 1, 99) < manifestKey(1, 2, 0)).toBe(true);
  });
});
