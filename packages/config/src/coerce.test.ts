import { describe, expect, it } from "vitest";
import { checkRange, coerce, ConfigError, envName } from "./index.js";
import type { Scalar } from "./index.js";
import { thrown } from "./testing.js";

/** template, raw, fromEnv, min, expected value or error code. */
const table: [Scalar, unknown, boolean, number | undefined, Scalar | { error: string }][] = [
  [false, true, false, undefined, true],
  [false, "true", true, undefined, true],
  [true, "false", true, undefined, false],
  [false, "true", false, undefined, { error: "invalid_type" }],
  [false, "yes", true, undefined, { error: "invalid_type" }],
  [false, 1, false, undefined, { error: "invalid_type" }],
  ["", "abc", false, undefined, "abc"],
  ["", "abc", true, undefined, "abc"],
  ["", 3, false, undefined, { error: "invalid_type" }],
  [0, 42, false, undefined, 42],
  [0, "42", true, undefined, 42],
  [0, " 42 ", true, undefined, 42],
  [0, "42", false, undefined, { error: "invalid_type" }],
  [0, "", true, undefined, { error: "invalid_type" }],
  [0, "  ", true, undefined, { error: "invalid_type" }],
  [0, "1e3x", true, undefined, { error: "invalid_type" }],
  [0, "Infinity", true, undefined, { error: "invalid_type" }],
  [0, null, false, undefined, { error: "invalid_type" }],
  [0, -5, false, undefined, -5],
  [0, -5, false, 0, { error: "out_of_range" }],
  [0, 0, false, 0, 0],
  [0, 0, false, 1, { error: "out_of_range" }],
  [0, "-1", true, 0, { error: "out_of_range" }],
  [0, 1.5, false, undefined, { error: "out_of_range" }],
  [0, "1.5", true, 0, { error: "out_of_range" }],
  [0, 2 ** 53, false, undefined, { error: "out_of_range" }],
  // A rate (a fractional default) takes fractions; the bounds still hold.
  [0.01, 0.001, false, undefined, 0.001],
  [0.01, "0.25", true, undefined, 0.25],
  [0.01, 1, false, undefined, 1],
  [0.01, "-0.1", true, 0, { error: "out_of_range" }],
  [0.01, "0.5x", true, undefined, { error: "invalid_type" }],
];

describe("coerce", () => {
  it.each(table)("%j ← %j (env %s, min %s) → %j", (template, raw, fromEnv, min, expected) => {
    if (typeof expected !== "object") {
      expect(coerce("a.b", template, raw, fromEnv, min)).toBe(expected);
      return;
    }
    const error = thrown(() => coerce("a.b", template, raw, fromEnv, min));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ code: expected.error, key: "a.b" });
  });
});

describe("envName", () => {
  it.each<[string, string[], string]>([
    ["SIEVE_DISTRIBUTOR_", ["authEnabled"], "SIEVE_DISTRIBUTOR_AUTH_ENABLED"],
    ["SIEVE_DISTRIBUTOR_", ["limits", "maxLineBytes"], "SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES"],
    ["SIEVE_INGESTER_", ["blooms", "bloomsEnabled"], "SIEVE_INGESTER_BLOOMS_BLOOMS_ENABLED"],
    ["SIEVE_BLOOM_GATEWAY_", ["cacheMaxBytes"], "SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES"],
    ["SIEVE_QUERIER_", ["limits", "queryTimeoutMs"], "SIEVE_QUERIER_LIMITS_QUERY_TIMEOUT_MS"],
  ])("%s %j → %s", (prefix, path, expected) => {
    expect(envName(prefix, ...path)).toBe(expected);
  });
});

describe("checkRange", () => {
  it.each<[number, number, number | undefined, boolean]>([
    [5, 1, 10, true],
    [1, 1, 10, true],
    [10, 1, 10, true],
    [0, 1, 10, false],
    [11, 1, 10, false],
    [Number.NaN, 0, 10, false],
    [2 ** 50, 1, undefined, true],
    [0, 1, undefined, false],
  ])("%s in %s..%s: %s", (n, lo, hi, ok) => {
    const error = thrown(() => {
      checkRange("x.y", n, lo, hi);
    });
    if (ok) expect(error).toBeUndefined();
    else expect(error).toMatchObject({ code: "out_of_range", key: "x.y" });
  });
});
