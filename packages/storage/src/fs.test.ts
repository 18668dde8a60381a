import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { BAD_KEYS, expectCode, objectStoreContract } from "./contract.test-helper.js";
import { FsObjectStore } from "./fs.js";

const parent = mkdtempSync(join(tmpdir(), "sieve-fs-store-"));
afterAll(() => {
  rmSync(parent, { recursive: true, force: true });
});
let n = 0;
const fresh = (): FsObjectStore => new FsObjectStore(join(parent, `store-${n++}`));

objectStoreContract("FsObjectStore", fresh);

describe("FsObjectStore", () => {
  test("no key reaches outside the root, and refused puts create nothing", async () => {
    mkdirSync(join(parent, "escape"));
    const root = join(parent, "escape", "root");
    const store = new FsObjectStore(root);
    for (const key of BAD_KEYS) await expectCode(store.put(key, new Uint8Array(1)), "invalid_key");
    expect(readdirSync(join(parent, "escape"))).toEqual([]);
  });

  test("stores key a/b/c as the file root/a/b/c and leaves no temporary files", async () => {
    const store = fresh();
    await store.put("a/b/c", new TextEncoder().encode("hello"));
    expect(readdirSync(join(store.root, "a", "b"))).toEqual(["c"]);
  });

  test("a key that is a directory prefix of another key is a key_conflict", async () => {
    const store = fresh();
    await store.put("conf/a/b", new Uint8Array(1));
    await expectCode(store.put("conf/a", new Uint8Array(1)), "key_conflict");
    await store.put("conf/file", new Uint8Array(1));
    await expectCode(store.put("conf/file/under", new Uint8Array(1)), "key_conflict");
    // A directory is not an object, and a failed put leaves no temporary file behind.
    await expectCode(store.get("conf/a"), "not_found");
    await expectCode(store.head("conf/a"), "not_found");
    await expectCode(store.getRange("conf/a", 0, 1), "not_found");
    expect(readdirSync(join(store.root, "conf")).sort()).toEqual(["a", "file"]);
    expect(await store.list("conf/")).toEqual(["conf/a/b", "conf/file"]);
  });

  test("list skips temporary files left by a crash mid-put", async () => {
    const store = fresh();
    await store.put("tmp/real", new Uint8Array(1));
    writeFileSync(join(store.root, "tmp", ".sieve-tmp-deadbeef"), "partial");
    expect(await store.list("tmp/")).toEqual(["tmp/real"]);
    expect(await store.list("")).toEqual(["tmp/real"]);
  });
});
