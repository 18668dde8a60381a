import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deleteRequestKey, encodeDeleteRequest, type DeleteRequestRecord } from "@sieve/index";
import { FsObjectStore } from "@sieve/storage";
import { afterEach, describe, expect, test } from "vitest";
import { StoreDeleteRequests } from "./deletes.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function store(): Promise<FsObjectStore> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-querier-deletes-"));
  dirs.push(dir);
  return new FsObjectStore(dir);
}

const request = (over: Partial<DeleteRequestRecord> = {}): DeleteRequestRecord => ({
  requestId: "0000abcd",
  tenant: "t",
  query: '{app="api"} |= "secret"',
  startMs: 1000,
  endMs: 2000,
  createdMs: 0,
  status: "received",
  ...over,
});

/** A store that counts its listings: what a query without requests must not pay for. */
function counting(s: FsObjectStore) {
  const counted = {
    lists: 0,
    get: s.get.bind(s),
    list: (p: string) => (counted.lists++, s.list(p)),
  };
  return counted;
}

describe("query-time filtering reads the tenant's requests from the store", () => {
  test("a live request applies to the queries overlapping it, with its range in ns", async () => {
    const s = await store();
    await s.put(deleteRequestKey("t", "0000abcd"), encodeDeleteRequest(request()));
    const source = new StoreDeleteRequests(s, { cacheMs: 0, enabled: () => true });
    const got = await source.forQuery("t", 0n, 5_000_000_000n);
    expect(got?.specs).toEqual([
      { query: '{app="api"} |= "secret"', start: 1_000_000_000n, end: 2_000_000_000n },
    ]);
    expect(await source.forQuery("t", 2_000_000_001n, 9_000_000_000n)).toBeUndefined();
    expect(await source.forQuery("other", 0n, 5_000_000_000n)).toBeUndefined();
  });

  test("processed requests stop filtering 10 minutes after processing", async () => {
    const s = await store();
    await s.put(
      deleteRequestKey("t", "0000abcd"),
      encodeDeleteRequest(request({ status: "processed", processedMs: 1_000_000 })),
    );
    let now = 1_000_000 + 599_999;
    const source = new StoreDeleteRequests(s, { cacheMs: 0, enabled: () => true, now: () => now });
    expect(await source.forQuery("t", 0n, 5_000_000_000n)).toBeDefined();
    now += 1;
    expect(await source.forQuery("t", 0n, 5_000_000_000n)).toBeUndefined();
  });

  test("cached for cacheMs; a disabled tenant is never read", async () => {
    const s = await store();
    const c = counting(s);
    let now = 0;
    const source = new StoreDeleteRequests(c, {
      cacheMs: 10_000,
      enabled: (t) => t !== "off",
      now: () => now,
    });
    for (let i = 0; i < 100; i++) expect(await source.forQuery("t", 0n, 1n)).toBeUndefined();
    expect(c.lists).toBe(1);
    await s.put(deleteRequestKey("t", "0000abcd"), encodeDeleteRequest(request()));
    now = 10_000;
    expect(await source.forQuery("t", 0n, 5_000_000_000n)).toBeDefined();
    expect(c.lists).toBe(2);
    await s.put(
      deleteRequestKey("off", "0000abcd"),
      encodeDeleteRequest(request({ tenant: "off" })),
    );
    expect(await source.forQuery("off", 0n, 5_000_000_000n)).toBeUndefined();
    expect(c.lists).toBe(2);
  });
});
