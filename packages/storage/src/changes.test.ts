import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { countingWrites, writeCounter, writesSoFar } from "./changes.js";
import { FsObjectStore } from "./fs.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-changes-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("countingWrites", () => {
  it("counts every write and delete once it settles, and no read", async () => {
    const counter = writeCounter();
    const store = countingWrites(new FsObjectStore(dir), counter);
    const bytes = new TextEncoder().encode("x");
    expect(writesSoFar(counter)).toBe(0);
    await store.put("a/1", bytes);
    const tag = await store.putIf("a/2", bytes, { ifNoneMatch: "*" });
    await store.putIf("a/2", bytes, { ifMatch: tag });
    expect(writesSoFar(counter)).toBe(3);
    await store.get("a/1");
    await store.getRange("a/1", 0, 1);
    await store.head("a/1");
    await store.getTagged("a/2");
    expect(await store.list("a/")).toEqual(["a/1", "a/2"]);
    expect((await store.listInfo("a/")).map((o) => o.key)).toEqual(["a/1", "a/2"]);
    expect(writesSoFar(counter)).toBe(3);
    await store.delete("a/1");
    expect(writesSoFar(counter)).toBe(4);
    // A refused write still counts: a write that failed for want of an answer may have landed.
    await expect(store.putIf("a/2", bytes, { ifNoneMatch: "*" })).rejects.toThrow();
    expect(writesSoFar(counter)).toBe(5);
  });

  it("is one count for every store wrapping the same counter (as the threads of a process)", async () => {
    const counter = writeCounter();
    const one = countingWrites(new FsObjectStore(dir), counter);
    const other = countingWrites(new FsObjectStore(dir), counter);
    await one.put("k", new Uint8Array([1]));
    await other.delete("k");
    expect(writesSoFar(counter)).toBe(2);
  });
});
