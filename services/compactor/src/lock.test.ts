import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FsObjectStore } from "@sieve/storage";
import { afterEach, describe, expect, it } from "vitest";
import { CompactorLock, LOCK_KEY, LockLostError, parseLease } from "./lock.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function store(): Promise<FsObjectStore> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-lock-"));
  dirs.push(dir);
  return new FsObjectStore(dir);
}

/** A clock the test moves. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe("CompactorLock", () => {
  it("one of two takes the lease; the other waits until it stops changing for a whole ttl", async () => {
    const s = await store();
    const c = clock();
    const a = new CompactorLock(s, { owner: "a", ttlMs: 1000, now: c.now });
    const b = new CompactorLock(s, { owner: "b", ttlMs: 1000, now: c.now });
    const [ga, gb] = await Promise.all([a.acquire(), b.acquire()]);
    expect([ga, gb].filter(Boolean)).toHaveLength(1);
    const [holder, waiter] = ga ? [a, b] : [b, a];
    expect(holder.held).toBe(true);
    expect(waiter.held).toBe(false);
    expect(() => {
      waiter.check();
    }).toThrow(LockLostError);
    // Renewed within the ttl: the waiter never gets it.
    for (let i = 0; i < 5; i++) {
      c.advance(400);
      expect(await holder.renew()).toBe(true);
      expect(await waiter.acquire()).toBe(false);
    }
    // The holder dies (no release, no renewal): the lease stops changing.
    expect(await waiter.acquire()).toBe(false);
    c.advance(999);
    expect(await waiter.acquire()).toBe(false);
    // By now the holder's own view has lapsed too (it counts from before its last write).
    expect(holder.held).toBe(false);
    c.advance(1);
    expect(await waiter.acquire()).toBe(true);
    expect(waiter.held).toBe(true);
    // The old holder, back from its pause, cannot renew: it lost the lease.
    expect(await holder.renew()).toBe(false);
    expect(() => {
      holder.check();
    }).toThrow(LockLostError);
    const lease = parseLease(await s.get(LOCK_KEY))!;
    expect(lease.owner).toBe(waiter.owner);
    expect(lease.released).toBe(false);
  });

  it("a released lease is free at once", async () => {
    const s = await store();
    const c = clock();
    const a = new CompactorLock(s, { owner: "a", ttlMs: 60_000, now: c.now });
    const b = new CompactorLock(s, { owner: "b", ttlMs: 60_000, now: c.now });
    expect(await a.acquire()).toBe(true);
    expect(await b.acquire()).toBe(false);
    await a.release();
    expect(a.held).toBe(false);
    expect(parseLease(await s.get(LOCK_KEY))!.released).toBe(true);
    expect(await b.acquire()).toBe(true);
    expect(await a.acquire()).toBe(false);
  });

  it("a lease held past its ttl without renewal stops counting as held", async () => {
    const s = await store();
    const c = clock();
    const a = new CompactorLock(s, { owner: "a", ttlMs: 1000, now: c.now });
    expect(await a.acquire()).toBe(true);
    c.advance(899);
    expect(() => {
      a.check();
    }).not.toThrow();
    c.advance(1);
    expect(() => {
      a.check();
    }).toThrow(LockLostError);
    // Nobody took it: renewing takes it back.
    expect(await a.renew()).toBe(true);
    expect(a.held).toBe(true);
  });

  it("renewals and acquires at once do not make the holder think it lost the lease", async () => {
    const s = await store();
    const a = new CompactorLock(s, { owner: "a", ttlMs: 60_000 });
    expect(await a.acquire()).toBe(true);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a.renew() : a.acquire())),
    );
    expect(results.every(Boolean)).toBe(true);
    expect(parseLease(await s.get(LOCK_KEY))!.counter).toBe(10);
  });

  it("a damaged lease object is free; a restarted compactor of the same id takes its own back", async () => {
    const s = await store();
    await s.putIf(LOCK_KEY, new TextEncoder().encode("not json"), { ifNoneMatch: "*" });
    const a = new CompactorLock(s, { owner: "a", ttlMs: 60_000 });
    expect(await a.acquire()).toBe(true);
    const again = new CompactorLock(s, { owner: "a", ttlMs: 60_000 });
    expect(await again.acquire()).toBe(true);
  });
});
