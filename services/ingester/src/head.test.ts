import fc from "fast-check";
import type { Entry } from "@sieve/chunk";
import { decodeChunk } from "@sieve/chunk";
import { describe, expect, it } from "vitest";
import { Head, selectEntries } from "./head.js";
import type { EntryRange } from "./head.js";

const entry = (ts: number, line: string): Entry => ({
  timestamp: BigInt(ts),
  line,
  structuredMetadata: [{ name: "k", value: line.slice(0, 3) }],
});

/** The reference answer: every distinct entry, filtered, stably sorted, limited. */
function expected(all: Entry[], range: EntryRange): Entry[] {
  return selectEntries([...all], range);
}

describe("Head", () => {
  it("tracks offsets and age, drops exact duplicates", () => {
    const h = new Head(1024, 1000);
    expect(h.append(entry(5, "a"), 10, 1001)).toBe(true);
    expect(h.append(entry(5, "a"), 11, 1002)).toBe(false);
    expect(h.append(entry(3, "b"), 12, 1003)).toBe(true);
    expect(h.firstOffset).toBe(10);
    expect(h.lastOffset).toBe(12);
    expect(h.lastAppendMs).toBe(1003);
    expect(h.createdMs).toBe(1000);
    expect(h.entryCount).toBe(2);
    const chunk = decodeChunk(h.encode().bytes);
    expect(chunk.entries.map((e) => e.line)).toEqual(["b", "a"]);
  });

  it("answers reads interleaved with appends like a sorted list would (property)", () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("append" as const),
        ts: fc.integer({ min: 0, max: 200 }),
        line: fc.string({ maxLength: 40 }),
      }),
      fc.record({
        kind: fc.constant("read" as const),
        from: fc.integer({ min: 0, max: 200 }),
        span: fc.integer({ min: 0, max: 220 }),
        backward: fc.boolean(),
        limit: fc.nat(20),
      }),
    );
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 120 }),
        fc.integer({ min: 64, max: 2048 }),
        (ops, block) => {
          const h = new Head(block, 0);
          const all: Entry[] = [];
          let offset = 0;
          for (const o of ops) {
            if (o.kind === "append") {
              const e = entry(o.ts, o.line);
              const fresh = !all.some((x) => x.timestamp === e.timestamp && x.line === e.line);
              expect(h.append(e, offset++, 0)).toBe(fresh);
              if (fresh) all.push(e);
            } else {
              const range: EntryRange = {
                from: BigInt(o.from),
                through: BigInt(o.from + o.span),
                direction: o.backward ? "backward" : "forward",
                limit: o.limit,
              };
              const got = h.read(range).map((e) => `${e.timestamp}:${e.line}`);
              const want = expected(all, range).map((e) => `${e.timestamp}:${e.line}`);
              // Equal timestamps: same multiset (order among them is append order on both sides
              // except where a limit cuts a run of equal timestamps).
              expect(got.length).toBe(want.length);
              expect(got.map((s) => s.split(":")[0])).toEqual(want.map((s) => s.split(":")[0]));
            }
          }
          if (all.length > 0)
            expect(decodeChunk(h.encode().bytes).entries).toHaveLength(all.length);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("with a metadata filter, reads of its encoded part decode only entries that can pass", () => {
    const h = new Head(256, 0);
    for (let i = 0; i < 200; i++) {
      h.append(
        {
          timestamp: BigInt(i),
          line: `line ${i}`,
          structuredMetadata: [{ name: "trace_id", value: `t${i % 50}` }],
        },
        i,
        0,
      );
    }
    const range: EntryRange = { from: 0n, through: 1000n, direction: "forward", limit: 0 };
    const filter = { test: { kind: "kv", name: "trace_id", value: "t7" } as const, labels: {} };
    const lines = (r: EntryRange) => h.read(r).map((e) => e.line);
    expect(lines(range)).toHaveLength(200);
    expect(lines({ ...range, filter })).toEqual(["line 7", "line 57", "line 107", "line 157"]);
    // A name that is a stream label passes whatever the metadata: nothing is skipped.
    expect(lines({ ...range, filter: { ...filter, labels: { trace_id: "x" } } })).toHaveLength(200);
    // Entries appended after the snapshot are not encoded yet: read whole (the pipeline decides).
    h.append({ timestamp: 500n, line: "late", structuredMetadata: [] }, 200, 0);
    expect(lines({ ...range, filter })).toEqual([
      "line 7",
      "line 57",
      "line 107",
      "line 157",
      "late",
    ]);
  });
});
