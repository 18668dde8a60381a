import { countingWrites, FsObjectStore, writeCounter } from "@sieve/storage";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SegmentListings } from "./listings.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-listings-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("SegmentListings", () => {
  it("answers from its cache while no write has settled, and lists anew after one", async () => {
    const counter = writeCounter();
    const raw = new FsObjectStore(dir);
    const store = countingWrites(raw, counter);
    const listings = new SegmentListings(counter);
    let listed = 0;
    const list = (prefix: string) => () => {
      listed++;
      return raw.list(prefix);
    };
    await store.put("t/index/1", new Uint8Array([1]));
    expect(await listings.list("t/index/", list("t/index/"))).toEqual(["t/index/1"]);
    expect(await listings.list("t/index/", list("t/index/"))).toEqual(["t/index/1"]);
    expect(listed).toBe(1);
    // A caller may change the answer it got: the cache keeps its own copy.
    (await listings.list("t/index/", list("t/index/"))).push("junk");
    expect(await listings.list("t/index/", list("t/index/"))).toEqual(["t/index/1"]);
    // Another prefix is listed on its own.
    expect(await listings.list("u/index/", list("u/index/"))).toEqual([]);
    expect(listed).toBe(2);
    // Any write counted (here a segment, as a flush writes it) makes the next call list.
    await store.put("t/index/2", new Uint8Array([2]));
    expect(await listings.list("t/index/", list("t/index/"))).toEqual(["t/index/1", "t/index/2"]);
    await store.delete("t/index/1");
    expect(await listings.list("t/index/", list("t/index/"))).toEqual(["t/index/2"]);
    expect(listed).toBe(4);
  });

  it("without a counter (a store other processes write), lists every time", async () => {
    const raw = new FsObjectStore(dir);
    const listings = new SegmentListings(undefined);
    let listed = 0;
    const list = () => {
      listed++;
      return raw.list("t/");
    };
    await listings.list("t/", list);
    await listings.list("t/", list);
    expect(listed).toBe(2);
  });
});
