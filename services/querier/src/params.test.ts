import { describe, expect, test } from "vitest";
import {
  ParamError,
  defaultStep,
  parseBounds,
  parseExplain,
  parseInstantQuery,
  parsePatternsQuery,
  parsePromDuration,
  parseRangeQuery,
  parseSecondsOrDuration,
  parseTimestamp,
  seriesMatchers,
} from "./params.js";

const S = 1_000_000_000n;
const NOW = 1_700_000_000n * S;

// Expected values follow Loki's parseTimestamp (pkg/loghttp/params.go): RFC 3339 first,
// a dot means float seconds (ms kept) or, above 1e10, ns; integers ≤ 1e10 are seconds.
const timestamps: [string, bigint | string][] = [
  ["", NOW],
  ["1700000000", 1_700_000_000n * S],
  ["1700000000000000000", 1_700_000_000_000_000_000n],
  ["10000000000", 10_000_000_000n * S],
  ["10000000001", 10_000_000_001n],
  ["0", 0n],
  ["-5", -5n * S],
  ["1700000000.5", 1_700_000_000n * S + 500_000_000n],
  ["1700000000.1234", 1_700_000_000n * S + 123_000_000n],
  ["1700000000.9999", 1_700_000_001n * S],
  ["1.7e9.", 'strconv.ParseFloat: parsing "1.7e9.": invalid syntax'],
  ["1.7e9", 1_700_000_000n * S],
  ["1700000000000000000.5", 1_700_000_000_000_000_000n],
  ["2023-11-14T22:13:20Z", 1_700_000_000n * S],
  ["2023-11-14T22:13:20.123456789Z", 1_700_000_000n * S + 123_456_789n],
  ["2023-11-14T23:13:20+01:00", 1_700_000_000n * S],
  ["2023-11-14T22:13:20.5-00:30", 1_700_001_800n * S + 500_000_000n],
  ["2023-02-30T00:00:00Z", 'strconv.ParseInt: parsing "2023-02-30T00:00:00Z": invalid syntax'],
  ["2023-11-14 22:13:20Z", 'strconv.ParseInt: parsing "2023-11-14 22:13:20Z": invalid syntax'],
  ["abc", 'strconv.ParseInt: parsing "abc": invalid syntax'],
  ["9223372036854775808", 'strconv.ParseInt: parsing "9223372036854775808": value out of range'],
  ["NaN.", 'strconv.ParseFloat: parsing "NaN.": invalid syntax'],
  ["1.0e400", 'strconv.ParseFloat: parsing "1.0e400": value out of range'],
];

describe("parseTimestamp", () => {
  test.each(timestamps)("%j", (input, expected) => {
    if (typeof expected === "bigint") expect(parseTimestamp(input, NOW)).toBe(expected);
    else expect(() => parseTimestamp(input, NOW)).toThrow(new ParamError(expected));
  });
});

const durations: [string, bigint | string][] = [
  ["0", 0n],
  ["1h", 3600n * S],
  ["1h30m", 5400n * S],
  ["7d", 7n * 86400n * S],
  ["1y2w", (365n + 14n) * 86400n * S],
  ["500ms", 500_000_000n],
  ["", "empty duration string"],
  ["1.5h", 'not a valid duration string: "1.5h"'],
  ["30m1h", 'not a valid duration string: "30m1h"'],
  ["-1h", 'not a valid duration string: "-1h"'],
];

describe("parsePromDuration (since)", () => {
  test.each(durations)("%j", (input, expected) => {
    if (typeof expected === "bigint") expect(parsePromDuration(input)).toBe(expected);
    else expect(() => parsePromDuration(input)).toThrow(new ParamError(expected));
  });
});

const steps: [string, bigint | string][] = [
  ["15", 15n * S],
  ["0.5", 500_000_000n],
  ["1e1", 10n * S],
  ["-2", -2n * S],
  ["1m", 60n * S],
  ["1h30m", 5400n * S],
  ["abc", 'cannot parse "abc" to a valid duration'],
  ["1e300", 'cannot parse "1e300" to a valid duration. It overflows int64'],
  ["1e400", 'cannot parse "1e400" to a valid duration'],
];

describe("parseSecondsOrDuration (step, interval)", () => {
  test.each(steps)("%j", (input, expected) => {
    if (typeof expected === "bigint") expect(parseSecondsOrDuration(input)).toBe(expected);
    else expect(() => parseSecondsOrDuration(input)).toThrow(new ParamError(expected));
  });
});

const form = (q: Record<string, string | string[]>): URLSearchParams => {
  const f = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) for (const x of [v].flat()) f.append(k, x);
  return f;
};

describe("parseBounds", () => {
  const cases: [Record<string, string>, { start: bigint; end: bigint } | string][] = [
    [{}, { start: NOW - 3600n * S, end: NOW }],
    [{ since: "5m" }, { start: NOW - 300n * S, end: NOW }],
    [{ end: "1600000000" }, { start: 1_600_000_000n * S - 3600n * S, end: 1_600_000_000n * S }],
    // An end in the future: the default start is counted back from now, as Loki does.
    [
      { end: "1800000000", since: "1h" },
      { start: NOW - 3600n * S, end: 1_800_000_000n * S },
    ],
    [
      { start: "1", end: "2" },
      { start: S, end: 2n * S },
    ],
    [{ since: "x" }, `could not parse 'since' parameter: not a valid duration string: "x"`],
    [
      { end: "x" },
      `could not parse 'end' parameter: strconv.ParseInt: parsing "x": invalid syntax`,
    ],
    [
      { start: "x" },
      `could not parse 'start' parameter: strconv.ParseInt: parsing "x": invalid syntax`,
    ],
  ];
  test.each(cases)("%j", (input, expected) => {
    if (typeof expected === "string")
      expect(() => parseBounds(form(input), NOW)).toThrow(new ParamError(expected));
    else expect(parseBounds(form(input), NOW)).toEqual(expected);
  });
});

describe("parseRangeQuery", () => {
  const base = { query: '{a="b"}', start: "1700000000", end: "1700003600" };
  const cases: [Record<string, string>, Record<string, unknown> | string][] = [
    [base, { limit: 100, direction: "backward", step: 14n * S, interval: 0n }],
    [
      { ...base, limit: "5", direction: "FORWARD" },
      { limit: 5, direction: "forward" },
    ],
    [{ ...base, direction: "Backward" }, { direction: "backward" }],
    [{ ...base, step: "60" }, { step: 60n * S }],
    [
      { ...base, step: "1m", interval: "10s" },
      { step: 60n * S, interval: 10n * S },
    ],
    [{ ...base, limit: "0" }, "limit must be a positive value"],
    [{ ...base, limit: "-1" }, "limit must be a positive value"],
    [{ ...base, limit: "ten" }, 'strconv.Atoi: parsing "ten": invalid syntax'],
    [{ ...base, direction: "up" }, "invalid direction 'up'"],
    [{ ...base, end: "1699999999" }, "end timestamp must not be before or equal to start time"],
    [
      { ...base, step: "0" },
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    ],
    [
      { ...base, step: "-1" },
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    ],
    [
      { ...base, step: "0.1" },
      "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter",
    ],
    [{ ...base, interval: "-1s" }, 'cannot parse "-1s" to a valid duration'],
    [{ ...base, interval: "-1" }, "interval must be >= 0"],
  ];
  test.each(cases)("%j", (input, expected) => {
    if (typeof expected === "string")
      expect(() => parseRangeQuery(form(input), NOW)).toThrow(new ParamError(expected));
    else expect(parseRangeQuery(form(input), NOW)).toMatchObject(expected);
  });

  test("the default step is the range over 250 in whole seconds, at least 1s", () => {
    expect(defaultStep(0n, 3600n * S)).toBe(14n * S);
    expect(defaultStep(0n, 100n * S)).toBe(S);
    expect(defaultStep(0n, 86400n * S)).toBe(345n * S);
  });
});

describe("parseInstantQuery", () => {
  test.each([
    [{ query: "x" }, { time: NOW, limit: 100, direction: "backward" }],
    [
      { query: "x", time: "1600000000.25", limit: "7" },
      { time: 1_600_000_000n * S + 250_000_000n, limit: 7 },
    ],
  ] as const)("%j", (input, expected) => {
    expect(parseInstantQuery(form(input), NOW)).toMatchObject(expected);
  });
  test("a bad time is refused in Loki's words", () => {
    expect(() => parseInstantQuery(form({ time: "x" }), NOW)).toThrow(
      new ParamError('strconv.ParseInt: parsing "x": invalid syntax'),
    );
  });
});

describe("seriesMatchers", () => {
  test.each([
    [{ "match[]": ['{a="1"}', '{b="2"}'] }, ['{a="1"}', '{b="2"}']],
    [{ match: '{a="1"}', "match[]": '{a="1"}' }, ['{a="1"}']],
    [{ match: '{b="1"}', "match[]": '{a="1"}' }, ['{a="1"}', '{b="1"}']],
    [{ "match[]": "{ }" }, []],
    [{}, []],
  ] as const)("%j", (input, expected) => {
    expect(seriesMatchers(form(input as Record<string, string | string[]>))).toEqual(expected);
  });
});

describe("parseExplain", () => {
  test.each<[string | undefined, boolean | string]>([
    [undefined, false],
    ["", false],
    ["true", true],
    ["1", true],
    ["TRUE", true],
    ["false", false],
    ["0", false],
    ["yes", 'strconv.ParseBool: parsing "yes": invalid syntax'],
  ])("%j → %j", (value, expected) => {
    const f = form(value === undefined ? {} : { explain: value });
    if (typeof expected === "boolean") expect(parseExplain(f)).toBe(expected);
    else expect(() => parseExplain(f)).toThrow(new ParamError(expected));
  });
});

describe("parsePatternsQuery", () => {
  const base = { query: '{a="b"}', start: "1700000000", end: "1700003600" };
  const cases: [Record<string, string>, Record<string, unknown> | string][] = [
    [base, { query: '{a="b"}', start: 1_700_000_000n * S, end: 1_700_003_600n * S, step: 14n * S }],
    [{ ...base, step: "10s" }, { step: 10n * S }],
    [{ query: '{a="b"}' }, { start: NOW - 3600n * S, end: NOW, step: 14n * S }],
    [{ ...base, end: "1699999999" }, "end timestamp must not be before or equal to start time"],
    [
      { ...base, step: "0" },
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    ],
    [
      { ...base, step: "0.1" },
      "exceeded maximum resolution of 11,000 points per time series. Try increasing the value of the step parameter",
    ],
  ];
  test.each(cases)("%j", (input, expected) => {
    if (typeof expected === "string")
      expect(() => parsePatternsQuery(form(input), NOW)).toThrow(new ParamError(expected));
    else expect(parsePatternsQuery(form(input), NOW)).toMatchObject(expected);
  });
});
