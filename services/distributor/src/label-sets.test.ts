import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_LIMITS } from "./limits.js";
import { LabelSetCache, readLabelText, withServiceName } from "./label-sets.js";

describe("the label set cache", () => {
  // Valid sets of ~20 characters, sets that do not parse, and sets of ~60 (over a 256th of
  // the 12,800 characters the caches below hold: read every time).
  const text = (valid: number) =>
    fc.oneof(
      { weight: 8, arbitrary: fc.nat(valid).map((i) => `{app="a${i}", job="j"}`) },
      { weight: 1, arbitrary: fc.nat(5).map((i) => `{app="b${i}"`) },
      { weight: 1, arbitrary: fc.nat(3).map((i) => `{app="${"x".repeat(55 + i)}"}`) },
    );
  const discover = fc.constantFrom<readonly string[]>([], ["job"], ["app", "job"]);

  it.each([
    ["sets", 8, 30, 200],
    ["characters", 10_000, 1_000, 2_500],
  ])(
    "answers what reading the text answers, within its bound on %s",
    (_bound, maxSets, valid, reads) => {
      fc.assert(
        fc.property(
          discover,
          fc.array(text(valid), { minLength: reads, maxLength: reads }),
          (d, seq) => {
            const cache = new LabelSetCache(maxSets, 12_800);
            for (const t of seq) {
              expect(cache.read(t, d, JSON.stringify(d))).toEqual(readLabelText(t, d));
              expect(cache.size).toBeLessThanOrEqual(maxSets);
              expect(cache.chars).toBeLessThanOrEqual(12_800);
            }
          },
        ),
        // No shrinking: a sequence of 2,500 reads shrinks for minutes.
        { numRuns: 20, endOnFailure: true },
      );
    },
  );

  it("keeps a set read twice, counts its characters, and keeps none over a 256th of them", () => {
    const cache = new LabelSetCache(8, 12_800);
    const short = '{a="1"}';
    const first = cache.read(short, [], "[]");
    expect(cache.read(short, [], "[]")).toBe(first);
    expect([cache.size, cache.chars]).toEqual([1, short.length]);
    cache.read(`{a="${"x".repeat(50)}"}`, [], "[]");
    expect([cache.size, cache.chars]).toEqual([1, short.length]);
    cache.read(short, ["a"], '["a"]');
    expect([cache.size, cache.chars]).toEqual([1, short.length]);
  });
});

describe("service_name discovery (Loki's discover_service_name)", () => {
  const l = (o: Record<string, string>) =>
    Object.entries(o).map(([name, value]) => ({ name, value }));
  it.each<[string, Record<string, string>, readonly string[], Record<string, string>]>([
    [
      "the first label of the list",
      { job: "j", app: "a" },
      DEFAULT_LIMITS.discoverServiceName,
      { app: "a", job: "j", service_name: "a" },
    ],
    [
      "none on the list",
      { foo: "bar" },
      DEFAULT_LIMITS.discoverServiceName,
      { foo: "bar", service_name: "unknown_service" },
    ],
    [
      "an empty value does not name it",
      { app: "", job: "j" },
      ["app", "job"],
      { app: "", job: "j", service_name: "j" },
    ],
    [
      "service_name already set",
      { service_name: "s", app: "a" },
      DEFAULT_LIMITS.discoverServiceName,
      { app: "a", service_name: "s" },
    ],
    [
      "an aggregated metric stream",
      { __aggregated_metric__: "x" },
      DEFAULT_LIMITS.discoverServiceName,
      { __aggregated_metric__: "x" },
    ],
    ["discovery off", { app: "a" }, [], { app: "a" }],
  ])("%s", (_name, labels, discover, want) => {
    // Labels arrive sorted by name, as parsing leaves them.
    const sorted = l(labels).sort((a, b) => (a.name < b.name ? -1 : 1));
    expect(withServiceName(sorted, discover)).toEqual(
      l(want).sort((a, b) => (a.name < b.name ? -1 : 1)),
    );
  });
});
