import { describe, expect, test } from "vitest";
import { goDuration, parseAddParams, parseDeleteTime, parseGoDurationMs } from "./params.js";

const NOW = 1_700_000_600_000;

describe("the delete API's parameters, as Loki's request handler parses them", () => {
  test.each([
    // [query string, expected (ms) or Loki's error]
    ["query=%7Ba%3D%22b%22%7D&start=1700000000", { startMs: 1_700_000_000_000, endMs: NOW }],
    ["query=%7Ba%3D%22b%22%7D&start=1700000000&end=1700000100", { endMs: 1_700_000_100_000 }],
    ["query=%7Ba%3D%22b%22%7D&start=2023-11-14T22:13:20Z", { startMs: 1_700_000_000_000 }],
    ["query=%7Ba%3D%22b%22%7D&start=2023-11-14T22:13:20.5Z", { startMs: 1_700_000_000_500 }],
    // 10 characters of float seconds: util.ParseTime rounds the fraction to ms.
    ["query=%7Ba%3D%22b%22%7D&start=1700000.25", { startMs: 1_700_000_250 }],
    ["start=1700000000", "query not set"],
    ["query=%7Ba%3D&start=1700000000", "invalid query expression"],
    [
      "query=count_over_time(%7Ba%3D%22b%22%7D%5B1m%5D)&start=1700000000",
      "invalid query expression",
    ],
    ["query=%7Ba%3D%22b%22%7D", "start time not set"],
    // Unix ms or ns are not seconds: Loki wants exactly 10 characters.
    [
      "query=%7Ba%3D%22b%22%7D&start=1700000000000",
      "invalid start time: require unix seconds or RFC3339 format",
    ],
    [
      "query=%7Ba%3D%22b%22%7D&start=1700000000&end=soon",
      "invalid end time: require unix seconds or RFC3339 format",
    ],
    [
      "query=%7Ba%3D%22b%22%7D&start=1700000000&end=1800000000",
      "deletes in the future are not allowed",
    ],
    [
      "query=%7Ba%3D%22b%22%7D&start=1700000100&end=1700000100",
      "start time can't be greater than or equal to end time",
    ],
    // max_interval is read only with a line filter.
    ["query=%7Ba%3D%22b%22%7D&start=1700000000&max_interval=x", { startMs: 1_700_000_000_000 }],
    [
      "query=%7Ba%3D%22b%22%7D%7C%3D%22x%22&start=1700000000&max_interval=x",
      "invalid max_interval: valid time units are 's', 'm', 'h'",
    ],
    [
      "query=%7Ba%3D%22b%22%7D%7C%3D%22x%22&start=1700000000&max_interval=500ms",
      "invalid max_interval: valid time units are 's', 'm', 'h'",
    ],
    [
      "query=%7Ba%3D%22b%22%7D%7C%3D%22x%22&start=1600000000&max_interval=25h",
      "max_interval can't be greater than 24h0m0s",
    ],
    [
      "query=%7Ba%3D%22b%22%7D%7C%3D%22x%22&start=1700000000&max_interval=1h",
      "max_interval can't be greater than the interval to be deleted (10m0s)",
    ],
    [
      "query=%7Ba%3D%22b%22%7D%7C%3D%22x%22&start=1700000000&max_interval=5m",
      { startMs: 1_700_000_000_000 },
    ],
  ])("%s", (qs, want) => {
    const parse = () => parseAddParams(new URLSearchParams(qs), NOW);
    if (typeof want === "string")
      expect(parse).toThrow(new RegExp(`^${want.replace(/[()]/g, "\\$&")}$`));
    else expect(parse()).toMatchObject(want);
  });

  test("times: empty is now, RFC3339 with an offset", () => {
    expect(parseDeleteTime("", NOW)).toBe(NOW);
    expect(parseDeleteTime("2023-11-15T00:13:20+02:00", NOW)).toBe(1_700_000_000_000);
    expect(parseDeleteTime("2023-11-15", NOW)).toBeUndefined();
  });

  test("Go durations both ways (time.ParseDuration, Duration.String)", () => {
    expect(parseGoDurationMs("1h30m")).toBe(5_400_000);
    expect(parseGoDurationMs("1.5s")).toBe(1500);
    expect(parseGoDurationMs("90")).toBeUndefined();
    expect([86_400_000, 90_000, 1500, 500, 60_000, 3_600_000].map(goDuration)).toEqual([
      "24h0m0s",
      "1m30s",
      "1.5s",
      "500ms",
      "1m0s",
      "1h0m0s",
    ]);
  });
});
