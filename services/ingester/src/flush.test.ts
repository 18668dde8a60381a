import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChunkBuilder } from "@sieve/chunk";
import { SeriesBloomBuilder, readIndex } from "@sieve/index";
import { fingerprint } from "@sieve/labels";
import { FsObjectStore } from "@sieve/storage";
import type { ObjectStore } from "@sieve/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeFlush } from "./flush.js";
import type { FlushJob, FlushStore, FlushStream } from "./flush.js";
import { readStore, testLogger } from "./harness.test-helper.js";
import { manifestPrefix } from "./manifest.js";
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
function job(seq: number): FlushJob {
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
      for (let i = 0; i < 20; i++) {
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

/** A store that lets `allowed` puts through, then fails every write, as if the process died. */
function dyingStore(inner: ObjectStore, allowed: number): FlushStore & { puts: number } {
  const s = {
    puts: 0,
    get: (k: string) => inner.get(k),
    head: (k: string) => inner.head(k),
    list: (p: string) => inner.list(p),
    delete: (k: string) => inner.delete(k),
    put: async (k: string, d: Uint8Array) => {
      if (s.puts >= allowed) throw new Error("died");
      s.puts++;
      await inner.put(k, d);
    },
  };
  return s;
}

describe("flush and recovery", () => {
  it("writes chunks, blooms, manifest, segments; a complete manifest makes recovery skip its streams", async () => {
    const j = job(0);
    const result = await writeFlush(j, store, "test", 4);
    expect(result.chunks).toBe(6);
    expect(result.segments).toBe(2); // one per tenant (one day)
    const a = await readStore(store, "a", T0 - 1n);
    expect(a.chunks).toBe(4);
    expect(a.bloomsInBlocks).toBe(4);
    expect(a.falseNegatives).toEqual([]);
    // Two chunks under one bloom: their prefixed tokens are in it.
    expect(a.series.every((s) => s.chunks.every((c) => c.prefixed))).toBe(true);
    const r = await recoverPartition(store, 0, testLogger);
    expect(r.complete).toBe(1);
    expect(r.rolledBack).toBe(0);
    expect(r.nextSeq).toBe(1);
    expect(r.skip.get(streamKey("a", fingerprint(`{app="x"}`)))).toBe(39);
    expect(r.skip.get(streamKey("b", fingerprint(`{app="x"}`)))).toBe(119);
    expect(r.kept).toEqual([{ key: result.manifestKey, maxOffset: 119 }]);
  });

  it("a death after any number of writes leaves no visible chunk without its object, and recovery settles it", async () => {
    const total = dyingStore(store, Infinity);
    await writeFlush(job(0), total, "test", 1);
    await rm(dir, { recursive: true, force: true });
    for (let allowed = 0; allowed <= total.puts; allowed++) {
      await rm(dir, { recursive: true, force: true });
      const dying = dyingStore(store, allowed);
      await writeFlush(job(0), dying, "test", 1).catch(() => undefined);
      // Whatever the index shows now is readable (readStore throws on a missing object).
      const before =
        (await readStore(store, "a", T0 - 1n)).chunks +
        (await readStore(store, "b", T0 - 1n)).chunks;
      const r = await recoverPartition(store, 0, testLogger);
      const after =
        (await readStore(store, "a", T0 - 1n)).chunks +
        (await readStore(store, "b", T0 - 1n)).chunks;
      if (allowed === total.puts) {
        expect(r.complete).toBe(1);
        expect(after).toBe(6);
      } else {
        // Incomplete: rolled back (or never started), nothing visible, nothing to skip.
        expect(r.complete).toBe(0);
        expect(r.skip.size).toBe(0);
        expect(after).toBe(0);
        expect(await store.list(manifestPrefix(0))).toEqual([]);
      }
      // Before recovery the index may show part of the flush (segments written after the
      // manifest), never a chunk without its object (readStore above would have thrown).
      expect(before).toBeLessThanOrEqual(6);
    }
  });

  it("a damaged manifest is rolled back; seq continues after the highest", async () => {
    await writeFlush(job(4), store, "test", 2);
    await store.put(`${manifestPrefix(0)}0000000000000009`, new Uint8Array([1, 2, 3]));
    const r = await recoverPartition(store, 0, testLogger);
    expect(r.complete).toBe(1);
    expect(r.rolledBack).toBe(1);
    expect(r.nextSeq).toBe(10);
    expect(await store.list(manifestPrefix(0))).toHaveLength(1);
    expect((await readIndex(store, "a", T0 - 1n, T0 + 1_000_000_000n)).length).toBe(2);
  });
});
