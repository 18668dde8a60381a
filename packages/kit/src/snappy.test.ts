import fc from "fast-check";
import { compress as jsCompress } from "snappyjs";
import { describe, expect, it, vi } from "vitest";
import * as native from "./snappy.js";

/** The same module with the JavaScript fallback forced (`SIEVE_SNAPPY=js`). */
async function loadFallback(): Promise<typeof native> {
  vi.resetModules();
  vi.stubEnv("SIEVE_SNAPPY", "js");
  try {
    return await import("./snappy.js");
  } finally {
    vi.unstubAllEnvs();
    vi.resetModules();
  }
}

const fallback = await loadFallback();

/** Bytes shaped like logs (repeats compress) or random (they do not). */
const payloads = fc.oneof(
  fc.uint8Array({ maxLength: 4096 }),
  fc
    .array(fc.constantFrom("GET /orders ", "200 ", "trace_id=", "4bf92f35", "\n", "é", "ü"), {
      maxLength: 800,
    })
    .map((parts) => new TextEncoder().encode(parts.join(""))),
);

describe("snappy", () => {
  it("loads the native binding on this machine, and the fallback when told to", () => {
    expect(native.snappyImplementation).toBe("native");
    expect(fallback.snappyImplementation).toBe("js");
  });

  it("primes the native binding's memory on this thread, and nothing without it", () => {
    expect(native.primeSnappy()).toBeGreaterThan(0);
    expect(fallback.primeSnappy()).toBe(0);
    const data = text(200_000);
    expect(Buffer.from(native.snappyUncompress(native.snappyCompress(data))).equals(data)).toBe(
      true,
    );
  });

  it("round-trips, and each side reads what the other wrote", () => {
    fc.assert(
      fc.property(payloads, (data) => {
        const a = native.snappyCompress(data);
        const b = fallback.snappyCompress(data);
        expect(native.snappyDeclaredLength(a)).toBe(data.length);
        for (const block of [a, b]) {
          expect(Buffer.from(native.snappyUncompress(block)).equals(data)).toBe(true);
          expect(Buffer.from(fallback.snappyUncompress(block)).equals(data)).toBe(true);
        }
      }),
    );
  });

  it.each([
    ["no header", () => new Uint8Array(0)],
    ["a header longer than 32 bits", () => Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x7f])],
    ["a header that declares more", () => relabel(jsCompress(text(1000)), 1001)],
    ["a header that declares less", () => relabel(jsCompress(text(1000)), 999)],
    ["a truncated block", () => jsCompress(text(1000)).subarray(0, 40)],
    ["a copy before the start", () => Uint8Array.from([10, 0b0000_0001, 5])],
  ])("refuses %s, both ways", (_name, make) => {
    const block = make();
    expect(() => native.snappyUncompress(block)).toThrow();
    expect(() => fallback.snappyUncompress(block)).toThrow();
  });
});

function text(n: number): Uint8Array {
  return new TextEncoder().encode("log line 42 ".repeat(n).slice(0, n));
}

/** The block with its length header replaced by `declared` (a varint). */
function relabel(block: Uint8Array, declared: number): Uint8Array {
  let pos = 0;
  while ((block[pos]! & 0x80) !== 0) pos++;
  const header: number[] = [];
  let n = declared;
  while (n >= 0x80) {
    header.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  header.push(n);
  return Uint8Array.from([...header, ...block.subarray(pos + 1)]);
}
