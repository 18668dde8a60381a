import { configFiles, thrown } from "@sieve/config/testing";
import { afterAll, describe, expect, test } from "vitest";
import { ConfigError, DEFAULT_CONFIG, loadConfig } from "./config.js";

const files = configFiles("sieve-gateway-config-");
afterAll(files.remove);

describe("loadConfig", () => {
  test("defaults with no file and no environment", () => {
    expect(loadConfig({ env: {} })).toEqual(DEFAULT_CONFIG);
  });

  test("file, then environment, then overrides", () => {
    const path = files.write(
      "distributor:\n  maxBodyBytes: 5\nbloomGateway:\n  cacheMaxBytes: 1000\n  readTimeoutMs: 7\n",
    );
    const config = loadConfig({
      file: path,
      env: {
        SIEVE_BLOOM_GATEWAY_READ_TIMEOUT_MS: "9",
        SIEVE_BLOOM_GATEWAY_MAX_CONCURRENT_READS: "4",
      },
      overrides: { maxConcurrentReads: 2 },
    });
    expect(config).toEqual({
      ...DEFAULT_CONFIG,
      cacheMaxBytes: 1000,
      readTimeoutMs: 9,
      maxConcurrentReads: 2,
    });
  });

  test.each<[string, string | undefined, Record<string, string>, string, string]>([
    [
      "unknown key",
      "bloomGateway:\n  cacheBytes: 1\n",
      {},
      "unknown_key",
      "bloomGateway.cacheBytes",
    ],
    ["a string", "bloomGateway:\n  cacheMaxBytes: lots\n", {}, "invalid_type", "cacheMaxBytes"],
    ["zero", "bloomGateway:\n  readTimeoutMs: 0\n", {}, "out_of_range", "readTimeoutMs"],
    ["a fraction", "bloomGateway:\n  readTimeoutMs: 1.5\n", {}, "out_of_range", "readTimeoutMs"],
    ["not a mapping", "bloomGateway: 3\n", {}, "invalid_type", "bloomGateway"],
    ["bad YAML", "bloomGateway: [\n", {}, "invalid_yaml", ".yaml"],
    [
      "a bad variable",
      undefined,
      { SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES: "1e3x" },
      "invalid_type",
      "SIEVE_BLOOM_GATEWAY_CACHE_MAX_BYTES",
    ],
    [
      "a negative variable",
      undefined,
      { SIEVE_BLOOM_GATEWAY_MAX_REQUEST_BYTES: "-1" },
      "out_of_range",
      "SIEVE_BLOOM_GATEWAY_MAX_REQUEST_BYTES",
    ],
  ])("refuses %s", (_name, text, env, code, key) => {
    const path = text === undefined ? undefined : files.write(text);
    const error = thrown(() => loadConfig({ ...(path !== undefined && { file: path }), env }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe(code);
    expect((error as ConfigError).key).toContain(key);
  });

  test("an unreadable file", () => {
    expect(() => loadConfig({ file: files.path("nope.yaml"), env: {} })).toThrow(
      /cannot read the configuration file/,
    );
  });
});
