/**
 * The sample call over an ingester's streams in memory (`sampleStreams`): one part per cut
 * chunk, carrying the identity the flush gives that chunk, one for the heads; merged, the
 * parts count every line once; LogQL's refusals are the query's (400 `invalid_request`).
 */
import { ChunkBuilder, type Entry } from "@sieve/chunk";
import { SamplePlan, evaluateInstant, parseExpr, type SampleExpr } from "@sieve/logql";
import { describe, expect, it } from "vitest";
import { Head } from "./head.js";
import { queryStreams, sampleStreams, type QueryableStream } from "./query.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const at = (sec: number, line: string): Entry => ({
  timestamp: T0 + BigInt(sec) * S,
  line,
  structuredMetadata: [],
});

/** A stream with a cut chunk of lines 1..50 s and a head of lines 51..100 s. */
function stream(): { s: QueryableStream; checksum: number } {
  const builder = new ChunkBuilder({ blockTargetBytes: 512 });
  for (let i = 1; i <= 50; i++) builder.append(at(i, `level=info i=${i}`));
  const encoded = builder.encode();
  const head = new Head(512, 0);
  for (let i = 51; i <= 100; i++)
    head.append(at(i, `level=${i % 2 ? "info" : "error"} i=${i}`), i, 0);
  return {
    checksum: encoded.checksum,
    s: {
      key: "k",
      labels: '{app="a"}',
      fingerprint: 42n,
      labelMap: { app: "a" },
      head,
      pending: [{ encoded, firstOffset: 0, lastOffset: 50, reason: "full" }],
      flushing: [],
    },
  };
}

describe("sampleStreams", () => {
  it("answers a part per cut chunk (its identity) and one for the heads; merged, each line once", async () => {
    const { s, checksum } = stream();
    const query = `sum by (level) (count_over_time({app="a"} | logfmt [200s]))`;
    const time = T0 + 100n * S;
    const parts = await sampleStreams([s], {
      tenant: "t",
      query,
      start: time,
      end: time,
      step: 0n,
    });
    expect(parts.map((p) => p.chunk)).toEqual([
      { fingerprint: 42n, from: T0 + S, through: T0 + 50n * S, checksum },
      undefined,
    ]);
    const expr = parseExpr(query) as SampleExpr;
    const plan = new SamplePlan(expr, { startNs: time, endNs: time, stepNs: 0n });
    const merged = plan.partials();
    for (const p of parts) merged.merge(p.series);
    const v = evaluateInstant(expr, [], time, { rangeVectors: plan.rangeVectors(merged) });
    expect(v.map((x) => [x.metric, x.value[1]])).toEqual([
      [{ level: "error" }, "25"],
      [{ level: "info" }, "75"],
    ]);
  });

  it("refuses past maxSamples and an unfiltered __error__ as the query's fault", async () => {
    const { s } = stream();
    const time = T0 + 100n * S;
    const req = { tenant: "t", start: time - 99n * S, end: time, step: S };
    await expect(
      sampleStreams([s], { ...req, query: `count_over_time({app="a"}[1s])`, maxSamples: 20 }),
    ).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringMatching(/too many samples into memory/) as unknown,
    });
    await expect(
      sampleStreams([s], { ...req, query: `count_over_time({app="a"} | json [1s])` }),
    ).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringMatching(/pipeline error: 'JSONParserErr'/) as unknown,
    });
  });
});

describe("delete requests carried by a query (query-time filtering)", () => {
  // Lines 40..60 s with "i=4x" or "i=5x" in the head and the cut chunk: i=40..49 and 50..59
  // whose line ends in 5 (`i=45`, `i=55`), inclusive range 45..55 s.
  const deletes = [{ query: '{app="a"} |~ "i=[45]5$"', start: T0 + 45n * S, end: T0 + 55n * S }];

  it("drops the selected lines of cut chunks and heads from a log query", async () => {
    const { s } = stream();
    const req = { tenant: "t", selector: '{app="a"}', start: T0, end: T0 + 200n * S };
    const all = await queryStreams([s], { ...req, direction: "forward", limit: 0 }, 1000);
    const kept = await queryStreams([s], { ...req, direction: "forward", limit: 0, deletes }, 1000);
    const lines = (r: typeof all) => r.flatMap((x) => x.entries.map((e) => e.line));
    expect(lines(all)).toHaveLength(100);
    expect(lines(all).filter((l) => !lines(kept).includes(l))).toEqual([
      "level=info i=45",
      "level=info i=55",
    ]);
  });

  it("drops them before they are counted by a metric query; another stream is untouched", async () => {
    const { s } = stream();
    const other = {
      ...stream().s,
      key: "o",
      labels: '{app="b"}',
      fingerprint: 7n,
      labelMap: { app: "b" },
    };
    const query = `sum by (app) (count_over_time({app=~"a|b"}[200s]))`;
    const time = T0 + 100n * S;
    const parts = await sampleStreams([s, other], {
      tenant: "t",
      query,
      start: time,
      end: time,
      step: 0n,
      deletes,
    });
    const expr = parseExpr(query) as SampleExpr;
    const plan = new SamplePlan(expr, { startNs: time, endNs: time, stepNs: 0n });
    const merged = plan.partials();
    for (const p of parts) merged.merge(p.series);
    const v = evaluateInstant(expr, [], time, { rangeVectors: plan.rangeVectors(merged) });
    expect(v.map((x) => [x.metric.app, x.value[1]])).toEqual([
      ["a", "98"],
      ["b", "100"],
    ]);
  });

  it("a delete query that does not parse is the querier's fault", async () => {
    const { s } = stream();
    await expect(
      queryStreams(
        [s],
        {
          tenant: "t",
          selector: '{app="a"}',
          start: T0,
          end: T0 + 200n * S,
          direction: "forward",
          limit: 0,
          deletes: [{ query: "{app=", start: 0n, end: 1n }],
        },
        1000,
      ),
    ).rejects.toMatchObject({ code: "invalid_request" });
  });
});
