import { countedUpTo } from "@sieve/kit";
import fc from "fast-check";
import { LRUCache } from "lru-cache";
import { describe, expect, test } from "vitest";
import { ObjectCache } from "./cache.js";

describe("ObjectCache", () => {
  test("concurrent lookups of a missing key share one load", async () => {
    const cache = new ObjectCache<Uint8Array>(1000, (v) => v.byteLength);
    let loads = 0;
    let release: (v: Uint8Array) => void = () => undefined;
    const gate = new Promise<Uint8Array>((resolve) => (release = resolve));
    const load = () => {
      loads++;
      return gate;
    };
    const lookups = [cache.get("k", load), cache.get("k", load), cache.get("k", load)];
    release(new Uint8Array(10));
    const got = await Promise.all(lookups);
    expect(loads).toBe(1);
    expect(got.map((g) => g.hit)).toEqual([false, true, true]);
    expect((await cache.get("k", load)).hit).toBe(true);
    expect(cache.hits).toBe(3);
    expect(cache.misses).toBe(1);
  });

  test("stays within its byte budget, evicting the least recently used", async () => {
    const cache = new ObjectCache<Uint8Array>(100, (v) => v.byteLength);
    for (let i = 0; i < 10; i++)
      await cache.get(`k${i}`, () => Promise.resolve(new Uint8Array(30)));
    expect(cache.bytes).toBeLessThanOrEqual(100);
    expect((await cache.get("k9", () => Promise.resolve(new Uint8Array(30)))).hit).toBe(true);
    expect((await cache.get("k0", () => Promise.resolve(new Uint8Array(30)))).hit).toBe(false);
    // An object above the whole budget is served, not kept.
    const big = await cache.get("big", () => Promise.resolve(new Uint8Array(500)));
    expect(big.value.byteLength).toBe(500);
    expect(cache.bytes).toBeLessThanOrEqual(100);
  });

  test("an entry that grew is weighed again, and the budget holds", async () => {
    const cache = new ObjectCache<{ n: number }>(100, (v) => v.n);
    const a = (await cache.get("a", () => Promise.resolve({ n: 30 }))).value;
    await cache.get("b", () => Promise.resolve({ n: 30 }));
    expect(cache.bytes).toBe(60);
    a.n = 50;
    cache.reweigh("a", a);
    expect(cache.bytes).toBe(80);
    // Past the budget the least recently used goes: b, not a (just weighed, so just used).
    a.n = 80;
    cache.reweigh("a", a);
    expect(cache.bytes).toBe(80);
    expect((await cache.get("a", () => Promise.resolve({ n: 1 }))).hit).toBe(true);
    expect((await cache.get("b", () => Promise.resolve({ n: 1 }))).hit).toBe(false);
    // A value no longer the key's entry changes nothing.
    cache.reweigh("a", { n: 99 });
    expect((await cache.get("a", () => Promise.resolve({ n: 1 }))).value).toBe(a);
  });

  test("a failed load is not cached and reaches every waiter", async () => {
    const cache = new ObjectCache<Uint8Array>(100, (v) => v.byteLength);
    const fail = () => Promise.reject(new Error("store down"));
    await expect(Promise.all([cache.get("k", fail), cache.get("k", fail)])).rejects.toThrow(
      "store down",
    );
    expect((await cache.get("k", () => Promise.resolve(new Uint8Array(1)))).hit).toBe(false);
  });
});

describe("countedUpTo", () => {
  test("bounds an LRU at its entries, keeping the most recently used", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 400 }),
        (entries, keys) => {
          const lru = new LRUCache<number, true>(countedUpTo(entries));
          const order: number[] = []; // a model: least recently used first
          for (const k of keys) {
            if (lru.get(k) === undefined) lru.set(k, true);
            const at = order.indexOf(k);
            if (at >= 0) order.splice(at, 1);
            order.push(k);
            if (order.length > entries) order.shift();
            expect(lru.size).toBe(order.length);
          }
          expect([...lru.keys()].reverse()).toEqual(order);
        },
      ),
    );
  });
});
