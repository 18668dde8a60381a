import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FsObjectStore, StorageError } from "@sieve/storage";
import type { WriteCondition } from "@sieve/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { testLogger } from "./harness.test-helper.js";
import { claimPartition, decodeOwnerRecord, encodeOwnerRecord, ownerKey } from "./ownership.js";
import type { OwnershipStore } from "./ownership.js";

let dir: string;
let store: FsObjectStore;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-ownership-"));
  store = new FsObjectStore(dir);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("partition ownership record", () => {
  it("round-trips, and rejects what is not a record", () => {
    const r = {
      partition: 7,
      epoch: 3,
      owner: "ingester-1",
      claimedMs: 1_714_521_600_000,
      flushes: [{ epoch: 2, seq: 9, maxOffset: 1234 }],
    };
    expect(decodeOwnerRecord(encodeOwnerRecord(r))).toEqual(r);
    for (const bad of ["", "[]", "{}", '{"version":2}', '{"version":1,"partition":-1}']) {
      expect(() => decodeOwnerRecord(new TextEncoder().encode(bad)), bad).toThrow(
        expect.objectContaining({ code: "corrupt_manifest" }) as Error,
      );
    }
  });

  it("each claim takes the next epoch and fences every earlier owner's decisions", async () => {
    const first = await claimPartition(store, 1, "a", testLogger);
    expect(first.epoch).toBe(1);
    expect(await first.decide({ epoch: 1, seq: first.takeSeq(), maxOffset: 10 }, -1)).toEqual([]);
    const second = await claimPartition(store, 1, "b", testLogger);
    expect(second.epoch).toBe(2);
    // The claim carries the decided flushes over.
    expect(second.flushes).toEqual([{ epoch: 1, seq: 0, maxOffset: 10 }]);
    await expect(first.decide({ epoch: 1, seq: 1, maxOffset: 20 }, -1)).rejects.toMatchObject({
      code: "fenced",
      message: expect.stringContaining("claimed by b at epoch 2") as string,
    });
    // Committed past offset 10: the next decision drops the first flush.
    const dropped = await second.decide({ epoch: 2, seq: second.takeSeq(), maxOffset: 30 }, 11);
    expect(dropped).toEqual([{ epoch: 1, seq: 0, maxOffset: 10 }]);
    expect(decodeOwnerRecord(await store.get(ownerKey(1))).flushes).toEqual([
      { epoch: 2, seq: 0, maxOffset: 30 },
    ]);
  });

  it("tidying drops the flushes below the commit in one write, and is fenced by a claim", async () => {
    const owner = await claimPartition(store, 2, "a", testLogger);
    await owner.decide({ epoch: 1, seq: owner.takeSeq(), maxOffset: 10 }, -1);
    await owner.decide({ epoch: 1, seq: owner.takeSeq(), maxOffset: 20 }, -1);
    // Nothing wholly below offset 5: no write at all.
    const before = await store.getTagged(ownerKey(2));
    expect(await owner.tidy(5)).toEqual([]);
    expect((await store.getTagged(ownerKey(2))).etag).toBe(before.etag);
    // Committed through 20: both go, from the record as stored too.
    expect(await owner.tidy(21)).toEqual([
      { epoch: 1, seq: 0, maxOffset: 10 },
      { epoch: 1, seq: 1, maxOffset: 20 },
    ]);
    expect(decodeOwnerRecord((await store.getTagged(ownerKey(2))).data).flushes).toEqual([]);
    await owner.decide({ epoch: 1, seq: owner.takeSeq(), maxOffset: 30 }, 21);
    await claimPartition(store, 2, "b", testLogger);
    await expect(owner.tidy(31)).rejects.toMatchObject({ code: "fenced" });
  });

  it("of eight racing claims each gets its own epoch, and only the last one decides", async () => {
    const owners = await Promise.all(
      Array.from({ length: 8 }, (_, i) => claimPartition(store, 2, `i${i}`, testLogger)),
    );
    expect(new Set(owners.map((o) => o.epoch)).size).toBe(8);
    const results = await Promise.allSettled(
      owners.map((o) => o.decide({ epoch: o.epoch, seq: 0, maxOffset: 1 }, -1)),
    );
    const won = owners.filter((_, i) => results[i]!.status === "fulfilled");
    expect(won.map((o) => o.epoch)).toEqual([8]);
  });

  it("a decision whose write was applied but not answered is recognised when retried", async () => {
    let lose = true;
    const flaky: OwnershipStore = {
      getTagged: (k) => store.getTagged(k),
      putIf: async (k: string, d: Uint8Array, c: WriteCondition) => {
        const tag = await store.putIf(k, d, c);
        if (lose && decodeOwnerRecord(d).flushes.length > 0) {
          lose = false;
          throw new StorageError("backend", "timed out", { retriable: true });
        }
        return tag;
      },
    };
    const owner = await claimPartition(flaky, 3, "a", testLogger);
    const ref = { epoch: owner.epoch, seq: owner.takeSeq(), maxOffset: 5 };
    await expect(owner.decide(ref, -1)).rejects.toMatchObject({ code: "backend" });
    await owner.decide({ ...ref }, -1);
    expect(owner.fenced).toBe(false);
    expect(await owner.stillOwner()).toBe(true);
    await owner.decide({ epoch: owner.epoch, seq: owner.takeSeq(), maxOffset: 6 }, -1);
    expect(owner.flushes.map((f) => f.seq)).toEqual([0, 1]);
  });

  it("a damaged record is claimed over with no flushes listed", async () => {
    await store.putIf(ownerKey(4), new TextEncoder().encode("{garbage"), { ifNoneMatch: "*" });
    const owner = await claimPartition(store, 4, "a", testLogger);
    expect(owner.epoch).toBe(1);
    expect(owner.flushes).toEqual([]);
  });
});
