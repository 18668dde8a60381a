import { describe, expect, it } from "vitest";
import {
  applyText,
  coerceValue,
  defineSchema,
  loadSection,
  markdownTable,
  optionRows,
  sectionLoader,
} from "./index.js";
import { thrown } from "./testing.js";

/** A shared section shaped like the `sieve` command's `queue`: a list, an optional port, bounds. */
const QUEUE = defineSchema({
  section: "queue",
  defaults: {
    partitions: 4,
    port: null as number | null,
    kafka: { brokers: [] as string[], topic: "t" },
  },
  group: "kafka",
  ranges: { partitions: [1, 16] },
  envAliases: { "kafka.brokers": "OLD_BROKERS" },
  shownDefaults: { port: "none" },
  docs: { partitions: "how many", port: "where", kafka: { brokers: "who", topic: "what" } },
});

describe("coerceValue", () => {
  it.each<[unknown, unknown, boolean, unknown]>([
    [[], ["a", "b"], false, ["a", "b"]],
    [[], " a, ,b ", true, ["a", "b"]],
    [[], "", true, []],
    [[], "a", false, { error: "invalid_type" }],
    [[], [1], false, { error: "invalid_type" }],
    [null, null, false, null],
    [null, "", true, null],
    [null, 9095, false, 9095],
    [null, "0", true, 0],
    [null, "x", true, { error: "invalid_type" }],
  ])("%j ← %j (env %s) → %j", (template, raw, fromEnv, expected) => {
    const run = () => coerceValue("k", template as never, raw, fromEnv);
    if (expected !== null && typeof expected === "object" && "error" in expected) {
      expect(thrown(run)).toMatchObject({ code: expected.error, key: "k" });
    } else {
      expect(run()).toEqual(expected);
    }
  });
});

describe("a section of the shared tree", () => {
  it("reads lists and optional integers from the file and the environment", () => {
    const doc = { queue: { port: 80, kafka: { brokers: ["b:1"] } } };
    expect(loadSection(QUEUE, { doc, env: {} })).toEqual({
      partitions: 4,
      port: 80,
      kafka: { brokers: ["b:1"], topic: "t" },
    });
    const env = { SIEVE_QUEUE_PORT: "", SIEVE_QUEUE_KAFKA_BROKERS: "x:1,y:2" };
    expect(loadSection(QUEUE, { doc, env })).toMatchObject({
      port: null,
      kafka: { brokers: ["x:1", "y:2"] },
    });
  });

  it("reads an older variable name, the rule's name winning", () => {
    expect(loadSection(QUEUE, { env: { OLD_BROKERS: "o:1" } }).kafka.brokers).toEqual(["o:1"]);
    const both = { OLD_BROKERS: "o:1", SIEVE_QUEUE_KAFKA_BROKERS: "n:1" };
    expect(loadSection(QUEUE, { env: both }).kafka.brokers).toEqual(["n:1"]);
  });

  it("bounds single options when read, naming the source", () => {
    expect(
      thrown(() => loadSection(QUEUE, { doc: { queue: { partitions: 17 } }, env: {} })),
    ).toMatchObject({ code: "out_of_range", key: "queue.partitions" });
    const config = loadSection(QUEUE, { env: {} });
    expect(thrown(() => applyText(QUEUE, config, "partitions", "0", "--partitions"))).toMatchObject(
      { code: "out_of_range", key: "--partitions" },
    );
    expect(applyText(QUEUE, config, "kafka.topic", "u", "--topic").kafka.topic).toBe("u");
  });

  it("lays inherited values under the file, and the file is read from a doc", () => {
    const load = sectionLoader(QUEUE, (c) => {
      if (c.partitions === 3) throw new Error("three");
    });
    expect(load({ base: { partitions: 2 }, env: {} }).partitions).toBe(2);
    expect(
      load({ base: { partitions: 2 }, doc: { queue: { partitions: 5 } }, env: {} }).partitions,
    ).toBe(5);
    expect(() => load({ base: { partitions: 3 }, env: {} })).toThrow("three");
    expect(load.schema).toBe(QUEUE);
  });

  it("refuses bounds, shown defaults or older names for options that do not exist", () => {
    expect(() => defineSchema({ ...QUEUE, ranges: { nope: [0, 1] } })).toThrow(TypeError);
    expect(() => defineSchema({ ...QUEUE, envAliases: { "kafka.nope": "X" } })).toThrow(TypeError);
  });
});

describe("documentation from the schema", () => {
  it("lists every option with its variable, older name, default and doc line", () => {
    expect(optionRows(QUEUE, "queue.")).toEqual([
      {
        option: "queue.partitions",
        env: "SIEVE_QUEUE_PARTITIONS",
        shownDefault: "4",
        doc: "how many",
      },
      { option: "queue.port", env: "SIEVE_QUEUE_PORT", shownDefault: "none", doc: "where" },
      {
        option: "queue.kafka.brokers",
        env: "SIEVE_QUEUE_KAFKA_BROKERS",
        alias: "OLD_BROKERS",
        shownDefault: "",
        doc: "who",
      },
      {
        option: "queue.kafka.topic",
        env: "SIEVE_QUEUE_KAFKA_TOPIC",
        shownDefault: "`t`",
        doc: "what",
      },
    ]);
  });

  it("refuses an option without a doc line", () => {
    const bare = defineSchema({ section: "b", defaults: { a: 1 } });
    expect(() => optionRows(bare)).toThrow(/b\.a: every option needs a one-line doc/);
  });

  it("lays a table out as prettier does", () => {
    expect(markdownTable(["a", "long header"], [["x|y", "z"]])).toBe(
      ["| a    | long header |", "| ---- | ----------- |", "| x\\|y | z           |"].join("\n"),
    );
  });
});
