import { configFiles, thrown } from "@sieve/config/testing";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_CONFIG, loadConfig, tenantBlooms } from "./config.js";
import type { ConfigErrorCode } from "./config.js";

const files = configFiles("sieve-ingester-config-");
afterAll(files.remove);

describe("ingester config", () => {
  it("defaults: Loki's chunk target, idle and age", () => {
    const c = loadConfig({ env: {} });
    expect(c).toEqual(DEFAULT_CONFIG);
    expect(c.chunkTargetBytes).toBe(1_572_864);
    expect(c.chunkIdleMs).toBe(1_800_000);
    expect(c.chunkMaxAgeMs).toBe(7_200_000);
  });

  it("file, then values, then environment", () => {
    const path = files.write(
      [
        "ingester:",
        "  chunkTargetBytes: 2000000",
        "  instanceId: ingester-7",
        "  blooms: { ngramLength: 4, ngramSkip: 1 }",
        "  overrides:",
        "    noisy: { bloomsEnabled: false, falsePositiveRate: 0.001, filterLayout: scalable }",
        "distributor: { authEnabled: true }",
      ].join("\n"),
    );
    const c = loadConfig({
      file: path,
      values: { flushConcurrency: 2 },
      env: { SIEVE_INGESTER_CHUNK_IDLE_MS: "60000", SIEVE_INGESTER_BLOOMS_NGRAM_SKIP: "2" },
    });
    expect(c.chunkTargetBytes).toBe(2_000_000);
    expect(c.instanceId).toBe("ingester-7");
    expect(c.flushConcurrency).toBe(2);
    expect(c.chunkIdleMs).toBe(60_000);
    expect(c.blooms).toEqual({
      bloomsEnabled: true,
      ngramLength: 4,
      ngramSkip: 2,
      falsePositiveRate: 0.01,
      filterLayout: "ribbon",
      keyTokens: true,
      keyValueTokens: true,
      prefixedTokens: true,
      patternsEnabled: false,
    });
    expect(tenantBlooms(c, "noisy")).toEqual({
      bloomsEnabled: false,
      ngramLength: 4,
      ngramSkip: 2,
      falsePositiveRate: 0.001,
      filterLayout: "scalable",
      keyTokens: true,
      keyValueTokens: true,
      prefixedTokens: true,
      patternsEnabled: false,
    });
    expect(tenantBlooms(c, "other")).toBe(c.blooms);
  });

  const refusals: [
    string,
    { text?: string; env?: Record<string, string>; values?: Record<string, unknown> },
    ConfigErrorCode,
    string,
  ][] = [
    ["not YAML", { text: "ingester: [" }, "invalid_yaml", ""],
    ["root not a mapping", { text: "- 1" }, "invalid_type", "(root)"],
    ["section not a mapping", { text: "ingester: 3" }, "invalid_type", "ingester"],
    ["unknown key", { text: "ingester: { chunkSize: 1 }" }, "unknown_key", "ingester.chunkSize"],
    [
      "string for number",
      { text: "ingester: { chunkIdleMs: soon }" },
      "invalid_type",
      "ingester.chunkIdleMs",
    ],
    [
      "fraction",
      { text: "ingester: { flushConcurrency: 1.5 }" },
      "out_of_range",
      "ingester.flushConcurrency",
    ],
    [
      "below range",
      { text: "ingester: { chunkTargetBytes: 10 }" },
      "out_of_range",
      "chunkTargetBytes",
    ],
    [
      "above range",
      { values: { chunkBlockBytes: 5 * 1024 * 1024 } },
      "out_of_range",
      "chunkBlockBytes",
    ],
    [
      "zero concurrency",
      { env: { SIEVE_INGESTER_FLUSH_CONCURRENCY: "0" } },
      "out_of_range",
      "flushConcurrency",
    ],
    [
      "env not a number",
      { env: { SIEVE_INGESTER_MAX_BLOOM_BYTES: "big" } },
      "invalid_type",
      "SIEVE_INGESTER_MAX_BLOOM_BYTES",
    ],
    [
      "env not a boolean",
      { env: { SIEVE_INGESTER_BLOOMS_BLOOMS_ENABLED: "yes" } },
      "invalid_type",
      "SIEVE_INGESTER_BLOOMS_BLOOMS_ENABLED",
    ],
    ["bad instance id", { values: { instanceId: "a/b" } }, "out_of_range", "instanceId"],
    ["instance id not a string", { values: { instanceId: 3 } }, "invalid_type", "instanceId"],
    [
      "unknown bloom key",
      { text: "ingester: { blooms: { fp: 0.1 } }" },
      "unknown_key",
      "ingester.blooms.fp",
    ],
    [
      "n-gram too long",
      { text: "ingester: { blooms: { ngramLength: 65 } }" },
      "out_of_range",
      "blooms.ngramLength",
    ],
    [
      "override n-gram",
      { text: "ingester: { overrides: { t: { ngramSkip: 99 } } }" },
      "out_of_range",
      "overrides.t.ngramSkip",
    ],
    [
      "false-positive rate of 1",
      { text: "ingester: { overrides: { t: { falsePositiveRate: 1 } } }" },
      "out_of_range",
      "overrides.t.falsePositiveRate",
    ],
    [
      "unknown filter layout",
      { text: "ingester: { blooms: { filterLayout: partitioned } }" },
      "invalid_value",
      "blooms.filterLayout",
    ],
    [
      "bad tenant",
      { text: "ingester: { overrides: { 'a/b': {} } }" },
      "invalid_tenant",
      "ingester.overrides.a/b",
    ],
    [
      "max age under check interval",
      { values: { chunkMaxAgeMs: 100, flushCheckIntervalMs: 1000 } },
      "out_of_range",
      "chunkMaxAgeMs",
    ],
  ];
  it.each(refusals)("refuses %s", (_name, input, code, key) => {
    const path = input.text === undefined ? undefined : files.write(input.text);
    const error = thrown(() =>
      loadConfig({
        ...(path !== undefined && { file: path }),
        env: input.env ?? {},
        ...(input.values && { values: input.values }),
      }),
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe(code);
    if (key !== "") expect((error as ConfigError).key).toBe(key);
  });

  it("an unreadable file is named", () => {
    expect(() => loadConfig({ file: files.path("missing.yaml"), env: {} })).toThrow(
      expect.objectContaining({ code: "unreadable_file" }) as Error,
    );
  });
});
