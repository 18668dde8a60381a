import { parseExpr, type LogExpr } from "@sieve/logql";
import { describe, expect, it } from "vitest";
import { DEFAULT_QUERY_LIMITS, smallestLimits, type QueryLimits } from "./config.js";
import { splitTenantMatchers, tenantsOf } from "./multi-tenant.js";

const matchersOf = (selector: string) => (parseExpr(selector) as LogExpr).matchers;

describe("splitTenantMatchers (Loki's removal of __tenant_id__ matchers)", () => {
  it.each<[string, string[], string[]]>([
    ['{app="api"}', ["a", "b", "c"], ["a", "b", "c"]],
    ['{app="api", __tenant_id__="b"}', ["a", "b", "c"], ["b"]],
    ['{app="api", __tenant_id__!="b"}', ["a", "b", "c"], ["a", "c"]],
    ['{app="api", __tenant_id__=~"a|c"}', ["a", "b", "c"], ["a", "c"]],
    ['{app="api", __tenant_id__!~"a.*"}', ["a", "ab", "c"], ["c"]],
    ['{app="api", __tenant_id__="x"}', ["a", "b"], []],
  ])("%s over %j admits %j", (selector, tenants, admitted) => {
    const { matchers, admits } = splitTenantMatchers(matchersOf(selector));
    expect(matchers.map((m) => m.name)).toEqual(["app"]);
    expect(tenants.filter(admits)).toEqual(admitted);
  });

  it("tenantsOf splits X-Scope-OrgID's `|`", () => {
    expect(tenantsOf("a|b|c")).toEqual(["a", "b", "c"]);
    expect(tenantsOf("a")).toEqual(["a"]);
  });
});

describe("smallestLimits (Loki's SmallestPositiveNonZero…PerTenant)", () => {
  it("takes each limit's smallest positive value; 0 only when no tenant has one", () => {
    const a: QueryLimits = {
      ...DEFAULT_QUERY_LIMITS,
      maxEntriesLimitPerQuery: 100,
      queryTimeoutMs: 0,
    };
    const b: QueryLimits = {
      ...DEFAULT_QUERY_LIMITS,
      maxEntriesLimitPerQuery: 0,
      queryTimeoutMs: 0,
    };
    const c: QueryLimits = {
      ...DEFAULT_QUERY_LIMITS,
      maxEntriesLimitPerQuery: 50,
      queryTimeoutMs: 0,
    };
    expect(smallestLimits([a, b, c])).toEqual({
      ...DEFAULT_QUERY_LIMITS,
      maxEntriesLimitPerQuery: 50,
      queryTimeoutMs: 0,
    });
  });

  it("keeps a switch on only when every tenant has it on", () => {
    const on: QueryLimits = { ...DEFAULT_QUERY_LIMITS, volumeEnabled: true };
    const off: QueryLimits = { ...DEFAULT_QUERY_LIMITS, volumeEnabled: false };
    expect(smallestLimits([on, on]).volumeEnabled).toBe(true);
    expect(smallestLimits([on, off]).volumeEnabled).toBe(false);
  });
});
