import { configFiles, thrown } from "@sieve/config/testing";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_CONFIG, loadConfig } from "./config.js";

const files = configFiles();
afterAll(files.remove);

describe("loadConfig", () => {
  it("works with no file and no environment: Loki's defaults", () => {
    const config = loadConfig({ env: {} });
    expect(config).toEqual(DEFAULT_CONFIG);
    expect(config.limits.maxLineBytes).toBe(262_144);
    expect(config.limits.maxLabelNamesPerSeries).toBe(15);
    expect(config.limits.rejectOldSamplesMaxAgeMs).toBe(7 * 24 * 3600 * 1000);
    expect(config.authEnabled).toBe(false);
  });

  it("reads the distributor section of a YAML file, then environment overrides", () => {
    const path = files.write(`
distributor:
  authEnabled: true
  maxBodyBytes: 1000
  limits:
    maxLineBytes: 100
    ingestionRateBytes: 5000
  overrides:
    team-a:
      maxLineBytes: 50
querier: { ignored: true }
`);
    const config = loadConfig({
      file: path,
      env: {
        SIEVE_DISTRIBUTOR_MAX_BODY_BYTES: "2000",
        SIEVE_DISTRIBUTOR_LIMITS_INGESTION_RATE_BYTES: "7000",
        SIEVE_DISTRIBUTOR_AUTH_ENABLED: "false",
      },
    });
    expect(config.authEnabled).toBe(false);
    expect(config.maxBodyBytes).toBe(2000);
    expect(config.limits.maxLineBytes).toBe(100);
    expect(config.limits.ingestionRateBytes).toBe(7000);
    expect(config.limits.maxLabelValueLength).toBe(2048);
    expect(config.overrides).toEqual({ "team-a": { maxLineBytes: 50 } });
  });

  it.each<[string, string | undefined, Record<string, string>, string, string]>([
    ["unknown key", "distributor:\n  maxBody: 1\n", {}, "unknown_key", "distributor.maxBody"],
    [
      "unknown limit",
      "distributor:\n  limits:\n    maxLines: 1\n",
      {},
      "unknown_key",
      "distributor.limits.maxLines",
    ],
    [
      "string for a number",
      "distributor:\n  maxBodyBytes: big\n",
      {},
      "invalid_type",
      "distributor.maxBodyBytes",
    ],
    [
      "negative",
      "distributor:\n  limits:\n    maxLineBytes: -1\n",
      {},
      "out_of_range",
      "distributor.limits.maxLineBytes",
    ],
    ["zero body", "distributor:\n  maxBodyBytes: 0\n", {}, "out_of_range", "maxBodyBytes"],
    [
      "zero rate",
      "distributor:\n  limits:\n    ingestionRateBytes: 0\n",
      {},
      "out_of_range",
      "limits.ingestionRateBytes",
    ],
    ["not YAML", "distributor: [\n", {}, "invalid_yaml", ""],
    ["section not a mapping", "distributor: 3\n", {}, "invalid_type", "distributor"],
    [
      "bad tenant in overrides",
      "distributor:\n  overrides:\n    a/b: {}\n",
      {},
      "invalid_tenant",
      "distributor.overrides.a/b",
    ],
    [
      "bad env boolean",
      undefined,
      { SIEVE_DISTRIBUTOR_AUTH_ENABLED: "yes" },
      "invalid_type",
      "SIEVE_DISTRIBUTOR_AUTH_ENABLED",
    ],
    [
      "bad env number",
      undefined,
      { SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES: "1.5" },
      "out_of_range",
      "SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES",
    ],
  ])("refuses %s with a named error", (_name, yaml, env, code, key) => {
    const path = yaml === undefined ? undefined : files.write(yaml);
    const caught = thrown(() => loadConfig({ ...(path !== undefined && { file: path }), env }));
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).code).toBe(code);
    if (key !== "") expect((caught as ConfigError).key).toBe(key);
  });

  it("names a missing file", () => {
    expect(() => loadConfig({ file: files.path("absent.yaml"), env: {} })).toThrow(
      /cannot read the configuration file/,
    );
  });
});
