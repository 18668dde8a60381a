import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, defineSchema, forTenant, loadSection, tenantViews } from "./index.js";
import type { SectionSources } from "./index.js";
import { configFiles, thrown } from "./testing.js";

/** A component shaped like the services: scalars of each kind, a group, tenant overrides. */
interface Limits {
  readonly enabled: boolean;
  readonly maxLineBytes: number;
}
interface WidgetConfig {
  readonly name: string;
  readonly authEnabled: boolean;
  readonly maxBodyBytes: number;
  readonly limits: Limits;
  readonly overrides: Readonly<Record<string, Partial<Limits>>>;
}
const DEFAULTS: WidgetConfig = {
  name: "w",
  authEnabled: false,
  maxBodyBytes: 100,
  limits: { enabled: true, maxLineBytes: 10 },
  overrides: {},
};
const SCHEMA = defineSchema({
  section: "widget",
  envPrefix: "SIEVE_WIDGET_",
  defaults: DEFAULTS,
  group: "limits",
  tenantError: (t) => (t.includes("/") ? "no slash" : undefined),
  min: 0,
});

const files = configFiles();
afterAll(files.remove);

function load(
  s: Omit<SectionSources, "file" | "env"> & { text?: string; env?: SectionSources["env"] },
) {
  const { text, env, ...rest } = s;
  return loadSection(SCHEMA, {
    ...rest,
    env: env ?? {},
    ...(text !== undefined && { file: files.write(text) }),
  });
}

describe("loadSection", () => {
  it("is the defaults with nothing given", () => {
    expect(load({})).toEqual(DEFAULTS);
  });

  it.each<[string, Parameters<typeof load>[0], Partial<WidgetConfig>]>([
    [
      "the file's own section only",
      { text: "widget: { maxBodyBytes: 5 }\nother: { x: 1 }\n" },
      { maxBodyBytes: 5 },
    ],
    ["an empty section", { text: "widget:\n" }, {}],
    [
      "values over the file",
      { text: "widget: { maxBodyBytes: 5, name: a }\n", values: { maxBodyBytes: 6 } },
      { maxBodyBytes: 6, name: "a" },
    ],
    [
      "the environment over values",
      { values: { maxBodyBytes: 6 }, env: { SIEVE_WIDGET_MAX_BODY_BYTES: "7" } },
      { maxBodyBytes: 7 },
    ],
    [
      "overrides over the environment",
      { env: { SIEVE_WIDGET_MAX_BODY_BYTES: "7" }, overrides: { maxBodyBytes: 8 } },
      { maxBodyBytes: 8 },
    ],
    [
      "each kind from the environment",
      { env: { SIEVE_WIDGET_NAME: "x", SIEVE_WIDGET_AUTH_ENABLED: "true" } },
      { name: "x", authEnabled: true },
    ],
    [
      "the group laid over the current group, from every source",
      {
        text: "widget: { limits: { maxLineBytes: 3 } }\n",
        values: { limits: { enabled: false } },
        env: { SIEVE_WIDGET_LIMITS_MAX_LINE_BYTES: "4" },
      },
      { limits: { enabled: false, maxLineBytes: 4 } },
    ],
    [
      "tenant overrides, replaced by a later source",
      {
        text: "widget: { overrides: { a: { maxLineBytes: 1 } } }\n",
        values: { overrides: { b: { enabled: false } } },
      },
      { overrides: { b: { enabled: false } } },
    ],
  ])("reads %s", (_name, sources, expected) => {
    expect(load(sources)).toEqual({ ...DEFAULTS, ...expected });
  });

  it.each<[string, Parameters<typeof load>[0], string, string]>([
    ["an unknown key", { text: "widget: { maxBody: 1 }\n" }, "unknown_key", "widget.maxBody"],
    ["an unknown value key", { values: { maxBody: 1 } }, "unknown_key", "maxBody"],
    ["an unknown override key", { overrides: { nope: 1 } }, "unknown_key", "nope"],
    [
      "an unknown group key",
      { text: "widget: { limits: { x: 1 } }\n" },
      "unknown_key",
      "widget.limits.x",
    ],
    [
      "a group that is not a mapping",
      { text: "widget: { limits: 3 }\n" },
      "invalid_type",
      "widget.limits",
    ],
    [
      "overrides not a mapping",
      { text: "widget: { overrides: [] }\n" },
      "invalid_type",
      "widget.overrides",
    ],
    [
      "a tenant's overrides not a mapping",
      { text: "widget: { overrides: { a: 1 } }\n" },
      "invalid_type",
      "widget.overrides.a",
    ],
    [
      "a refused tenant",
      { text: "widget: { overrides: { 'a/b': {} } }\n" },
      "invalid_tenant",
      "widget.overrides.a/b",
    ],
    [
      "an unknown key in a tenant's overrides",
      { text: "widget: { overrides: { a: { x: 1 } } }\n" },
      "unknown_key",
      "widget.overrides.a.x",
    ],
    [
      "a string for a number",
      { text: "widget: { maxBodyBytes: big }\n" },
      "invalid_type",
      "widget.maxBodyBytes",
    ],
    ["a number for a string", { values: { name: 3 } }, "invalid_type", "name"],
    [
      "below min",
      { text: "widget: { limits: { maxLineBytes: -1 } }\n" },
      "out_of_range",
      "widget.limits.maxLineBytes",
    ],
    [
      "a bad variable",
      { env: { SIEVE_WIDGET_AUTH_ENABLED: "1" } },
      "invalid_type",
      "SIEVE_WIDGET_AUTH_ENABLED",
    ],
    [
      "a bad group variable",
      { env: { SIEVE_WIDGET_LIMITS_MAX_LINE_BYTES: "1.5" } },
      "out_of_range",
      "SIEVE_WIDGET_LIMITS_MAX_LINE_BYTES",
    ],
    ["a section that is not a mapping", { text: "widget: 3\n" }, "invalid_type", "widget"],
    ["a root that is not a mapping", { text: "- 1\n" }, "invalid_type", "(root)"],
  ])("refuses %s by name", (_name, sources, code, key) => {
    const error = thrown(() => load(sources));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ code, key });
  });

  it("reads process.env when no environment is given", () => {
    process.env.SIEVE_WIDGET_NAME = "from-process";
    try {
      expect(loadSection(SCHEMA, {}).name).toBe("from-process");
    } finally {
      delete process.env.SIEVE_WIDGET_NAME;
    }
  });

  it("accepts any tenant without tenantError, and has no overrides without the key", () => {
    const open = defineSchema({ ...SCHEMA, tenantError: undefined });
    const config = loadSection(open, { env: {}, values: { overrides: { "a/b": {} } } });
    expect(config.overrides).toEqual({ "a/b": {} });
    const flat = defineSchema({ section: "f", envPrefix: "F_", defaults: { a: 1 } });
    expect(thrown(() => loadSection(flat, { env: {}, values: { overrides: {} } }))).toMatchObject({
      code: "unknown_key",
      key: "overrides",
    });
  });
});

describe("defineSchema", () => {
  it.each<[string, object, string | undefined]>([
    ["a nested non-group option", { a: { b: 1 } }, undefined],
    ["a group holding a mapping", { g: { b: {} } }, "g"],
    ["overrides without a group", { a: 1, overrides: {} }, undefined],
  ])("refuses %s", (_name, defaults, group) => {
    expect(() =>
      defineSchema({
        section: "s",
        envPrefix: "S_",
        defaults,
        ...(group !== undefined && { group: group as never }),
      }),
    ).toThrow(TypeError);
  });
});

describe("forTenant and tenantViews", () => {
  const base: Limits = { enabled: true, maxLineBytes: 10 };
  const overrides = { a: { maxLineBytes: 1 } };
  it("lays a tenant's overrides over the base, and is the base itself without", () => {
    expect(forTenant(base, overrides, "a")).toEqual({ enabled: true, maxLineBytes: 1 });
    expect(forTenant(base, overrides, "b")).toBe(base);
    expect(forTenant(base, overrides, "toString")).toBe(base);
  });
  it("names the base and each tenant's view", () => {
    expect(tenantViews("limits", base, overrides)).toEqual([
      ["limits", base],
      ["overrides.a", { enabled: true, maxLineBytes: 1 }],
    ]);
  });
});
