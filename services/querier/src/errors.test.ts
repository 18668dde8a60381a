import { describe, expect, test } from "vitest";
import { goDuration, promDuration, queryTooLong } from "./errors.js";

// Expected strings are Go's time.Duration.String() and Prometheus' model.Duration.String().
describe("goDuration", () => {
  test.each([
    [0n, "0s"],
    [1n, "1ns"],
    [1500n, "1.5µs"],
    [1_500_000n, "1.5ms"],
    [1_000_000_000n, "1s"],
    [1_500_000_000n, "1.5s"],
    [90_000_000_000n, "1m30s"],
    [7_200_000_000_000n, "2h0m0s"],
    [7_201_000_000_000n, "2h0m1s"],
    [2_595_600_000_000_000n, "721h0m0s"],
    [-90_000_000_000n, "-1m30s"],
  ])("%s ns → %s", (ns, text) => {
    expect(goDuration(ns)).toBe(text);
  });
});

describe("promDuration", () => {
  test.each([
    [0, "0s"],
    [1, "1ms"],
    [1500, "1s500ms"],
    [3_600_000, "1h"],
    [721 * 3_600_000, "30d1h"],
    [7 * 86_400_000, "1w"],
    [8 * 86_400_000, "8d"],
    [365 * 86_400_000, "1y"],
    [90_000, "1m30s"],
  ])("%s ms → %s", (ms, text) => {
    expect(promDuration(ms)).toBe(text);
  });
});

test("queryTooLong reads as Loki's ErrQueryTooLong", () => {
  const e = queryTooLong(2_595_600_000_000_001n, 721 * 3_600_000);
  expect(e.message).toBe(
    "the query time range exceeds the limit (query length: 721h0m0.000000001s, limit: 30d1h)",
  );
  expect(e.status).toBe(400);
});
