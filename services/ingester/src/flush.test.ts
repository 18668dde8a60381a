import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChunkBuilder } from "@sieve/chunk";
import { SeriesBloomBuilder, readIndex } from "@sieve/index";
import { fingerprint } from "@sieve/labels";
import { FsObjectStore } from "@sieve/storage";
import type { ObjectStore, WriteCondition } from "@sieve/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeFlush } from "./flush.js";
import type { FlushFence, FlushJob, FlushStore, FlushStream } from "./flush.js";
import { readStore, testLogger } from "./harness.test-helper.js";
import { manifestKey, manifestPrefix } from "./manifest.js";
import { claimPartition, decodeOwnerRecord, ownerKey } from "./ownership.js";
import type { PartitionOwner } from "./ownership.js";
import { recoverPartition } from "./recovery.js";
import { streamKey } from "./stream.js";

const T0 = BigInt(Date.now()) * 1_000_000n;
let dir: string;
let store: FsObjectStore;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-flush-"));
  store = new FsObjectStore(dir);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A job of two tenants' streams, each with two chunks under one bloom. */
function job(seq: number, lines = 20): FlushJob {
  const streams: FlushStream[] = [];
  let offset = 0;
  for (const [tenant, labels] of [
    ["a", `{app="x"}`],
    ["a", `{app="y"}`],
    ["b", `{app="x"}`],
  ] as const) {
    const bloom = new SeriesBloomBuilder();
    const chunks = [];
    for (let c = 0; c < 2; c++) {
      const builder = new ChunkBuilder();
      const first = offset;
      for (let i = 0; i < lines; i++) {
        const md = [{ name: "trace_id", value: `${tenant}${labels}${c}-${i % 4}` }];
        builder.append({
          timestamp: T0 + BigInt(c * 100 + i),
          line: `${tenant} ${labels} ${c} ${i}`,
          structuredMetadata: md,
        });
        bloom.add(md);
        offset++;
      }
      const encoded = builder.encode();
      bloom.cut(encoded);
      chunks.push({ encoded, firstOffset: first, lastOffset: offset - 1, reason: "full" as const });
    }
    streams.push({
      tenant,
      labels,
      fingerprint: fingerprint(labels),
      chunks,
      bloom: bloom.finish(),
    });
  }
  return {
    partition: 0,
    seq,
    streams,
    id: `000000000000001-test-${String(seq).padStart(8, "0")}`,
    createdMs: Date.now(),
  };
}

/** The decision of `owner`, as the flusher makes it (nothing committed yet). */
function fenceOf(owner: PartitionOwner): FlushFence {
  return { epoch: owner.epoch, decide: (ref) => owner.decide(ref, -1) };
}

/**
 * A store that lets `allowed` writes (puts and conditional puts) through, then fails every
 * write, as if the process died.
 */
function dyingStore(inner: ObjectStore, allowed: number): FlushStore & { writes: number } {
  const s = {
    writes: 0,
    get: (k: string) => inner.get(k),
    head: (k: string) => inner.head(k),
    list: (p: string) => inner.list(p),
    delete: (k: string) => inner.delete(k),
    getTagged: (k: string) => inner.getTagged(k),
    put: async (k: string, d: Uint8Array) => {
      if (s.writes >= allowed) throw new Error("died");
      s.writes++;
      await inner.put(k, d);
    },
    putIf: async (k: string, d: Uint8Array, c: WriteCondition) => {
      if (s.writes >= allowed) throw new Error("died");
      s.writes++;
      return inner.putIf(k, d, c);
    },
  };
  return s;
}

async function visibleChunks(): Promise<number> {
  return (
    (await readStore(store, "a", T0 - 1n)).chunks + (await readStore(store, "b", T0 - 1n)).chunks
  );
}

describe("flush and recovery", () => {
  it("writes chunks, blooms, manifest, decision, segments; the next owner skips the flush's streams", async () => {
    const owner = await claimPartition(store, 0, "one", testLogger);
    expect(owner.epoch).toBe(1);
    const j = job(owner.takeSeq());
    const result = await writeFlush(j, store, "one", fenceOf(owner), 4);
    expect(result.chunks).toBe(6);
    expect(result.segments).toBe(2); // one per tenant (one day)
    expect(result.manifestKey).toBe(manifestKey(0, 1, 0));
    const a = await readStore(store, "a", T0 - 1n);
    expect(a.chunks).toBe(4);
    expect(a.bloomsInBlocks).toBe(4);
    expect(a.falseNegatives).toEqual([]);
    // Two chunks under one bloom: their prefixed tokens are in it.
    expect(a.series.every((s) => s.chunks.every((c) => c.prefixed))).toBe(true);
    expect(decodeOwnerRecord(await store.get(ownerKey(0))).flushes).toEqual([
      { epoch: 1, seq: 0, maxOffset: 119 },
    ]);
    const r = await recoverPartition(store, 0, "two", testLogger);
    expect(r.owner.epoch).toBe(2);
    expect(r.complete).toBe(1);
    expect(r.discarded).toBe(0);
    expect(r.segmentsRolledForward).toBe(0);
    expect(r.skip.get(streamKey("a", fingerprint(`{app="x"}`)))).toBe(39);
    expect(r.skip.get(streamKey("b", fingerprint(`{app="x"}`)))).toBe(119);
  });

  it("a death after any number of writes leaves no visible chunk without its object, and recovery settles it", async () => {
    const total = dyingStore(store, Infinity);
    const first = await claimPartition(total, 0, "one", testLogger);
    await writeFlush(job(0), total, "one", fenceOf(first), 1);
    const writes = total.writes - 1; // the claim's write is not the flush's
    // The decision is the write before the two segments.
    const decision = writes - 2;
    for (let allowed = 0; allowed <= writes; allowed++) {
      await rm(dir, { recursive: true, force: true });
      // The owner decides through the same dying store; its claim is one more write.
      const dying = dyingStore(store, allowed + 1);
      const owner = await claimPartition(dying, 0, "one", testLogger);
      await writeFlush(job(0), dying, "one", fenceOf(owner), 1).catch(() => undefined);
      // Whatever the index shows now is readable (readStore throws on a missing object).
      expect(await visibleChunks()).toBeLessThanOrEqual(6);
      const r = await recoverPartition(store, 0, "two", testLogger);
      const after = await visibleChunks();
      if (allowed >= decision) {
        // Decided: finished by the next owner from the manifest, its records skipped.
        expect(r.complete, `allowed ${allowed}`).toBe(1);
        expect(r.segmentsRolledForward).toBe(Math.max(0, 2 - (allowed - decision)));
        expect(r.skip.size).toBe(3);
        expect(after).toBe(6);
      } else {
        // Undecided: its manifest (if written) discarded, nothing visible, nothing to skip.
        expect(r.complete, `allowed ${allowed}`).toBe(0);
        expect(r.skip.size).toBe(0);
        expect(after).toBe(0);
        expect(await store.list(manifestPrefix(0))).toEqual([]);
      }
    }
  });

  it("a stale owner's flush is refused once another claimed the partition, and nothing of it shows", async () => {
    const stale = await claimPartition(store, 0, "stale", testLogger);
    await writeFlush(job(stale.takeSeq()), store, "stale", fenceOf(stale), 2);
    const r = await recoverPartition(store, 0, "new", testLogger);
    expect(r.complete).toBe(1);
    // The stale owner goes on with more lines of the same streams: refused at its decision.
    const late = job(stale.takeSeq(), 30);
    await expect(writeFlush(late, store, "stale", fenceOf(stale), 2)).rejects.toMatchObject({
      code: "fenced",
    });
    expect(stale.fenced).toBe(true);
    expect(await visibleChunks()).toBe(6);
    expect(await stale.stillOwner()).toBe(false);
    expect(await r.owner.stillOwner()).toBe(true);
    // The next claim discards the refused flush's manifest and keeps the decided one.
    const again = await recoverPartition(store, 0, "third", testLogger);
    expect(again.owner.epoch).toBe(3);
    expect(again.complete).toBe(1);
    expect(again.discarded).toBe(1);
    expect(await store.list(manifestPrefix(0))).toEqual([manifestKey(0, 1, 0)]);
  });

  it("an owner paused between its decision and its segments: the next owner finishes the flush, the late segments change nothing", async () => {
    const stale = await claimPartition(store, 0, "stale", testLogger);
    // The stale owner's segment writes wait until released: a pause exactly there.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const paused: FlushStore = {
      ...dyingStore(store, Infinity),
      put: async (k: string, d: Uint8Array) => {
        if (k.includes("/index/")) await released;
        await store.put(k, d);
      },
    };
    const flushing = writeFlush(job(stale.takeSeq()), paused, "stale", fenceOf(stale), 2);
    await waitUntil(async () => (await store.list(manifestPrefix(0))).length === 1);
    await waitUntil(
      async () => decodeOwnerRecord(await store.get(ownerKey(0))).flushes.length === 1,
    );
    const r = await recoverPartition(store, 0, "new", testLogger);
    expect(r.complete).toBe(1);
    expect(r.segmentsRolledForward).toBe(2);
    expect(r.skip.size).toBe(3);
    expect(await visibleChunks()).toBe(6);
    release();
    await flushing;
    const a = await readStore(store, "a", T0 - 1n);
    expect(a.chunks).toBe(4);
    expect((await readIndex(store, "b", T0 - 1n, T0 + 1_000_000_000n)).length).toBe(1);
  });

  it("a damaged decided manifest is replayed (at least once); junk under the prefix is discarded", async () => {
    const owner = await claimPartition(store, 0, "one", testLogger);
    await writeFlush(job(owner.takeSeq()), store, "one", fenceOf(owner), 2);
    await store.put(manifestKey(0, 1, 0), new Uint8Array([1, 2, 3]));
    await store.put(`${manifestPrefix(0)}0000000000000009`, new Uint8Array([1, 2, 3]));
    const r = await recoverPartition(store, 0, "two", testLogger);
    expect(r.complete).toBe(0);
    expect(r.skip.size).toBe(0);
    expect(r.discarded).toBe(1);
    expect(await store.list(manifestPrefix(0))).toEqual([manifestKey(0, 1, 0)]);
  });
});

async function waitUntil(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error("condition not met");
}
