/**
 * The contract every ObjectStore passes, run by fs.int.test.ts against a temporary directory
 * and by s3.int.test.ts against a real MinIO. `open` gives a store over an empty namespace.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, test } from "vitest";
import { StorageError } from "./errors.js";
import type { StorageErrorCode } from "./errors.js";
import type { ObjectStore } from "./store.js";

const enc = new TextEncoder();

/** Awaits `p` and checks it failed with a StorageError of `code`. */
export async function expectCode(p: Promise<unknown>, code: StorageErrorCode): Promise<void> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected StorageError ${code}`).toBeInstanceOf(StorageError);
  expect((err as StorageError).code).toBe(code);
}

/** Keys with characters that are legal but trip up naive code: spaces, URL syntax, unicode. */
export const ODD_KEYS = [
  "odd/a b/c d",
  "odd/plus+equals=amp&q?hash#pct%20",
  "odd/unicode/日本語/ключ",
  "odd/emoji/🙂🚀",
  "odd/dots/.hidden",
  "odd/dots/a..b",
  "odd/dots/trailing.",
  "odd/marks/~!'()*,;:@$[]{}^`|\"<>",
  "odd/space-at-end ",
  "odd/ends-with-dash-",
];

/** Keys that both stores must refuse with `invalid_key`. */
export const BAD_KEYS = [
  "",
  "/absolute",
  "a//b",
  "a/",
  "a/../b",
  "..",
  ".",
  "../escape",
  "a/./b",
  "back\\slash",
  "nul\u0000byte",
  "new\nline",
  "del\u007f",
  "lone\uD800surrogate",
  "x".repeat(1025),
  `a/${"y".repeat(256)}`,
  "a/.sieve-tmp-123",
];

export function objectStoreContract(name: string, open: () => ObjectStore): void {
  describe(`ObjectStore contract: ${name}`, () => {
    test("a missing key is not_found for get, getRange and head", async () => {
      const store = open();
      await expectCode(store.get("missing/key"), "not_found");
      await expectCode(store.getRange("missing/key", 0, 10), "not_found");
      await expectCode(store.getRange("missing/key", 0, 0), "not_found");
      await expectCode(store.head("missing/key"), "not_found");
    });

    test("put then get round-trips, and a second put replaces the object", async () => {
      const store = open();
      await store.put("rt/one", enc.encode("first version"));
      expect(Buffer.from(await store.get("rt/one")).toString()).toBe("first version");
      await store.put("rt/one", enc.encode("v2"));
      expect(Buffer.from(await store.get("rt/one")).toString()).toBe("v2");
      expect(await store.head("rt/one")).toEqual({ size: 2 });
    });

    test("keys with odd but legal characters round-trip and list", async () => {
      const store = open();
      for (const [i, key] of ODD_KEYS.entries()) await store.put(key, enc.encode(`value ${i}`));
      for (const [i, key] of ODD_KEYS.entries()) {
        expect(Buffer.from(await store.get(key)).toString(), key).toBe(`value ${i}`);
      }
      const listed = await store.list("odd/");
      expect(new Set(listed)).toEqual(new Set(ODD_KEYS));
      expect(listed).toEqual(
        [...listed].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
      );
    });

    test("invalid keys are refused with invalid_key by every operation", async () => {
      const store = open();
      for (const key of BAD_KEYS) {
        await expectCode(store.put(key, enc.encode("x")), "invalid_key");
        await expectCode(store.get(key), "invalid_key");
        await expectCode(store.getRange(key, 0, 1), "invalid_key");
        await expectCode(store.getTail(key, 1), "invalid_key");
        await expectCode(store.head(key), "invalid_key");
        await expectCode(store.delete(key), "invalid_key");
      }
      await expectCode(store.list("/abs"), "invalid_key");
      await expectCode(store.list("a\\b"), "invalid_key");
      expect(await store.list("../")).toEqual([]);
    });

    test("empty objects", async () => {
      const store = open();
      await store.put("empty/obj", new Uint8Array(0));
      expect((await store.get("empty/obj")).byteLength).toBe(0);
      expect(await store.head("empty/obj")).toEqual({ size: 0 });
      expect((await store.getRange("empty/obj", 0, 0)).byteLength).toBe(0);
      expect((await store.getRange("empty/obj", 0, 10)).byteLength).toBe(0);
      await expectCode(store.getRange("empty/obj", 1, 1), "invalid_range");
      expect(await store.list("empty/")).toEqual(["empty/obj"]);
    });

    test("range gets at the edges", async () => {
      const store = open();
      const data = Uint8Array.from({ length: 100 }, (_, i) => i);
      await store.put("range/obj", data);
      const cases: [offset: number, length: number, expected: number[]][] = [
        [0, 1, [0]],
        [0, 100, [...data]],
        [0, 1000, [...data]],
        [99, 1, [99]],
        [99, 10, [99]],
        [98, 2, [98, 99]],
        [100, 5, []],
        [100, 0, []],
        [50, 0, []],
        [10, 3, [10, 11, 12]],
      ];
      for (const [offset, length, expected] of cases) {
        const got = await store.getRange("range/obj", offset, length);
        expect([...got], `offset ${offset} length ${length}`).toEqual(expected);
      }
      await expectCode(store.getRange("range/obj", 101, 1), "invalid_range");
      await expectCode(store.getRange("range/obj", 101, 0), "invalid_range");
      await expectCode(store.getRange("range/obj", -1, 1), "invalid_range");
      await expectCode(store.getRange("range/obj", 0, -1), "invalid_range");
      await expectCode(store.getRange("range/obj", 0.5, 1), "invalid_range");
    });

    test("tail gets: the last bytes and the size, the whole object when shorter", async () => {
      const store = open();
      const data = Uint8Array.from({ length: 100 }, (_, i) => i);
      await store.put("tail/obj", data);
      await store.put("tail/empty", new Uint8Array(0));
      const cases: [key: string, length: number, expected: number[], size: number][] = [
        ["tail/obj", 1, [99], 100],
        ["tail/obj", 3, [97, 98, 99], 100],
        ["tail/obj", 99, [...data.subarray(1)], 100],
        ["tail/obj", 100, [...data], 100],
        ["tail/obj", 1000, [...data], 100],
        ["tail/obj", 0, [], 100],
        ["tail/empty", 10, [], 0],
        ["tail/empty", 0, [], 0],
      ];
      for (const [key, length, expected, size] of cases) {
        const got = await store.getTail(key, length);
        expect([...got.data], `${key} length ${length}`).toEqual(expected);
        expect(got.size, `${key} length ${length}`).toBe(size);
      }
      await expectCode(store.getTail("missing/key", 10), "not_found");
      await expectCode(store.getTail("missing/key", 0), "not_found");
      await expectCode(store.getTail("tail/obj", -1), "invalid_range");
      await expectCode(store.getTail("tail/obj", 1.5), "invalid_range");
    });

    test("a 20 MB object round-trips whole and by range", async () => {
      const store = open();
      const data = randomBytes(20 * 1024 * 1024);
      await store.put("large/20mb", data);
      expect(await store.head("large/20mb")).toEqual({ size: data.byteLength });
      const got = await store.get("large/20mb");
      expect(Buffer.compare(Buffer.from(got), data)).toBe(0);
      const mid = await store.getRange("large/20mb", 10_000_000, 1_000_000);
      expect(Buffer.compare(Buffer.from(mid), data.subarray(10_000_000, 11_000_000))).toBe(0);
      const tail = await store.getRange("large/20mb", data.byteLength - 3, 100);
      expect([...tail]).toEqual([...data.subarray(data.byteLength - 3)]);
      const last = await store.getTail("large/20mb", 1_000_000);
      expect(last.size).toBe(data.byteLength);
      expect(Buffer.compare(Buffer.from(last.data), data.subarray(-1_000_000))).toBe(0);
    });

    test("list pages through more than 1000 keys, by plain string prefix", async () => {
      const store = open();
      const keys = Array.from({ length: 1050 }, (_, i) => `many/k${String(i).padStart(4, "0")}`);
      for (let i = 0; i < keys.length; i += 50) {
        await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, enc.encode(k))));
      }
      await store.put("many-not/x", enc.encode("x"));
      expect(await store.list("many/")).toEqual(keys);
      expect(await store.list("many/k10")).toEqual(keys.filter((k) => k.startsWith("many/k10")));
      expect(await store.list("many/k1049")).toEqual(["many/k1049"]);
      expect(await store.list("many/nothing")).toEqual([]);
      expect((await store.list("many")).length).toBe(1051);
    });

    test("list matches partial segments and descends", async () => {
      const store = open();
      for (const k of ["lp/abc/1", "lp/abc/2/3", "lp/abd", "lp/b", "lpx"]) {
        await store.put(k, enc.encode(k));
      }
      expect(await store.list("lp/ab")).toEqual(["lp/abc/1", "lp/abc/2/3", "lp/abd"]);
      expect(await store.list("lp/abc/")).toEqual(["lp/abc/1", "lp/abc/2/3"]);
      expect(await store.list("lp")).toEqual(["lp/abc/1", "lp/abc/2/3", "lp/abd", "lp/b", "lpx"]);
      expect(await store.list("lp/abc/2/3")).toEqual(["lp/abc/2/3"]);
      expect(await store.list("lp/zzz/")).toEqual([]);
    });

    test("delete removes, and deleting a missing key is fine", async () => {
      const store = open();
      await store.put("del/a", enc.encode("a"));
      await store.put("del/b", enc.encode("b"));
      await store.delete("del/a");
      await expectCode(store.get("del/a"), "not_found");
      expect(await store.list("del/")).toEqual(["del/b"]);
      await store.delete("del/a");
      await store.delete("del/never/was");
    });

    test("concurrent puts of one key leave one whole object; readers never see a mix", async () => {
      const store = open();
      const size = 256 * 1024;
      const writers = Array.from({ length: 16 }, (_, i) =>
        store.put("race/key", new Uint8Array(size).fill(i + 1)),
      );
      const torn: number[] = [];
      const readers = Array.from({ length: 16 }, async () => {
        const got = await store.get("race/key").catch((e: unknown) => {
          if (e instanceof StorageError && e.code === "not_found") return undefined;
          throw e;
        });
        if (got === undefined) return;
        if (got.byteLength !== size || got.some((b) => b !== got[0])) torn.push(got.byteLength);
      });
      await Promise.all([...writers, ...readers]);
      expect(torn).toEqual([]);
      const final = await store.get("race/key");
      expect(final.byteLength).toBe(size);
      expect(final[0]).toBeGreaterThanOrEqual(1);
      expect(final.every((b) => b === final[0])).toBe(true);
      expect(await store.list("race/")).toEqual(["race/key"]);
    });

    test("putIf with ifNoneMatch creates once; the second writer is refused and changes nothing", async () => {
      const store = open();
      const tag = await store.putIf("cas/create", enc.encode("first"), { ifNoneMatch: "*" });
      await expectCode(
        store.putIf("cas/create", enc.encode("second"), { ifNoneMatch: "*" }),
        "precondition_failed",
      );
      const got = await store.getTagged("cas/create");
      expect(new TextDecoder().decode(got.data)).toBe("first");
      expect(got.etag).toBe(tag);
      expect(await store.list("cas/")).toEqual(["cas/create"]);
    });

    test("putIf with ifMatch swaps only from the tag it names", async () => {
      const store = open();
      await expectCode(
        store.putIf("cas/swap", enc.encode("x"), { ifMatch: '"0123456789abcdef"' }),
        "precondition_failed",
      );
      await expectCode(store.getTagged("cas/swap"), "not_found");
      const t1 = await store.putIf("cas/swap", enc.encode("v1"), { ifNoneMatch: "*" });
      const t2 = await store.putIf("cas/swap", enc.encode("v2"), { ifMatch: t1 });
      expect(t2).not.toBe(t1);
      await expectCode(
        store.putIf("cas/swap", enc.encode("v3"), { ifMatch: t1 }),
        "precondition_failed",
      );
      expect(new TextDecoder().decode(await store.get("cas/swap"))).toBe("v2");
      // A plain put changes the tag too: a swap from the old tag is refused.
      await store.put("cas/swap", enc.encode("v4"));
      const { etag } = await store.getTagged("cas/swap");
      expect(etag).not.toBe(t2);
      await expectCode(
        store.putIf("cas/swap", enc.encode("v5"), { ifMatch: t2 }),
        "precondition_failed",
      );
      await store.putIf("cas/swap", enc.encode("v5"), { ifMatch: etag });
      expect(new TextDecoder().decode(await store.get("cas/swap"))).toBe("v5");
    });

    test("of concurrent conditional writers exactly one wins, to create and to swap", async () => {
      const store = open();
      const writers = 8;
      const settle = (ps: Promise<string>[]) =>
        Promise.all(
          ps.map((p, i) =>
            p.then(
              () => i,
              (e: unknown) => {
                if (e instanceof StorageError && e.code === "precondition_failed") return -1;
                throw e;
              },
            ),
          ),
        );
      const created = await settle(
        Array.from({ length: writers }, (_, i) =>
          store.putIf("cas/race", enc.encode(`create ${i}`), { ifNoneMatch: "*" }),
        ),
      );
      const creator = created.filter((i) => i >= 0);
      expect(creator).toHaveLength(1);
      const { data, etag } = await store.getTagged("cas/race");
      expect(new TextDecoder().decode(data)).toBe(`create ${creator[0]}`);
      const swapped = await settle(
        Array.from({ length: writers }, (_, i) =>
          store.putIf("cas/race", enc.encode(`swap ${i}`), { ifMatch: etag }),
        ),
      );
      const swapper = swapped.filter((i) => i >= 0);
      expect(swapper).toHaveLength(1);
      expect(new TextDecoder().decode(await store.get("cas/race"))).toBe(`swap ${swapper[0]}`);
    });

    test("listInfo lists as list does, with each object's size and a recent last-modified time", async () => {
      const store = open();
      const before = Date.now();
      await store.put("info/a", enc.encode("12345"));
      await store.put("info/b/c", new Uint8Array(0));
      await store.put("other/x", enc.encode("x"));
      const listed = await store.listInfo("info/");
      expect(listed.map((o) => o.key)).toEqual(await store.list("info/"));
      expect(listed.map((o) => [o.key, o.size])).toEqual([
        ["info/a", 5],
        ["info/b/c", 0],
      ]);
      for (const o of listed) {
        // S3 keeps whole seconds, and the server's clock is not this one's: a margin.
        expect(o.lastModifiedMs).toBeGreaterThan(before - 5000);
        expect(o.lastModifiedMs).toBeLessThan(Date.now() + 5000);
      }
      expect(await store.listInfo("info/none")).toEqual([]);
    });

    test("listPrefixes answers the next segments under a prefix that hold objects, as S3's common prefixes", async () => {
      const store = open();
      // The contract's tests share one namespace on S3: these stay under `common/`.
      for (const key of ["t1/index/a", "t1/chunks/b/c", "t2/x", "t10/y", "top", "日本/z"]) {
        await store.put(`common/${key}`, enc.encode(key));
      }
      expect(await store.listPrefixes("common/")).toEqual([
        "common/t1/",
        "common/t10/",
        "common/t2/",
        "common/日本/",
      ]);
      expect(await store.listPrefixes("common/t1/")).toEqual([
        "common/t1/chunks/",
        "common/t1/index/",
      ]);
      expect(await store.listPrefixes("common/t1")).toEqual(["common/t1/", "common/t10/"]);
      expect(await store.listPrefixes("common/t1/index/")).toEqual([]);
      expect(await store.listPrefixes("common/none/")).toEqual([]);
      // A prefix whose objects are all deleted is gone (the file store's empty directory too).
      await store.delete("common/t2/x");
      expect(await store.listPrefixes("common/")).toEqual([
        "common/t1/",
        "common/t10/",
        "common/日本/",
      ]);
      expect(await store.listPrefixes("common/../")).toEqual([]);
    });
  });
}
