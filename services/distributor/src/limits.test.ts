import { describe, expect, it } from "vitest";
import { DEFAULT_LIMITS, OverridableLimits, StreamRates, TokenBucket } from "./limits.js";

describe("TokenBucket", () => {
  it("starts full, refills at its rate, never past its burst", () => {
    const b = new TokenBucket(100, 200, 0);
    expect(b.allow(200, 0)).toBe(true);
    expect(b.allow(1, 0)).toBe(false);
    expect(b.allow(50, 500)).toBe(true);
    expect(b.allow(1, 500)).toBe(false);
    expect(b.isFull(10_000)).toBe(true);
    expect(b.allow(201, 10_000)).toBe(false);
    expect(b.allow(200, 10_000)).toBe(true);
  });

  it("does not refill when the clock goes back", () => {
    const b = new TokenBucket(100, 100, 1000);
    expect(b.allow(100, 1000)).toBe(true);
    expect(b.allow(1, 0)).toBe(false);
  });
});

describe("StreamRates", () => {
  it("keeps a bucket per stream and forgets refilled ones when it grows", () => {
    const limits = { ...DEFAULT_LIMITS, perStreamRateBytes: 10, perStreamBurstBytes: 10 };
    const rates = new StreamRates(4);
    for (let i = 0n; i < 4n; i++) expect(rates.allow(i, 10, limits, 0)).toBe(true);
    expect(rates.allow(0n, 1, limits, 0)).toBe(false);
    expect(rates.size).toBe(4);
    // 10 s later every bucket is full again: adding a fifth stream sweeps them.
    expect(rates.allow(99n, 1, limits, 10_000)).toBe(true);
    expect(rates.size).toBe(1);
  });
});

describe("OverridableLimits", () => {
  it("lays a tenant's overrides over the defaults", () => {
    const limits = new OverridableLimits(DEFAULT_LIMITS, { a: { maxLineBytes: 1 } });
    expect(limits.forTenant("a").maxLineBytes).toBe(1);
    expect(limits.forTenant("a").maxLabelNameLength).toBe(1024);
    expect(limits.forTenant("b")).toBe(DEFAULT_LIMITS);
    expect(limits.forTenant("__proto__")).toBe(DEFAULT_LIMITS);
  });
});
