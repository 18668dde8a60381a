/**
 * How the querier reads chunks from a real FsObjectStore: a needle query reads a chunk's
 * end (footer and symbol filter), then its tail (the symbol sections before) and only the
 * blocks that may hold its needle, by range; a chunk without the needle no further than
 * its end; other queries read chunks whole. Answers are those of the whole chunks every
 * time.
 */
import { randomBytes } from "node:crypto";
import { ChunkReader, type Entry } from "@sieve/chunk";
import type { CallOptions, FsObjectStore } from "@sieve/storage";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { KEEP_ALL_FILTER, type QuerierStore } from "./deps.js";
import { FIRST_END_BYTES } from "./fetch.js";
import { createQuerier } from "./index.js";
import { tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const LINES = 4000;

/** Bytes the querier read from the store, by call, of chunk objects. */
interface Reads {
  get: number;
  getRange: number;
  getTail: number;
}

let store: FsObjectStore;
let close: () => Promise<void>;
let chunkBytes = 0;
/** Tenant t's chunk: its tail (footer and symbol sections) and its end, bytes. */
let chunkTail = 0;
let chunkEnd = 0;
let wideBytes = 0;
const entries: Entry[] = [];
const wide: Entry[] = [];
/** Tenant v's two chunks, alike (streams v1 and v2): their ends' lengths, bytes. */
const vEnds: number[] = [];

beforeAll(async () => {
  ({ store, close } = await tempStore());
  // One chunk of 4,000 lines; unique ids (which compress badly) make its symbol table
  // ~100 KB and the whole chunk several times that, in blocks of 16 KB.
  let trace = "";
  for (let i = 0; i < LINES; i++) {
    if (i % 5 === 0) trace = `tr-${i / 5}-${randomBytes(6).toString("hex")}`;
    entries.push({
      timestamp: T0 + BigInt(i) * S,
      line: `request ${i} ${randomBytes(24).toString("hex")} done`,
      structuredMetadata: [
        { name: "trace_id", value: trace },
        { name: "span_id", value: randomBytes(8).toString("hex") },
      ],
    });
  }
  await writeFlush(store, "t", [{ labels: { app: "a" }, entries }], LINES, 16 * 1024);
  const [key] = await store.list("t/chunks/");
  const chunk = await store.get(key!);
  chunkBytes = chunk.byteLength;
  chunkTail = lastBytes("tail", chunk);
  chunkEnd = lastBytes("end", chunk);
  // Tenant u: a chunk whose symbol sections alone are larger than the first read of a tail.
  for (let i = 0; i < LINES; i++) {
    wide.push({
      timestamp: T0 + BigInt(i) * S,
      line: `request ${i}`,
      structuredMetadata: [
        { name: "trace_id", value: `w-${i}-${randomBytes(24).toString("hex")}` },
        { name: "span_id", value: randomBytes(24).toString("hex") },
      ],
    });
  }
  await writeFlush(store, "u", [{ labels: { app: "w" }, entries: wide }], LINES, 16 * 1024);
  const [wideKey] = await store.list("u/chunks/");
  wideBytes = (await store.get(wideKey!)).byteLength;
  // Tenant v: two alike chunks of 4,000 lines in 800 traces, tails far below 128 KiB.
  const alike = (): Entry[] =>
    Array.from({ length: LINES }, (_, i) => ({
      timestamp: T0 + BigInt(i) * S,
      line: `request ${i} ${randomBytes(32).toString("hex")}`,
      structuredMetadata: [{ name: "trace_id", value: `v-${Math.floor(i / 5)}` }],
    }));
  const v = [
    { labels: { app: "v1" }, entries: alike() },
    { labels: { app: "v2" }, entries: alike() },
  ];
  await writeFlush(store, "v", v, LINES, 16 * 1024);
  for (const key of (await store.list("v/chunks/")).sort()) {
    const bytes = await store.get(key);
    expect(bytes.byteLength).toBeGreaterThan(128 * 1024);
    vEnds.push(lastBytes("end", bytes));
  }
});

/** How many of `chunk`'s last bytes its tail, or its end, takes. */
function lastBytes(part: "tail" | "end", chunk: Uint8Array): number {
  const length = (tail: Uint8Array, size: number): number =>
    part === "tail" ? ChunkReader.tailLength(tail, size) : ChunkReader.filterLength(tail, size);
  let n = 8;
  for (let need = length(chunk.subarray(-n), chunk.byteLength); need > n;) {
    n = need;
    need = length(chunk.subarray(-n), chunk.byteLength);
  }
  return n;
}

afterAll(async () => {
  await close();
});

/** A querier over the store, counting what it reads of chunk objects. */
function counted(): { run: (query: string, tenant?: string) => Promise<string[]>; reads: Reads } {
  const reads: Reads = { get: 0, getRange: 0, getTail: 0 };
  const isChunk = (key: string): boolean => key.includes("/chunks/");
  const counting: QuerierStore = {
    list: (prefix: string, o?: CallOptions) => store.list(prefix, o),
    get: async (key: string, o?: CallOptions) => {
      const data = await store.get(key, o);
      if (isChunk(key)) reads.get += data.byteLength;
      return data;
    },
    getRange: async (key: string, offset: number, length: number, o?: CallOptions) => {
      const data = await store.getRange(key, offset, length, o);
      if (isChunk(key)) reads.getRange += data.byteLength;
      return data;
    },
    getTail: async (key: string, length: number, o?: CallOptions) => {
      const tail = await store.getTail(key, length, o);
      if (isChunk(key)) reads.getTail += tail.data.byteLength;
      return tail;
    },
  };
  const querier = createQuerier({
    config: { ...DEFAULT_CONFIG, workers: 0 },
    store: counting,
    chunkFilter: KEEP_ALL_FILTER,
  });
  const total = (): number => reads.get + reads.getRange + reads.getTail;
  const run = async (query: string, tenant = "t"): Promise<string[]> => {
    const before = total();
    const got = await querier.selectLogs({
      tenant,
      query,
      start: T0,
      end: T0 + BigInt(LINES + 1) * S,
      limit: 5000,
      direction: "forward",
    });
    expect(got.stats.bytesFetched, query).toBe(total() - before);
    return got.entries.map((e) => e.line);
  };
  return { run, reads };
}

const linesOf = (test: (e: Entry) => boolean): string[] => entries.filter(test).map((e) => e.line);

describe("reading chunks by range", () => {
  test("the chunk is large enough to test ranges on", () => {
    // Over twice the first read of a tail (128 KiB); its end within the first read of one.
    expect(chunkBytes).toBeGreaterThan(256 * 1024);
    expect(chunkEnd).toBeLessThan(FIRST_END_BYTES);
    expect(chunkTail).toBeGreaterThan(4 * FIRST_END_BYTES);
  });

  test("a present needle reads the end, the tail before it and its block, not the whole chunk", async () => {
    const { run, reads } = counted();
    const trace = entries[2002]!.structuredMetadata[0]!.value;
    const got = await run(`{app="a"} | trace_id="${trace}"`);
    expect(got).toEqual(linesOf((e) => e.structuredMetadata[0]!.value === trace));
    expect(got).toHaveLength(5);
    expect(reads.get).toBe(0);
    expect(reads.getTail).toBe(FIRST_END_BYTES);
    // The rest of the tail, then the needle's block (or two): 16 KB blocks.
    expect(reads.getRange).toBeGreaterThan(chunkTail - FIRST_END_BYTES);
    expect(reads.getRange).toBeLessThan(chunkTail - FIRST_END_BYTES + 3 * 16 * 1024);
    expect(reads.getTail + reads.getRange).toBeLessThan(chunkBytes / 2);
  });

  test("an absent needle reads the chunk's end alone, not its tail", async () => {
    const { run, reads } = counted();
    expect(await run(`{app="a"} | trace_id="tr-absent"`)).toEqual([]);
    expect(reads).toEqual({ get: 0, getRange: 0, getTail: FIRST_END_BYTES });
    // Again: from the cache of chunk ends.
    expect(await run(`{app="a"} | trace_id="tr-absent-2"`)).toEqual([]);
    expect(reads).toEqual({ get: 0, getRange: 0, getTail: FIRST_END_BYTES });
  });

  test("a query without a metadata needle reads the chunk whole, in one call", async () => {
    const { run, reads } = counted();
    const got = await run(`{app="a"} |= "request 3999 "`);
    expect(got).toEqual(linesOf((e) => e.line.startsWith("request 3999 ")));
    expect(reads).toEqual({ get: chunkBytes, getRange: 0, getTail: 0 });
  });

  test("a tail longer than the first read is completed by one read of the bytes before it", async () => {
    const { run, reads } = counted();
    const trace = wide[1234]!.structuredMetadata[0]!.value;
    expect(await run(`{app="w"} | trace_id="${trace}"`, "u")).toEqual(["request 1234"]);
    expect(reads.get).toBe(0);
    expect(reads.getTail).toBe(FIRST_END_BYTES);
    // The rest of the tail, then the needle's block: every byte read once.
    expect(reads.getTail + reads.getRange).toBeLessThan(wideBytes);
    const before = { ...reads };
    expect(await run(`{app="w"}`, "u")).toHaveLength(LINES);
    expect(reads.getTail).toBe(before.getTail);
    // Everything but the 8-byte header, which a reader of a tail does not need.
    expect(reads.getTail + reads.getRange).toBe(wideBytes - 8);
  });

  test("a chunk the cache holds by its tail gets the blocks a later query needs", async () => {
    const { run, reads } = counted();
    const trace = entries[10]!.structuredMetadata[0]!.value;
    expect(await run(`{app="a"} | trace_id="${trace}"`)).toHaveLength(5);
    const tail = reads.getTail;
    // Every line, from the cached tail and the blocks read now: each block read once.
    expect(await run(`{app="a"}`)).toEqual(entries.map((e) => e.line));
    expect(reads.getTail).toBe(tail);
    expect(reads.get).toBe(0);
    // Everything but the 8-byte header, which a reader of a tail does not need: once.
    expect(reads.getTail + reads.getRange).toBe(chunkBytes - 8);
    // Then a needle reads nothing more, present or absent.
    const before = { ...reads };
    const other = entries[3001]!.structuredMetadata[0]!.value;
    expect(await run(`{app="a"} | trace_id="${other}"`)).toHaveLength(5);
    expect(await run(`{app="a"} | trace_id="tr-absent"`)).toEqual([]);
    expect(reads).toEqual(before);
  });

  test("a tenant's later chunks are read first by the share its earlier ends took", async () => {
    const { run, reads } = counted();
    expect(vEnds).toHaveLength(2);
    expect(await run(`{app="v1"} | trace_id="v-absent"`, "v")).toEqual([]);
    // Its first end: the fixed first read.
    expect(reads.getTail).toBe(FIRST_END_BYTES);
    expect(await run(`{app="v2"} | trace_id="v-absent"`, "v")).toEqual([]);
    const second = reads.getTail - FIRST_END_BYTES;
    // The second: its own end and a margin, in one read.
    expect(reads.getRange).toBe(0);
    expect(second).toBeGreaterThanOrEqual(Math.min(...vEnds));
    expect(second).toBeLessThan(Math.max(...vEnds) * 1.2 + 1024);
    expect(second).toBeLessThan(FIRST_END_BYTES / 2);
    expect(await run(`{app="v2"} | trace_id="v-7"`, "v")).toHaveLength(5);
  });
});
