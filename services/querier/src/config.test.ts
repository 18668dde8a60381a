import { configFiles, thrown } from "@sieve/config/testing";
import { afterAll, describe, expect, test } from "vitest";
import {
  ConfigError,
  DEFAULT_CONFIG,
  DEFAULT_QUERY_LIMITS,
  limitsFor,
  loadConfig,
} from "./config.js";

const files = configFiles("sieve-querier-config-");
afterAll(files.remove);

describe("loadConfig", () => {
  test("defaults with no file and no environment", () => {
    expect(loadConfig({ env: {} })).toEqual(DEFAULT_CONFIG);
  });

  test("file, then environment; overrides per tenant", () => {
    const path = files.write(
      [
        "querier:",
        "  authEnabled: true",
        "  chunkCacheBytes: 1048576",
        "  limits:",
        "    maxEntriesLimitPerQuery: 100",
        "  overrides:",
        "    team-a:",
        "      maxQueryLengthMs: 3600000",
        "distributor:",
        "  anything: 1",
      ].join("\n"),
    );
    const c = loadConfig({
      file: path,
      env: {
        SIEVE_QUERIER_MAX_CONCURRENT_FETCHES: "3",
        SIEVE_QUERIER_LIMITS_QUERY_TIMEOUT_MS: "5000",
      },
    });
    expect(c.authEnabled).toBe(true);
    expect(c.chunkCacheBytes).toBe(1048576);
    expect(c.maxConcurrentFetches).toBe(3);
    expect(c.limits).toEqual({
      ...DEFAULT_QUERY_LIMITS,
      maxEntriesLimitPerQuery: 100,
      queryTimeoutMs: 5000,
    });
    expect(limitsFor(c, "team-a").maxQueryLengthMs).toBe(3_600_000);
    expect(limitsFor(c, "team-a").maxEntriesLimitPerQuery).toBe(100);
    expect(limitsFor(c, "team-b")).toBe(c.limits);
  });

  const refusals: [string, Record<string, string>, string, string][] = [
    ["querier:\n  cacheBytes: 1\n", {}, "unknown_key", "querier.cacheBytes"],
    ["querier:\n  limits:\n    maxLines: 1\n", {}, "unknown_key", "querier.limits.maxLines"],
    ["querier:\n  authEnabled: yes please\n", {}, "invalid_type", "querier.authEnabled"],
    ["querier:\n  chunkCacheBytes: -1\n", {}, "out_of_range", "querier.chunkCacheBytes"],
    ["querier:\n  maxConcurrentFetches: 0\n", {}, "out_of_range", "maxConcurrentFetches"],
    ["querier: [1]\n", {}, "invalid_type", "querier"],
    ["querier: {\n", {}, "invalid_yaml", ""],
    ["", { SIEVE_QUERIER_AUTH_ENABLED: "1" }, "invalid_type", "SIEVE_QUERIER_AUTH_ENABLED"],
    [
      "",
      { SIEVE_QUERIER_LIMITS_MAX_CHUNKS_PER_QUERY: "many" },
      "invalid_type",
      "SIEVE_QUERIER_LIMITS_MAX_CHUNKS_PER_QUERY",
    ],
  ];
  test.each(refusals)("%j %j → %s at %s", (text, env, code, key) => {
    const path = files.write(text);
    const error = thrown(() => loadConfig({ file: path, env }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe(code);
    if (key !== "") expect((error as ConfigError).key).toBe(key);
  });

  test("a missing file is named", () => {
    expect(() => loadConfig({ file: files.path("nope.yaml"), env: {} })).toThrow(
      /cannot read the configuration file/,
    );
  });
});
