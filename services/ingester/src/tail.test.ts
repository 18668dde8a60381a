import type { Entry } from "@sieve/chunk";
import type { IngesterStream } from "@sieve/proto";
import { describe, expect, test } from "vitest";
import { Tails } from "./tail.js";

const api = { labels: '{app="api"}', labelMap: { app: "api" }, fingerprint: 1n };
const web = { labels: '{app="web"}', labelMap: { app: "web" }, fingerprint: 2n };

function entries(...lines: string[]): Entry[] {
  return lines.map((line, i) => ({ timestamp: BigInt(i + 1), line, structuredMetadata: [] }));
}

function collect(tails: Tails, tenant: string, selector: string) {
  const got: IngesterStream[] = [];
  const ended: Error[] = [];
  const tail = tails.add(
    { tenant, selector },
    { entries: (s) => got.push(s), ended: (e) => ended.push(e) },
  );
  return { tail, got, ended };
}

describe("Tails", () => {
  test("pushes what is appended to matching streams of the tenant, after the pipeline", async () => {
    const tails = new Tails();
    const t = collect(tails, "t1", '{app="api"} |= "keep" | line_format "> {{__line__}}"');
    await t.tail.held;
    expect(tails.has("t1")).toBe(true);
    expect(tails.has("t2")).toBe(false);
    tails.notify("t1", api, entries("keep 1", "drop", "keep 2"));
    tails.notify("t1", web, entries("keep web"));
    tails.notify("t2", api, entries("keep other tenant"));
    expect(t.got).toEqual([
      {
        ...api,
        entries: [
          { timestamp: 1n, line: "> keep 1", structuredMetadata: {} },
          { timestamp: 3n, line: "> keep 2", structuredMetadata: {} },
        ],
      },
    ]);
  });

  test("a closed tail gets nothing more, and its tenant is forgotten", async () => {
    const tails = new Tails();
    const t = collect(tails, "t1", '{app="api"}');
    await t.tail.held;
    t.tail.close();
    expect(tails.size).toBe(0);
    expect(tails.has("t1")).toBe(false);
    tails.notify("t1", api, entries("x"));
    expect(t.got).toEqual([]);
  });

  test("a selector that does not parse is refused", async () => {
    const tails = new Tails();
    const t = collect(tails, "t1", '{app="api"');
    await expect(t.tail.held).rejects.toMatchObject({ code: "invalid_selector" });
    expect(tails.size).toBe(0);
  });

  test("endAll tells every tail why", async () => {
    const tails = new Tails();
    const a = collect(tails, "t1", '{app="api"}');
    const b = collect(tails, "t2", '{app="web"}');
    await Promise.all([a.tail.held, b.tail.held]);
    tails.endAll(new Error("stopping"));
    expect(a.ended.map((e) => e.message)).toEqual(["stopping"]);
    expect(b.ended.map((e) => e.message)).toEqual(["stopping"]);
    expect(tails.size).toBe(0);
  });
});
