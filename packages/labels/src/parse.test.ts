import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { labelsString } from "./canonical.js";
import { LabelsError } from "./errors.js";
import { parseLabels } from "./parse.js";

const L = (...pairs: [string, string][]) => pairs.map(([name, value]) => ({ name, value }));

describe("parseLabels", () => {
  it.each<[string, string, ReturnType<typeof L>]>([
    ["canonical", '{a="b", c="d"}', L(["a", "b"], ["c", "d"])],
    ["empty", "{}", []],
    ["unsorted", '{job="x", app="y"}', L(["app", "y"], ["job", "x"])],
    ["no spaces", '{a="1",b="2"}', L(["a", "1"], ["b", "2"])],
    ["extra spaces", '  {  a = "1" ,\tb="2"  }  ', L(["a", "1"], ["b", "2"])],
    ["trailing comma", '{a="1",}', L(["a", "1"])],
    ["quoted names", '{"app"="x", "job"="y"}', L(["app", "x"], ["job", "y"])],
    ["empty value dropped", '{a="", b="x"}', L(["b", "x"])],
    ["duplicates kept, adjacent", '{b="1", a="x", b="2"}', L(["a", "x"], ["b", "1"], ["b", "2"])],
    ["escapes", String.raw`{a="q\"\\\n\t"}`, L(["a", 'q"\\\n\t'])],
    ["hex, octal, unicode", String.raw`{a="\x41\101\u00e9\U0001F600"}`, L(["a", "AAé😀"])],
    ["single quotes", "{a='it\\'s'}", L(["a", "it's"])],
    ["raw string", "{a=`C:\\dir`}", L(["a", "C:\\dir"])],
    ["unicode value", '{a="ünï ✓"}', L(["a", "ünï ✓"])],
    ["underscores and digits", '{__name__="m", _a1="v"}', L(["__name__", "m"], ["_a1", "v"])],
  ])("%s: %s", (_name, input, expected) => {
    expect(parseLabels(input)).toEqual(expected);
  });

  it.each<[string, string, string, number]>([
    ["not a label set", "app=x", "parse_error", 1],
    ["missing brace", '{a="b"', "parse_error", 7],
    ["unquoted value", "{a=b}", "parse_error", 4],
    ["missing =", '{a "b"}', "parse_error", 4],
    ["unterminated", '{a="b}', "parse_error", 4],
    ["newline in value", '{a="b\nc"}', "parse_error", 4],
    ["bad escape", String.raw`{a="\q"}`, "parse_error", 5],
    ["short hex", String.raw`{a="\x4"}`, "parse_error", 5],
    ["surrogate escape", String.raw`{a="\ud800"}`, "parse_error", 5],
    ["missing comma", '{a="1" b="2"}', "parse_error", 8],
    ["trailing text", '{a="1"} x', "parse_error", 9],
    ["name starts with digit", '{1a="x"}', "invalid_label_name", 2],
    ["quoted name with a dot", '{"a.b"="x"}', "invalid_label_name", 2],
    ["dash in name", '{a-b="x"}', "parse_error", 3],
    ["empty quoted name", '{""="x"}', "invalid_label_name", 2],
  ])("rejects %s: %s", (_name, input, code, column) => {
    let caught: unknown;
    try {
      parseLabels(input);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(LabelsError);
    expect((caught as LabelsError).code).toBe(code);
    expect((caught as LabelsError).column).toBe(column);
    expect((caught as LabelsError).message).toMatch(new RegExp(`^1:${column}: `));
  });

  it("parses what labelsString prints, for any label set", () => {
    const name = fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,10}$/);
    const value = fc.string({ minLength: 1, unit: "grapheme" });
    fc.assert(
      fc.property(fc.uniqueArray(fc.record({ name, value }), { selector: (l) => l.name }), (ls) => {
        const sorted = [...ls].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        expect(parseLabels(labelsString(sorted))).toEqual(sorted);
      }),
    );
  });

  it("never throws anything but LabelsError", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        try {
          parseLabels(s);
        } catch (error) {
          expect(error).toBeInstanceOf(LabelsError);
        }
      }),
    );
  });
});
