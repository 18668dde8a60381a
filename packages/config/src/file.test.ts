import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, layerMappings, readConfigFile, readConfigFiles, section } from "./index.js";
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

describe("layerMappings", () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>, Record<string, unknown>]>([
    ["a new key is added", { a: 1 }, { b: 2 }, { a: 1, b: 2 }],
    ["a scalar replaces", { a: 1 }, { a: 2 }, { a: 2 }],
    [
      "mappings merge at every depth",
      { s: { t: { a: 1, b: 1 } } },
      { s: { t: { b: 2 } } },
      { s: { t: { a: 1, b: 2 } } },
    ],
    ["a list replaces whole", { urls: ["a", "b"] }, { urls: ["c"] }, { urls: ["c"] }],
    ["a null over a mapping leaves it", { s: { a: 1 } }, { s: null }, { s: { a: 1 } }],
    ["a null over a scalar replaces it", { a: 1 }, { a: null }, { a: null }],
    ["a scalar over a mapping replaces it", { s: { a: 1 } }, { s: 3 }, { s: 3 }],
  ])("%s", (_name, base, over, expected) => {
    const before = structuredClone(base);
    expect(layerMappings(base, over)).toEqual(expected);
    expect(base).toEqual(before);
  });
});

describe("readConfigFiles", () => {
  it("lays each file over the ones before it", () => {
    const common = files.write(
      "server: { port: 3100 }\nqueue: { partitions: 8, kafka: { topic: t } }\n",
    );
    const role = files.write("queue:\n  kafka: { groupId: g }\ningester:\n  # nothing yet\n");
    expect(readConfigFiles([common, role])).toEqual({
      server: { port: 3100 },
      queue: { partitions: 8, kafka: { topic: "t", groupId: "g" } },
      ingester: null,
    });
    expect(readConfigFiles([])).toEqual({});
  });

  it("names the file that fails", () => {
    const good = files.write("a: 1\n");
    const error = thrown(() => readConfigFiles([good, files.path("absent-2.yaml")]));
    expect((error as ConfigError).code).toBe("unreadable_file");
    expect((error as ConfigError).key).toMatch(/absent-2\.yaml$/);
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
