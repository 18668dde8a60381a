import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
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
objectStoreContract(
  "FsObjectStore with blocking reads",
  () => new FsObjectStore(join(parent, `store-${n++}`), { blockingReads: true }),
);

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

describe("FsObjectStore with a call's signal", () => {
  test("an aborted signal ends every call with aborted, and an aborted put writes nothing", async () => {
    const store = fresh();
    await store.put("sig/a", new Uint8Array(3));
    const signal = AbortSignal.abort();
    await expectCode(store.get("sig/a", { signal }), "aborted");
    await expectCode(store.getRange("sig/a", 0, 1, { signal }), "aborted");
    await expectCode(store.head("sig/a", { signal }), "aborted");
    await expectCode(store.list("sig/", { signal }), "aborted");
    await expectCode(store.delete("sig/a", { signal }), "aborted");
    await expectCode(store.put("sig/b", new Uint8Array(1), { signal }), "aborted");
    expect(await store.list("sig/")).toEqual(["sig/a"]);
    expect(readdirSync(join(store.root, "sig"))).toEqual(["a"]);
  });
});

describe("FsObjectStore crash safety", () => {
  /**
   * Runs fs.test-crash.ts until it has finished `puts` puts, SIGKILLs it and answers the
   * lines it printed. The kill lands wherever the child is: mid-write, mid-fsync, mid-rename.
   */
  async function putUntilKilled(root: string, puts: number): Promise<string[]> {
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(here, "fs.test-crash.ts"), root],
      {
        cwd: join(here, ".."),
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const lines: string[] = [];
    const exited = new Promise<void>((resolve) => {
      child.once("exit", () => {
        resolve();
      });
    });
    let done = 0;
    for await (const line of createInterface({ input: child.stdout })) {
      lines.push(line);
      if (line.startsWith("done ") && ++done === puts) child.kill("SIGKILL");
    }
    await exited;
    expect(child.signalCode).toBe("SIGKILL");
    return lines;
  }

  test("a process killed mid-put leaves every key whole: the last completed put or a later one", async () => {
    const store = fresh();
    for (const puts of [1, 7, 23, 40, 61]) {
      const lines = await putUntilKilled(store.root, puts);
      // For each key: the sha of its last completed put, and every sha started after it.
      const allowed = new Map<string, Set<string>>();
      for (const line of lines) {
        const [what, key, sha] = line.split(" ") as [string, string, string];
        if (what === "done") allowed.set(key, new Set([sha]));
        else if (allowed.has(key)) allowed.get(key)!.add(sha);
        else allowed.set(key, new Set(["absent", sha]));
      }
      for (const [key, shas] of allowed) {
        const got = await store.get(key).catch(() => undefined);
        if (got === undefined) {
          expect(shas.has("absent"), `${key} missing after a completed put`).toBe(true);
          continue;
        }
        const head = Buffer.from(got.subarray(0, 32)).toString("hex");
        const body = createHash("sha256").update(got.subarray(32)).digest("hex");
        expect(body, `${key} is torn`).toBe(head);
        expect(shas.has(head), `${key} holds content nobody was writing`).toBe(true);
      }
      for (const key of await store.list("")) expect(allowed.has(key)).toBe(true);
    }
  });
});
