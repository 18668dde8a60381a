import { describe, expect, it } from "vitest";
import { tenantIdError } from "./tenant.js";

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
