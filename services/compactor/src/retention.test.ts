import { describe, expect, it } from "vitest";
import { loadConfig } from "./config.js";
import { Retention, TenantRetention, parseStreamRetention } from "@sieve/logql";

const DAY = 86_400_000;

describe("retention rules", () => {
  it("parses a rule: period, priority, selector", () => {
    const r = parseStreamRetention('period=48h priority=2 {namespace="dev", app=~"a.*"}');
    expect(r.periodMs).toBe(2 * DAY);
    expect(r.priority).toBe(2);
    expect(r.matchers.map((m) => m.name)).toEqual(["namespace", "app"]);
    expect(parseStreamRetention('period=7d {a="b"}').priority).toBe(0);
  });

  it.each([
    ['{a="b"}', /no period/],
    ['period=1h {a="b"}', /retention period must be >= 24h/],
    ['period=x {a="b"}', /not a duration/],
    ['period=24h prio=1 {a="b"}', /expected period/],
    ["period=24h", /no selector/],
    ['period=24h {a="b"} |= "x"', /selector/],
    ["period=24h {a=}", /selector/],
  ])("refuses %s", (text, message) => {
    expect(() => parseStreamRetention(text)).toThrow(message);
  });

  it("picks the highest priority, of equal priority the shortest, else the tenant's period", () => {
    const t = new TenantRetention({
      retentionPeriodMs: 30 * DAY,
      retentionStream: [
        'period=10d priority=1 {env="dev"}',
        'period=5d priority=1 {env="dev", app="api"}',
        'period=20d priority=2 {app="api"}',
        'period=2d priority=1 {app="noisy"}',
      ],
    });
    expect(t.periodFor({ env: "prod" })).toBe(30 * DAY);
    expect(t.periodFor({ env: "dev" })).toBe(10 * DAY);
    // Both priority-1 rules match: the shorter wins; the priority-2 rule beats both.
    expect(t.periodFor({ env: "dev", app: "api" })).toBe(20 * DAY);
    expect(t.periodFor({ env: "dev", app: "noisy" })).toBe(2 * DAY);
    const now = 100 * DAY;
    expect(t.cutoffNs({ env: "dev" }, now)).toBe(BigInt(90 * DAY) * 1_000_000n);
    const forever = new TenantRetention({ retentionPeriodMs: 0, retentionStream: [] });
    expect(forever.cutoffNs({ env: "dev" }, now)).toBeUndefined();
  });

  it("applies per-tenant overrides, and nothing while retention is off", () => {
    const config = loadConfig({
      doc: {
        compactor: {
          retentionEnabled: true,
          limits: { retentionPeriodMs: 30 * DAY },
          overrides: {
            short: { retentionPeriodMs: 2 * DAY, retentionStream: ['period=1d {a="b"}'] },
          },
        },
      },
      env: {},
    });
    const r = new Retention({ enabled: true, limits: config.limits, overrides: config.overrides });
    expect(r.of("other").periodFor({})).toBe(30 * DAY);
    expect(r.of("short").periodFor({})).toBe(2 * DAY);
    expect(r.of("short").periodFor({ a: "b" })).toBe(DAY);
    const off = new Retention({ ...r.config, enabled: false });
    expect(off.of("short").expires).toBe(false);
  });

  it("names the option of a bad rule or period", () => {
    expect(() =>
      loadConfig({ doc: { compactor: { limits: { retentionStream: ['{a="b"}'] } } }, env: {} }),
    ).toThrow(/compactor\.limits\.retentionStream\[0\].*no period/);
    expect(() =>
      loadConfig({
        doc: { compactor: { overrides: { t: { retentionPeriodMs: 1000 } } } },
        env: {},
      }),
    ).toThrow(/compactor\.overrides\.t\.retentionPeriodMs/);
  });
});
