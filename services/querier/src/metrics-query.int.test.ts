/**
 * Pushed-down metric queries, the querier's merge: a chunk an ingester still holds after
 * flushing it (its part carries the chunk's identity) counts once; an ingester part of a
 * chunk the store does not hold counts; overlapping store chunks of a series count each
 * line once; a split range query equals the unsplit one. Real parts: a filesystem store
 * written as a flush writes it, and the in-process querier.
 */
import { ChunkReader, type Entry } from "@sieve/chunk";
import { SamplePlan, parseExpr, type SampleExpr } from "@sieve/logql";
import type { IngesterQuerier, IngesterSamplePart } from "@sieve/proto";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { NO_INGESTERS } from "./deps.js";
import { createQuerier } from "./index.js";
import { identity, tempStore, writeFlush } from "./testdata.test-helper.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const TENANT = "merge";
const LABELS = { app: "m" };

const entries: Entry[] = Array.from({ length: 100 }, (_, i) => ({
  timestamp: T0 + BigInt(i + 1) * S,
  line: `level=${i % 3 === 0 ? "error" : "info"} i=${i}`,
  structuredMetadata: [],
}));

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** The store's chunk objects of the stream: key and identity. */
async function storedChunks(store: { list(p: string): Promise<string[]> }) {
  const { fp } = identity(LABELS);
  const keys = await store.list(`${TENANT}/chunks/`);
  return keys.map((key) => {
    const [from, through, sum] = key.split("/").at(-1)!.split("-");
    return {
      key,
      fingerprint: fp,
      from: BigInt(from!),
      through: BigInt(through!),
      checksum: parseInt(sum!, 16),
    };
  });
}

/** What an ingester holding `bytes` as a cut chunk answers for `query`: that chunk's part. */
function chunkPart(
  query: string,
  p: { start: bigint; end: bigint; step: bigint },
  bytes: Uint8Array,
  chunk: IngesterSamplePart["chunk"],
): IngesterSamplePart {
  const plan = new SamplePlan(parseExpr(query) as SampleExpr, {
    startNs: p.start,
    endNs: p.end,
    stepNs: p.step,
  });
  const into = plan.partials();
  const fold = plan.stream(LABELS)!;
  for (const e of new ChunkReader(bytes).entries({
    from: plan.from + 1n,
    through: plan.through + 1n,
  })) {
    plan.fold(into, fold, { timestamp: e.timestamp, line: e.line, structuredMetadata: {} });
  }
  return { ...(chunk !== undefined && { chunk }), series: into.data() };
}

async function setup(
  ingesterParts: (
    query: string,
    p: { start: bigint; end: bigint; step: bigint },
  ) => IngesterSamplePart[],
  split = 0,
) {
  const t = await tempStore();
  closers.push(t.close);
  await writeFlush(t.store, TENANT, [{ labels: LABELS, entries }], 25);
  const ingesters: IngesterQuerier = {
    ...NO_INGESTERS,
    querySample: (req) =>
      Promise.resolve(ingesterParts(req.query, { start: req.start, end: req.end, step: req.step })),
  };
  const querier = createQuerier({
    config: { ...DEFAULT_CONFIG, splitQueriesByIntervalMs: split },
    store: t.store,
    ingesters,
  });
  return { querier, store: t.store };
}

const QUERY = `sum by (level) (count_over_time({app="m"} | logfmt [1m]))`;

async function counts(querier: ReturnType<typeof createQuerier>, step = 10n * S) {
  const answer = await querier.selectMatrix({
    tenant: TENANT,
    query: QUERY,
    start: T0 + 60n * S,
    end: T0 + 120n * S,
    step,
  });
  return answer;
}

describe("the querier's merge of pushed-down partials", () => {
  it("drops an ingester's part of a chunk the store holds, and keeps one of a chunk it does not", async () => {
    // What the ingester holds: nothing, then a flushed chunk (as before it drops it).
    const state: {
      held?: { bytes: Uint8Array; ref: NonNullable<IngesterSamplePart["chunk"]> };
      fake: boolean;
    } = { fake: false };
    const { querier, store } = await setup((query, p) => {
      const held = state.held;
      if (held === undefined) return [];
      const ref = state.fake ? { ...held.ref, checksum: held.ref.checksum ^ 1 } : held.ref;
      return [chunkPart(query, p, held.bytes, ref)];
    });
    const alone = await counts(querier);
    const total = (m: typeof alone.result) =>
      m.reduce((n, s) => n + Number(s.values.at(-1)![1]), 0);
    // The window (T0 + 60 s, T0 + 120 s] holds lines 60..99: 40.
    expect(total(alone.result)).toBe(40);
    const chunk = (await storedChunks(store)).find(
      (c) => c.from <= T0 + 90n * S && c.through >= T0 + 90n * S,
    )!;
    state.held = { bytes: await store.get(chunk.key), ref: chunk };
    const same = await counts(querier);
    expect(same.result).toEqual(alone.result);
    expect(same.stats.duplicatesDropped).toBe(1);
    state.fake = true;
    const other = await counts(querier);
    expect(total(other.result)).toBe(40 + 25);
  });

  it("counts each line of overlapping store chunks once", async () => {
    const { querier, store } = await setup(() => []);
    const before = await counts(querier);
    // The same lines flushed again (a replay): every chunk now has a twin in the store.
    await writeFlush(store, TENANT, [{ labels: LABELS, entries }], 30);
    const after = await counts(querier);
    expect(after.result).toEqual(before.result);
    expect(after.stats.duplicatesDropped).toBeGreaterThan(0);
  });

  it("a query split by interval answers as the unsplit one", async () => {
    const whole = await setup(() => []);
    const split = await setup(() => [], 20_000);
    const a = await counts(whole.querier, 3n * S);
    const b = await counts(split.querier, 3n * S);
    expect(b.result).toEqual(a.result);
    expect(a.result.length).toBe(2);
  });
});
