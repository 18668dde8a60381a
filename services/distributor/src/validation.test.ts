import { describe, expect, it } from "vitest";
import { byteSize, rfc3339 } from "./validation.js";

describe("formatting as Loki", () => {
  it.each([
    [3 * 1024 * 1024, "3MB"],
    [15 * 1024 * 1024, "15MB"],
    [1024, "1KB"],
    [1500, "1500B"],
    [2 * 1024 ** 3, "2GB"],
    [0, "0B"],
  ])("byteSize(%i) = %s", (n, s) => {
    expect(byteSize(n)).toBe(s);
  });

  it.each([
    [0n, "1970-01-01T00:00:00Z"],
    [1_767_268_800_123_456_789n, "2026-01-01T12:00:00Z"],
  ])("rfc3339(%s) = %s", (ns, s) => {
    expect(rfc3339(ns)).toBe(s);
  });
});
