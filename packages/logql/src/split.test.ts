/**
 * Split by interval: a range query cut at interval boundaries, each part evaluated on its
 * own and the parts merged, equals the unsplit query (random data, steps, intervals).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseExpr } from "./index.js";
import { evaluateRange, type StreamEntries } from "./metric.js";
import { mergeMatrices, splitRange } from "./split.js";

const S = 1_000_000_000n;
const BASE = 1_700_000_000n * S;

describe("splitRange", () => {
  it("cuts the steps at multiples of the interval, none lost or repeated", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -100, max: 1000 }),
        fc.integer({ min: 0, max: 500 }),
        fc.integer({ min: 1, max: 70 }),
        fc.integer({ min: 1, max: 120 }),
        (start, len, step, interval) => {
          const p = {
            startNs: BASE + BigInt(start) * S,
            endNs: BASE + BigInt(start + len) * S,
            stepNs: BigInt(step) * S,
          };
          const parts = splitRange(p, BigInt(interval) * S);
          const steps = (q: typeof p): bigint[] => {
            const out: bigint[] = [];
            for (let t = q.startNs; t <= q.endNs; t += q.stepNs) out.push(t);
            return out;
          };
          expect(parts.flatMap(steps)).toEqual(steps(p));
          for (const q of parts) {
            const k = (t: bigint): bigint => t / (BigInt(interval) * S);
            expect(k(q.startNs)).toBe(k(q.endNs));
          }
        },
      ),
    );
  });

  it("split == unsplit, for every query", () => {
    const queries = [
      `sum by (level) (count_over_time({app="a"} | logfmt [1m]))`,
      `rate({app="a"}[90s] offset 10s)`,
      `quantile_over_time(0.5, {app="a"} | logfmt | unwrap latency [2m]) by (level)`,
      `topk(1, sum by (level) (count_over_time({app="a"} | logfmt [30s])))`,
      `absent_over_time({app="a"}[10s])`,
    ].map((q) => parseExpr(q));
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            sec: fc.integer({ min: 0, max: 900 }),
            level: fc.constantFrom("info", "error"),
            latency: fc.integer({ min: 0, max: 99 }),
          }),
          { maxLength: 200 },
        ),
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 600 }),
        fc.constantFrom(1, 7, 15, 60),
        fc.constantFrom(10, 60, 120, 3600),
        fc.constantFrom(...queries.map((_, i) => i)),
        (rows, start, len, step, interval, qi) => {
          const stream: StreamEntries = {
            labels: { app: "a" },
            entries: rows
              .map((r) => ({
                timestamp: BASE + BigInt(r.sec) * S,
                line: `level=${r.level} latency=${r.latency}`,
              }))
              .sort((x, y) => (x.timestamp < y.timestamp ? -1 : x.timestamp > y.timestamp ? 1 : 0)),
          };
          const p = {
            startNs: BASE + BigInt(start) * S,
            endNs: BASE + BigInt(start + len) * S,
            stepNs: BigInt(step) * S,
          };
          const expr = queries[qi]!;
          const whole = evaluateRange(expr, [stream], p);
          const parts = splitRange(p, BigInt(interval) * S).map((q) =>
            evaluateRange(expr, [stream], q),
          );
          expect(mergeMatrices(parts)).toEqual(whole);
        },
      ),
    );
  });
});
