import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, readConfigFile, section } from "./index.js";
import { configFiles, thrown } from "./testing.js";

const files = configFiles();
afterAll(files.remove);

describe("readConfigFile", () => {
  it.each<[string, string, Record<string, unknown>]>([
    ["an empty file", "", {}],
    ["a comment only", "# nothing\n", {}],
    ["a mapping", "a: 1\nb: { c: true }\n", { a: 1, b: { c: true } }],
  ])("reads %s", (_name, text, expected) => {
    expect(readConfigFile(files.write(text))).toEqual(expected);
  });

  it.each<[string, string | undefined, string, string | RegExp]>([
    ["a missing file", undefined, "unreadable_file", /absent\.yaml$/],
    ["a file that is not YAML", "a: [\n", "invalid_yaml", /\.yaml$/],
    ["a sequence at the root", "- 1\n", "invalid_type", "(root)"],
    ["a scalar at the root", "3\n", "invalid_type", "(root)"],
  ])("refuses %s by name", (_name, text, code, key) => {
    const path = text === undefined ? files.path("absent.yaml") : files.write(text);
    const error = thrown(() => readConfigFile(path));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe(code);
    expect((error as ConfigError).key).toMatch(key);
    expect((error as ConfigError).message).toMatch(/^[a-z].*: .*: /);
  });
});

describe("section", () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown> | string]>([
    ["absent", { other: { a: 1 } }, {}],
    ["null", { querier: null }, {}],
    ["a mapping", { querier: { a: 1 } }, { a: 1 }],
    ["a number", { querier: 3 }, "invalid_type"],
    ["a sequence", { querier: [1] }, "invalid_type"],
  ])("%s", (_name, doc, expected) => {
    if (typeof expected !== "string") {
      expect(section(doc, "querier")).toEqual(expected);
      return;
    }
    const error = thrown(() => section(doc, "querier"));
    expect(error).toMatchObject({ code: expected, key: "querier" });
  });
});
