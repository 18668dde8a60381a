// Tests import workspace packages from source: `@sieve/x` (and every other entry of a
// package's "exports", such as `@sieve/config/testing`) must be the very module at
// `src/…ts`, not the built `dist/…js` that node_modules points at, or a stale build could
// make a test pass. vitest.config.ts generates the aliases; this checks each of them from
// the package.json files themselves, so a package whose entry has no source fails here.
import { existsSync } from "node:fs";
import { relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { sourceEntries } from "../scripts/workspace.js";

const ROOT = resolve(import.meta.dirname, "..");

const ENTRIES = sourceEntries(ROOT);

describe("workspace packages in tests", () => {
  it("finds every package, including an entry below the root (`@sieve/config/testing`)", () => {
    const specifiers = ENTRIES.map((entry) => entry.specifier);
    expect(specifiers).toContain("@sieve/labels");
    expect(specifiers).toContain("@sieve/config/testing");
    expect(specifiers.length).toBeGreaterThanOrEqual(14);
  });

  it.each(ENTRIES)("$specifier is its source module", async ({ specifier, source }) => {
    expect(existsSync(source), `${relative(ROOT, source)} exists`).toBe(true);
    // One module id, one instance: the same namespace object only if the name resolved to
    // this very file (the built file would be a second, different module).
    const byName: unknown = await import(/* @vite-ignore */ specifier);
    const bySource: unknown = await import(/* @vite-ignore */ source);
    expect(byName).toBe(bySource);
  });
});
