import { describe, expect, it } from "vitest";
import { requestTenant, requestTenants, tenantIdError } from "./tenant.js";

describe("tenantIdError (dskit tenant.ValidTenantID)", () => {
  it.each<[string, string | undefined]>([
    ["fake", undefined],
    ["Team-1_a.b*c'(d)!", undefined],
    ["x".repeat(150), undefined],
    ["x".repeat(151), "tenant ID is too long: max 150 characters"],
    ["a b", "tenant ID 'a b' contains unsupported character ' '"],
    ["a/b", "tenant ID 'a/b' contains unsupported character '/'"],
    ["a|b", "tenant ID 'a|b' contains unsupported character '|'"],
    ["é", "tenant ID 'é' contains unsupported character 'é'"],
    [".", "tenant ID is '.' or '..'"],
    ["..", "tenant ID is '.' or '..'"],
    ["...", undefined],
    ["", "no org id"],
  ])("%j → %s", (id, error) => {
    expect(tenantIdError(id)).toBe(error);
  });
});

describe("requestTenant (X-Scope-OrgID, as dskit's ExtractOrgID)", () => {
  it.each<[string | string[] | undefined, boolean, ReturnType<typeof requestTenant>]>([
    [undefined, false, "fake"],
    ["team-a", false, "fake"],
    ["team-a", true, "team-a"],
    [["team-a", "team-b"], true, "team-a"],
    [undefined, true, { status: 401, message: "no org id" }],
    ["", true, { status: 401, message: "no org id" }],
    [[], true, { status: 401, message: "no org id" }],
    ["a/b", true, { status: 400, message: "tenant ID 'a/b' contains unsupported character '/'" }],
  ])("%j with auth %s → %j", (header, authEnabled, want) => {
    expect(requestTenant(header, authEnabled)).toEqual(want);
  });
});

describe("requestTenants (X-Scope-OrgID: a|b, as dskit's TenantIDs)", () => {
  it.each<[string | string[] | undefined, ReturnType<typeof requestTenants>]>([
    [undefined, undefined],
    ["team-a", undefined],
    ["b|a", "a|b"],
    ["b|a|b", "a|b"],
    ["a|a", "a"],
    [["b|a", "c"], "a|b"],
    ["a|", { status: 400, message: "no org id" }],
    ["a|x/y", { status: 400, message: "tenant ID 'x/y' contains unsupported character '/'" }],
  ])("%j → %j", (header, want) => {
    expect(requestTenants(header)).toEqual(want);
  });
});
