/**
 * A querier made ready for queries before it takes them (Loki's `query_ready_num_days`):
 * the index segments of the last days, decoded into the segment cache, the bloom blocks
 * they name read into a gateway that runs in this thread, and their chunks' ends (footer
 * and symbol filter) into the cache of chunk ends, newest first. Without it the first
 * needle after a start read and decoded them itself (88 ms of execution where a later one
 * took 1–3). It loads through the caches alone, not through a query: the query path's
 * counters see only queries.
 *
 * Then, optionally, it rehearses: a few needle queries on one series of what it loaded,
 * run through the query handler with no ingesters, so that the code a query runs is
 * compiled and optimised before the first real one (a worker's first needle otherwise
 * spent 25 ms executing where the next took 1–3, JIT and lazy set-up).
 */
import type { IndexedChunk } from "@sieve/index";
import type { QuerierParts } from "./context.js";
import { cachedChunk, cachedEnd } from "./fetch.js";
import type { QueryAnswer, QueryTask } from "./handler.js";
import { cachedSegment, listedSegments } from "./index-read.js";

const DAY_NS = 86_400_000_000_000n;

/** What a warm-up loaded. */
export interface WarmReport {
  readonly tenants: number;
  readonly segments: number;
  readonly series: number;
  /** Bloom blocks read (0 without a gateway in this thread). */
  readonly bloomBlocks: number;
  /** Chunk ends read (footer and symbol filter). */
  readonly chunkEnds: number;
  /** Queries rehearsed, the lines their needles found, and the milliseconds they took. */
  readonly rehearsed: Rehearsal;
  readonly ms: number;
}

/** Options of {@link warmQuerier}. */
export interface WarmOptions {
  /** The index of the last `days` × 24 hours (the segments of every day they touch). */
  readonly days: number;
  /** Bytes of bloom blocks to hold at most, newest blocks first. */
  readonly bloomBytes: number;
  /** Rounds of rehearsal queries (four a round: a selector, a present and two absent needles). */
  readonly rehearsals?: number;
  /** Stops the warm-up; what it did not load is read at first use. */
  readonly signal?: AbortSignal;
  readonly nowMs?: number;
}

/** What a rehearsal ran. */
export interface Rehearsal {
  readonly queries: number;
  readonly lines: number;
  readonly ms: number;
  /** Its distinct queries, for a caller that rehearses them again through its HTTP routes. */
  readonly tasks: readonly QueryTask[];
}

/** Answers a task as a query worker does, with no ingesters (a querier's `withoutIngesters`). */
export type RehearsalRunner = (task: QueryTask) => Promise<QueryAnswer>;

/**
 * Loads the index of the last `days` × 24 hours of each of `tenants` (a name that holds
 * no index loads nothing), then, when the querier's gateway can load ahead, the bloom
 * blocks those segments name, newest first, up to `bloomBytes`; then rehearses on `run`
 * when given. Store failures throw.
 */
export async function warmQuerier(
  parts: QuerierParts,
  tenants: readonly string[],
  options: WarmOptions,
  run?: RehearsalRunner,
): Promise<WarmReport> {
  const started = performance.now();
  const nowNs = BigInt(options.nowMs ?? Date.now()) * 1_000_000n;
  const from = nowNs - BigInt(options.days) * DAY_NS;
  const { signal } = options;
  const blocks = new Set<string>();
  let segments = 0;
  let series = 0;
  let sample: Sample | undefined;
  const chunks: IndexedChunk[] = [];
  for (const tenant of tenants) {
    for (const key of await listedSegments(parts, tenant, from, nowNs + DAY_NS, { signal })) {
      signal?.throwIfAborted();
      const segment = await cachedSegment(parts, tenant, key);
      if (segment === undefined) continue;
      segments++;
      series += segment.series.length;
      const chunk = largest(segment.series[0]?.chunks ?? []);
      if (chunk !== undefined && (sample === undefined || chunk.ref.from > sample.chunk.ref.from)) {
        sample = { tenant, labels: segment.labels[0]!, chunk };
      }
      for (const s of segment.series) {
        for (const c of s.chunks) {
          chunks.push(c);
          if (c.bloom.kind === "block") blocks.add(c.bloom.key);
        }
      }
    }
  }
  let bloomBlocks = 0;
  const { chunkFilter } = parts;
  if (chunkFilter.loadBlocks !== undefined && options.bloomBytes > 0) {
    // Block names start with their flush's time (the key's last part): the newest first.
    const newest = [...blocks].sort((a, b) => (lastPart(a) < lastPart(b) ? 1 : -1));
    bloomBlocks = await chunkFilter.loadBlocks(newest, options.bloomBytes);
  }
  const chunkEnds = await loadEnds(parts, chunks, signal);
  const rounds = options.rehearsals ?? 0;
  const rehearsed =
    run === undefined || sample === undefined || rounds <= 0
      ? NO_REHEARSAL
      : await rehearse(parts, sample, spanOf(chunks), rounds, nowNs, run, signal);
  return {
    tenants: tenants.length,
    segments,
    series,
    bloomBlocks,
    chunkEnds,
    rehearsed,
    ms: performance.now() - started,
  };
}

const NO_REHEARSAL: Rehearsal = { queries: 0, lines: 0, ms: 0, tasks: [] };

/** Chunk ends read at once while warming (a batch; the budget is looked at between). */
const END_READS = 8;

/**
 * Reads the ends of `chunks` (footer and symbol filter, ~2% of a chunk) into the cache of
 * chunk ends, newest first, `END_READS` at a time, until it holds three quarters of its
 * budget (the rest for the ends of older chunks queries meet): a needle's chunks that a
 * bloom kept by false positive are then refused without a read from the first query on, as
 * the bloom blocks spare it reading blooms. At half, the 1 GB `bench:peers` data held 780 of
 * its 1,074 ends, and a wide needle's first queries read a few of the rest each (0.3-1.2 ms
 * of their 2-3). Answers how many it holds; a chunk that cannot be read is left to the
 * queries that need it.
 */
async function loadEnds(
  parts: QuerierParts,
  chunks: IndexedChunk[],
  signal: AbortSignal | undefined,
): Promise<number> {
  const cache = parts.chunkEnds;
  chunks.sort((a, b) =>
    a.ref.through < b.ref.through ? 1 : a.ref.through > b.ref.through ? -1 : 0,
  );
  let next = 0;
  while (
    next < chunks.length &&
    cache.bytes < (cache.maxBytes * 3) / 4 &&
    signal?.aborted !== true
  ) {
    const batch = chunks.slice(next, (next += END_READS));
    await Promise.all(
      batch.map(
        (c) => cachedEnd(parts, c.key, c.ref, c.bytes).catch(() => undefined), // read at first use
      ),
    );
  }
  return chunks.slice(0, next).filter((c) => cache.has(c.key)).length;
}

/**
 * The chunk of the most entries: a needle's loops over a chunk's symbols and its blocks'
 * symbol lists run as long on it as on the chunks real needles read, and are compiled while
 * rehearsing. (A series' newest chunk is often a flush's remainder of a few lines: rehearsed
 * on it, those loops were still interpreted at the first needles after a start.)
 */
function largest(chunks: readonly IndexedChunk[]): IndexedChunk | undefined {
  let out: IndexedChunk | undefined;
  for (const c of chunks) if (out === undefined || c.entries > out.entries) out = c;
  return out;
}

/** The time the chunks cover, first to last (ns). */
function spanOf(chunks: readonly IndexedChunk[]): { from: bigint; through: bigint } {
  let from = chunks[0]?.ref.from ?? 0n;
  let through = from;
  for (const { ref } of chunks) {
    if (ref.from < from) from = ref.from;
    if (ref.through > through) through = ref.through;
  }
  return { from, through };
}

/** The series rehearsals ask about: the largest chunk of a loaded segment's first series. */
interface Sample {
  readonly tenant: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly chunk: IndexedChunk;
}

/**
 * `rounds` × four queries: over the sample's chunk's range, its series' selector (limit
 * 10), and under its first label a needle on the first metadata pair of its newest line
 * (present) and the same pair with another value (absent); and that absent needle over all
 * the loaded chunks' `span`, as a needle over a selection's whole span (the bloom gateway
 * tests each of its series' blooms, and from the third round on from the selection's table:
 * before, the first wide needle after a start met filter kinds and object shapes the
 * rehearsal had not, and its code was thrown away and compiled again, 5 ms over the main
 * thread's budget). Answers are thrown away; a failed one ends the rehearsal (the queries
 * will meet the same failure themselves), and so does the warm-up's signal: what was
 * loaded stays loaded.
 */
async function rehearse(
  parts: QuerierParts,
  sample: Sample,
  span: { from: bigint; through: bigint },
  rounds: number,
  nowNs: bigint,
  run: RehearsalRunner,
  signal: AbortSignal | undefined,
): Promise<Rehearsal> {
  const started = performance.now();
  const pairs = Object.entries(sample.labels).map(([n, v]) => `${n}=${JSON.stringify(v)}`);
  if (pairs.length === 0) return NO_REHEARSAL;
  // The series itself (one chunk read and decoded), and needles under its first label,
  // which may select many series (the bloom gateway's path).
  const series = `{${pairs.join(", ")}}`;
  const first = `{${pairs[0]!}}`;
  const { ref, key } = sample.chunk;
  const { value: reader } = await cachedChunk(parts, key);
  const newest = reader.entries({ direction: "backward" }).next().value;
  const pair = newest?.structuredMetadata[0];
  const queries = [{ query: series, from: ref.from, through: ref.through }];
  if (pair !== undefined) {
    const absent = `${first} | ${pair.name}=${JSON.stringify(`${pair.value}-absent`)}`;
    queries.push(
      {
        query: `${first} | ${pair.name}=${JSON.stringify(pair.value)}`,
        from: ref.from,
        through: ref.through,
      },
      { query: absent, from: ref.from, through: ref.through },
      { query: absent, ...span },
    );
  }
  const tasks = queries.map(({ query, from, through }): QueryTask => ({
    route: "query_range",
    form: new URLSearchParams({
      query,
      start: String(from),
      end: String(through + 1n),
      limit: "10",
      direction: "backward",
    }).toString(),
    tenant: sample.tenant,
    flags: [],
    nowNs,
  }));
  let ran = 0;
  let lines = 0;
  for (let i = 0; i < rounds * tasks.length && signal?.aborted !== true; i++) {
    const k = i % tasks.length;
    // The present needle finds the chunk as one after a start does, out of the cache: its
    // tail read, its symbols and its blocks' symbol lists decoded, a block read. Those loops
    // run once a chunk; rehearsed on a cached chunk, they were still interpreted at the
    // first needles (~5 ms of the second narrow one on the 1 GB peers data).
    if (k === 1) parts.chunks.forget(key);
    const answer = await run(tasks[k]!);
    if (answer.status !== 200) break;
    ran++;
    if (k > 0) lines += countLines(answer.body);
  }
  return { queries: ran, lines, ms: performance.now() - started, tasks };
}

/** Lines in a query_range answer's streams. */
function countLines(body: string): number {
  const parsed = JSON.parse(body) as { data?: { result?: { values?: unknown[] }[] } };
  return (parsed.data?.result ?? []).reduce((n, s) => n + (s.values?.length ?? 0), 0);
}

function lastPart(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}
