import fc from "fast-check";
import CRC32C from "crc-32/crc32c.js";
import { describe, expect, it } from "vitest";
import { crc32c, nativeCrc32c } from "./crc32c.js";

const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);

// RFC 3720 (iSCSI) appendix B.4, "CRC Examples", plus the usual check value of "123456789".
const RFC3720: [string, Uint8Array, number][] = [
  ["32 bytes of zeros", new Uint8Array(32), 0x8a9136aa],
  ["32 bytes of ones", new Uint8Array(32).fill(0xff), 0x62a8ab43],
  ["32 incrementing bytes", Uint8Array.from({ length: 32 }, (_, i) => i), 0x46dd794e],
  ["32 decrementing bytes", Uint8Array.from({ length: 32 }, (_, i) => 31 - i), 0x113fdb5c],
  [
    "an iSCSI read command PDU",
    // prettier-ignore
    bytes(
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ),
    0xd9963a56,
  ],
  ["the check string 123456789", new TextEncoder().encode("123456789"), 0xe3069283],
  ["nothing", new Uint8Array(0), 0],
];

describe("crc32c", () => {
  it.each(RFC3720)("matches RFC 3720 for %s", (_name, input, want) => {
    expect(crc32c(input)).toBe(want);
  });

  it("loads the native implementation on this platform", () => {
    expect(nativeCrc32c).toBe(true);
  });

  it("agrees with crc-32's JavaScript on every size, small (JS) and large (native)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (data) => {
        expect(crc32c(data)).toBe(CRC32C.buf(data, 0) >>> 0);
      }),
      { numRuns: 500 },
    );
  });

  it("continues a checksum from a seed, across the JS/native threshold", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 2048 }),
        fc.uint8Array({ maxLength: 2048 }),
        (a, b) => {
          const whole = new Uint8Array(a.length + b.length);
          whole.set(a);
          whole.set(b, a.length);
          expect(crc32c(b, crc32c(a))).toBe(crc32c(whole));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("is unsigned", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 1024 }), (data) => {
        const crc = crc32c(data);
        expect(crc >= 0 && crc <= 0xffffffff && Number.isInteger(crc)).toBe(true);
      }),
    );
  });
});
