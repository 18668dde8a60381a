import { MemoryWatermark } from "@sieve/kit";
import type { IngesterQuerier } from "@sieve/proto";
import { describe, expect, test } from "vitest";
import { skipIdleIngesters } from "./deps.js";

/** Ingesters that answer one of everything and note each call. */
function recording(): { ingesters: IngesterQuerier; calls: string[] } {
  const calls: string[] = [];
  const answer = <T>(name: string, value: T) => {
    calls.push(name);
    return Promise.resolve(value);
  };
  const ingesters: IngesterQuerier = {
    query: () =>
      answer("query", [{ labels: '{a="1"}', labelMap: { a: "1" }, entries: [] }] as never),
    series: () => answer("series", [{ labels: '{a="1"}', fingerprint: 1n }]),
    volume: () => answer("volume", [{ name: '{a="1"}', volume: 1 }] as never),
    stats: () => answer("stats", { streams: 1, chunks: 1, bytes: 1, entries: 1 }),
    patterns: () => answer("patterns", [{ pattern: "x", samples: [] }] as never),
    querySample: () => answer("sample", [{ labels: '{a="1"}' }] as never),
  };
  return { ingesters, calls };
}

const T = 1_700_000_000_000_000_000n;

/** Every call a querier makes, over a range ending at `end` (inclusive for some calls). */
async function callAll(ingesters: IngesterQuerier, end: bigint): Promise<unknown[]> {
  const range = { tenant: "t", selector: '{a="1"}', start: end - 1_000n, end };
  return [
    await ingesters.query({ ...range, direction: "forward", limit: 10 }),
    await ingesters.series(range),
    await ingesters.volume({ ...range, limit: 10 } as never),
    await ingesters.stats(range),
    await ingesters.patterns({ ...range, stepMs: 1000 }),
    await ingesters.querySample({ ...range } as never),
  ];
}

describe("ingesters skipped when their memory holds nothing of the range", () => {
  const ALL = ["query", "series", "volume", "stats", "patterns", "sample"];
  test.each([
    // [case, the two slots (undefined: never written), the range's end, asked]
    ["never written: may hold anything", [undefined, undefined], T, ALL],
    ["both hold nothing", [null, null], T, ["patterns"]],
    ["one holds from T on, the range ends before T", [T, null], T - 2n, ["patterns"]],
    ["one holds from T on, the range ends at T (inclusive)", [T, null], T, ALL],
    ["the other holds from T on, the range ends after T", [null, T], T + 5n, ALL],
  ] as const)("%s", async (_case, slots, end, asked) => {
    const memory = MemoryWatermark.buffer(2);
    slots.forEach((ts, slot) => {
      if (ts !== undefined) new MemoryWatermark(memory, slot).set(ts ?? undefined);
    });
    const { ingesters, calls } = recording();
    const answers = await callAll(skipIdleIngesters(ingesters, memory), end);
    expect(calls).toEqual(asked);
    if (asked.length === 1) {
      // Skipped: the empty answers, patterns still the ingesters'.
      expect(answers).toEqual([
        [],
        [],
        [],
        { streams: 0, chunks: 0, bytes: 0, entries: 0 },
        [{ pattern: "x", samples: [] }],
        [],
      ]);
    } else {
      expect(answers).toEqual(await callAll(recording().ingesters, end));
    }
  });
});
