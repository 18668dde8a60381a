import { describe, expect, it } from "vitest";
import { Limiter } from "./limiter.js";
import { traceIds } from "./testkeys.test-helper.js";

function clock(start = 1_000_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe("Limiter", () => {
  it("admits up to maxItems distinct items, and admitted ones again", () => {
    const time = clock();
    const limiter = new Limiter({ maxItems: 1000, intervalMs: 60_000, now: time.now });
    const items = traceIds(1500, 41);
    const first = items.slice(0, 1000);
    for (const item of first) expect(limiter.add(item)).toBe(true);
    // A new item that the filter mistakes for an admitted one takes no slot (as in
    // VictoriaMetrics), so the count can fall a little short of the items admitted.
    expect(limiter.count).toBeGreaterThan(995);
    expect(limiter.count).toBeLessThanOrEqual(1000);
    for (const item of first) expect(limiter.add(item)).toBe(true);
    // New items past the limit are refused, bar the filter's false positives (fp 0.001).
    const admittedLate = items.slice(1000).filter((item) => limiter.add(item)).length;
    expect(admittedLate).toBeLessThan(10);
    expect(limiter.count).toBe(1000);
  });

  it("replaces its filter at each interval", () => {
    const time = clock();
    const limiter = new Limiter({ maxItems: 2, intervalMs: 1000, now: time.now });
    expect(limiter.add("a")).toBe(true);
    expect(limiter.add("b")).toBe(true);
    expect(limiter.add("c")).toBe(false);
    time.advance(999);
    expect(limiter.add("c")).toBe(false);
    expect(limiter.add("a")).toBe(true);
    time.advance(1);
    expect(limiter.count).toBe(0);
    expect(limiter.add("c")).toBe(true);
    expect(limiter.add("d")).toBe(true);
    expect(limiter.add("a")).toBe(false);
    // Intervals stay aligned to the limiter's start, however long it sat idle.
    time.advance(5500);
    expect(limiter.add("a")).toBe(true);
    time.advance(499);
    expect(limiter.add("b")).toBe(true);
    expect(limiter.add("c")).toBe(false);
    time.advance(1);
    expect(limiter.add("c")).toBe(true);
  });

  it("admits nothing with maxItems 0 and refuses bad options", () => {
    const limiter = new Limiter({ maxItems: 0, intervalMs: 1000 });
    expect(limiter.add("a")).toBe(false);
    expect(() => new Limiter({ maxItems: -1, intervalMs: 1000 })).toThrow(/maxItems/);
    expect(() => new Limiter({ maxItems: 1, intervalMs: 0 })).toThrow(/intervalMs/);
  });
});
