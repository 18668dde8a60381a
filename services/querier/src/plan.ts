/**
 * The plan of a query: the series and chunk refs in range the selectors match (read from
 * the index by index-read.ts) → pruned by the bloom gateway when the query has a bloom
 * test. A bloom gateway that fails keeps every ref (invariant 1), logged and counted by
 * reason.
 */
import {
  MISSING_REASONS,
  type IndexedChunk,
  type IndexedSeries,
  type MissingReason,
  type SegmentChunk,
} from "@sieve/index";
import { withoutLineTests, type BloomTest, type Matcher } from "@sieve/logql";
import { testedPart } from "./audit.js";
import { OverBudget, type QuerierParts, type QueryContext } from "./context.js";
import { KEEP_ALL_FILTER } from "./deps.js";
import type { ChunkVerdict, FilterResponse, FilterSeries } from "@sieve/proto";
import { QueryError, maxChunks } from "./errors.js";
import type { ChunkOutcome, NoBloomDetail } from "./explain.js";
import { readSeries } from "./index-read.js";
import type { ReadReport } from "./labels.js";

/** A chunk the plan will read, with its series. */
export interface PlannedChunk {
  readonly chunk: IndexedChunk;
  readonly labels: Readonly<Record<string, string>>;
  /**
   * The bloom test this chunk passed, as its bloom evaluated it, when the chunk is to be
   * audited for a false positive (audit.ts): it passed a test and lies wholly in range.
   */
  readonly audit?: BloomTest;
  /**
   * The series' retention cutoff (ns) when it falls inside the chunk: entries before it
   * have expired and are skipped (the chunk stays until its last entry expires).
   */
  readonly notBefore?: bigint;
}

/** Whether the chunk's bloom holds line n-grams (its index entry says). */
function lined(c: IndexedChunk): boolean {
  return c.bloom.kind === "block" && c.bloom.ngrams !== undefined;
}

function chunkId(fp: bigint, c: { from: bigint; through: bigint; checksum: number }): string {
  return `${fp}:${c.from}:${c.through}:${c.checksum}`;
}

/**
 * The fail-open reason of an error thrown by the bloom step (the gateway's reason names):
 * `timeout` when it ran out of time, `gateway_error` for anything else the call threw.
 */
function failOpenReason(error: unknown): string {
  return error instanceof Error && error.name === "TimeoutError" ? "timeout" : "gateway_error";
}

/** Reports a failed bloom step: `chunks` refs kept untested with `reason`. */
function reportFailOpen(
  report: ReadReport,
  tenant: string,
  chunks: number,
  reason: string,
  error: unknown,
): Record<string, number> {
  report.failedOpen(reason, chunks, tenant, error);
  return { [reason]: chunks };
}

/** What the bloom step answered, for {@link judge}. */
interface BloomAnswer {
  /** Chunks not sent to the gateway (a line-only test, and a bloom without n-grams). */
  readonly unsent: ReadonlySet<IndexedChunk>;
  /** The querier has no gateway: nothing was tested. */
  readonly noGateway: boolean;
  /** The gateway call failed with this reason: everything kept untested. */
  readonly failed: string | undefined;
  /**
   * The chunks the gateway kept: answered as the records it was sent (a gateway in this
   * thread), or as copies, by {@link chunkId} (over a port or HTTP).
   */
  readonly kept: ReadonlySet<SegmentChunk>;
  readonly keptIds: ReadonlySet<string>;
  /** Its verdicts on the others and on those it kept untested, by {@link chunkId}. */
  readonly verdicts: ReadonlyMap<string, ChunkVerdict>;
}

// The common outcomes, shared: judging a chunk allocates nothing unless something failed.
const PASSED: ChunkOutcome = { outcome: "kept", reason: "passed" };
const PRUNED: ChunkOutcome = { outcome: "pruned", reason: "chunk" };
/** Kept, no bloom tested, and why. */
const noBloom = (detail: NoBloomDetail | MissingReason): ChunkOutcome => ({
  outcome: "kept",
  reason: "no_bloom",
  detail,
});
const NO_NGRAMS = noBloom("no_ngrams");
const NO_GATEWAY = noBloom("no_gateway");
/** By the index's reason for a missing bloom. */
const MISSING = Object.fromEntries(
  (Object.keys(MISSING_REASONS) as MissingReason[]).map((reason) => [reason, noBloom(reason)]),
) as Record<MissingReason, ChunkOutcome>;

/**
 * Where the chunks `kept` were sent from, in the series' order and each series' chunks';
 * undefined when one was not sent or the groups were not made of whole series.
 */
function keptIn(
  kept: ReadonlySet<SegmentChunk>,
  sent: Sent,
): { series: number; chunk: number }[] | undefined {
  if (sent.series === undefined) return undefined;
  const where = locations(sent);
  const out = [];
  for (const c of kept) {
    const at = where.get(c);
    if (at === undefined) return undefined;
    out.push(at);
  }
  return out.sort((a, b) => a.series - b.series || a.chunk - b.chunk);
}

/** Kept or pruned, and why (explain's words), for chunk `c` of the series `fp`. */
function judge(c: IndexedChunk, fp: bigint, answer: BloomAnswer): ChunkOutcome {
  if (c.bloom.kind === "missing") return MISSING[c.bloom.reason];
  if (answer.unsent.has(c)) return NO_NGRAMS;
  if (answer.noGateway) return NO_GATEWAY;
  if (answer.failed !== undefined) {
    return { outcome: "kept", reason: "fail_open", detail: answer.failed };
  }
  // An id is built only when the answer came as copies, or with verdicts (explain).
  const id = answer.keptIds.size + answer.verdicts.size > 0 ? chunkId(fp, c.ref) : "";
  const v = answer.verdicts.get(id);
  if (v === undefined) {
    // Without a verdict, a pruned chunk's reason is unknown: the gateway was not asked to
    // explain (or predates explain).
    return answer.kept.has(c.listed) || answer.keptIds.has(id) ? PASSED : PRUNED;
  }
  if (v.outcome === "failed_open") {
    return {
      outcome: "kept",
      reason: "fail_open",
      ...(v.reason !== undefined && { detail: v.reason }),
    };
  }
  return { outcome: "pruned", reason: v.outcome, ...(v.test !== undefined && { test: v.test }) };
}

/** The chunks of one series sent to the gateway with one bloom location. */
type Group = FilterSeries & { chunks: SegmentChunk[] };

/** A series' groups searched one by one; past this many, by bloom in a map. */
const SCANNED_GROUPS = 8;

/**
 * The groups of a series' chunks, a group per bloom location (chunks of one listing share
 * its object); with `unsent`, only the chunks whose bloom has line n-grams, the others
 * added to it (a test with nothing but line leaves).
 */
function groupsOf(series: IndexedSeries, unsent: Set<IndexedChunk> | undefined): Group[] {
  const groups: Group[] = [];
  // Its chunks are in time order, as the flushes that made its blooms are: a chunk's group
  // is nearly always the last one. A map is made only for a long run of flushes.
  let byBloom: Map<Group["bloom"], Group> | undefined;
  for (const c of series.chunks) {
    if (unsent !== undefined && !lined(c)) {
      unsent.add(c);
      continue;
    }
    const last = groups.at(-1);
    let g = last?.bloom === c.bloom ? last : byBloom?.get(c.bloom);
    for (let k = groups.length - 2; g === undefined && byBloom === undefined && k >= 0; k--) {
      if (groups[k]!.bloom === c.bloom) g = groups[k];
    }
    if (g !== undefined) {
      g.chunks.push(c.listed);
      continue;
    }
    // Made holding its first chunk: most groups hold one, and an empty array's first push
    // makes room for 17 (a needle over 2,000 groups allocated 300 KB of such room).
    g = {
      fingerprint: series.fingerprint,
      labels: series.labels,
      bloom: c.bloom,
      chunks: [c.listed],
    };
    groups.push(g);
    if (byBloom !== undefined) byBloom.set(c.bloom, g);
    else if (groups.length > SCANNED_GROUPS) byBloom = new Map(groups.map((x) => [x.bloom, x]));
  }
  return groups;
}

/**
 * Each series' groups ({@link groupsOf}) while the series lives: an index view hands every
 * query over a selection's whole span the same series objects (index-read.ts), and a wide
 * needle made its 2,000 groups anew each time. The gateway only reads them.
 */
const seriesGroups = new WeakMap<IndexedSeries, readonly Group[]>();

/** `series`' groups when every chunk is sent (a test with a metadata part): made once. */
function ownGroups(series: IndexedSeries): readonly Group[] {
  let own = seriesGroups.get(series);
  if (own === undefined) seriesGroups.set(series, (own = groupsOf(series, undefined)));
  return own;
}

/** The groups of a request to the gateway, and the chunks they hold. */
interface Sent {
  readonly groups: readonly Group[];
  readonly chunks: number;
  /** The series the groups were made of, all their chunks sent ({@link allGroups}). */
  readonly series: readonly IndexedSeries[] | undefined;
  /**
   * Each chunk's record sent → its series' index in {@link series} and its own there,
   * made on first use (every Sent is made with the slot: one object shape for the planner).
   */
  where: Map<SegmentChunk, { readonly series: number; readonly chunk: number }> | undefined;
}

/** `sent.where`, made on first use. */
function locations(sent: Sent): NonNullable<Sent["where"]> {
  if (sent.where !== undefined) return sent.where;
  const where = new Map<SegmentChunk, { series: number; chunk: number }>();
  sent.series?.forEach((s, i) => {
    s.chunks.forEach((c, k) => where.set(c.listed, { series: i, chunk: k }));
  });
  return (sent.where = where);
}

/**
 * The groups of every chunk of `series`, in one array kept while `series` lives when it is
 * a selection's own (index-read.ts hands every query over its whole span the same array):
 * a gateway in this thread keeps what it works out for a request by the array it is sent.
 */
const selectionGroups = new WeakMap<readonly IndexedSeries[], Sent>();

function allGroups(series: readonly IndexedSeries[], keep: boolean): Sent {
  const kept = selectionGroups.get(series);
  if (kept !== undefined) return kept;
  const groups: Group[] = [];
  let chunks = 0;
  for (const s of series) {
    for (const g of ownGroups(s)) {
      groups.push(g);
      chunks += g.chunks.length;
    }
  }
  const made: Sent = { groups, chunks, series, where: undefined };
  if (keep) selectionGroups.set(series, made);
  return made;
}

/**
 * Index → series matching any of `selectors` → chunks in [from, through] → pruned by the
 * gateway when the query has a bloom test. Refuses more chunks than `maxChunksPerQuery`.
 * Each chunk's outcome goes to the query's explain, when it asks for one; the chunks a bloom
 * test kept that lie wholly in [from, through] are marked for the false-positive audit.
 */
export async function plan(
  parts: QuerierParts,
  tenant: string,
  selectors: readonly (readonly Matcher[])[],
  from: bigint,
  through: bigint,
  queryTest: BloomTest,
  ctx: QueryContext,
): Promise<PlannedChunk[]> {
  const all = await readSeries(parts, tenant, from, through, ctx, selectors);
  const matched: {
    series: IndexedSeries;
    labels: Readonly<Record<string, string>>;
    cutoff: bigint | undefined;
  }[] = [];
  let inRange = 0;
  const retention = parts.retention.of(tenant);
  const nowMs = Date.now();
  for (const s of all) {
    const labels = parts.labels.tryOf(s.labels, "store");
    if (labels === undefined) continue;
    // Retention: readSeries left out the chunks wholly past it; a chunk the cutoff cuts
    // through is read from the cutoff on (PlannedChunk.notBefore).
    const cutoff = retention.expires ? retention.cutoffNs(labels, nowMs) : undefined;
    matched.push({ series: s, labels, cutoff });
    inRange += s.chunks.length;
  }
  /** The planned chunk, with the cutoff its reader must apply when it cuts through it. */
  const planned = (
    chunk: IndexedChunk,
    labels: Readonly<Record<string, string>>,
    cutoff: bigint | undefined,
    audit?: BloomTest,
  ): PlannedChunk => ({
    chunk,
    labels,
    ...(audit !== undefined && { audit }),
    ...(cutoff !== undefined && chunk.ref.from < cutoff && { notBefore: cutoff }),
  });
  const stats = ctx.stats;
  stats.seriesMatched = matched.length;
  stats.chunksInRange = inRange;
  parts.metrics?.chunksInRange.inc(inRange);
  const max = ctx.limits.maxChunksPerQuery;
  if (max > 0 && inRange > max) throw maxChunks(max, inRange);
  // On the main thread, a query over more chunks goes to a worker before its bloom stage.
  ctx.afford(inRange);
  // Line leaves test the n-grams a bloom holds: over series none of whose blooms have them
  // (the index says which), only the metadata part can prune, and a chunk whose bloom has
  // none is not sent when the metadata part is nothing (a plain `|= "x"`).
  const metadataOnly = withoutLineTests(queryTest);
  const test =
    metadataOnly !== queryTest && matched.some(({ series }) => series.chunks.some(lined))
      ? queryTest
      : metadataOnly;
  const { explain } = ctx;
  if (test.kind === "all" || inRange === 0) {
    const untested = noBloom(queryTest.kind === "all" ? "no_test" : "no_ngrams");
    return matched.flatMap(({ series, labels, cutoff }) =>
      series.chunks.map((chunk) => {
        const missing = chunk.bloom.kind === "missing";
        explain?.add(series.labels, chunk, missing ? MISSING[chunk.bloom.reason] : untested);
        return planned(chunk, labels, cutoff);
      }),
    );
  }
  stats.bloomsUsed = true;
  // A group per series and bloom location (chunks of one listing share its object); with a
  // test of line leaves alone, only the chunks whose blooms have n-grams.
  const unsent = new Set<IndexedChunk>();
  let sending: Sent;
  if (metadataOnly.kind === "all") {
    const withNgrams = matched.flatMap(({ series }) => groupsOf(series, unsent));
    sending = {
      groups: withNgrams,
      chunks: inRange - unsent.size,
      series: undefined,
      where: undefined,
    };
  } else {
    const whole = matched.length === all.length;
    sending = allGroups(whole ? all : matched.map(({ series }) => series), whole);
  }
  const { groups, chunks: sent } = sending;
  // A gateway in this thread answers with the records it was sent; others with copies.
  const own = parts.chunkFilter.answersWithSentRecords === true;
  let failed: string | undefined;
  const kept = new Set<SegmentChunk>();
  const keptIds = new Set<string>();
  const verdicts = new Map<string, ChunkVerdict>();
  try {
    const response: FilterResponse = await stats.time("blooms", () =>
      ctx.race(
        parts.chunkFilter.filterChunkRefs({
          tenant,
          from,
          through,
          test,
          series: groups,
          ...(explain !== undefined && { explain: true }),
        }),
      ),
    );
    stats.bloom = response.stats;
    for (const [reason, chunks] of Object.entries(response.stats.failedOpen)) {
      parts.labels.report.failedOpen(reason, chunks, tenant);
    }
    for (const s of response.series) {
      for (const c of s.chunks) {
        if (own) kept.add(c);
        else keptIds.add(chunkId(s.fingerprint, c));
      }
    }
    for (const v of response.verdicts ?? []) verdicts.set(chunkId(v.fingerprint, v), v);
  } catch (error) {
    // The query's own deadline, or its budget on the main thread.
    if (error instanceof QueryError || error instanceof OverBudget) throw error;
    // Invariant 1: a gateway that fails means "may match", never "no match".
    failed = failOpenReason(error);
    stats.bloom = {
      series: groups.length,
      seriesSkipped: 0,
      chunks: sent,
      chunksPruned: 0,
      chunksPrunedByLine: 0,
      blocksRead: 0,
      cacheHits: 0,
      failedOpen: reportFailOpen(parts.labels.report, tenant, sent, failed, error),
    };
  }
  const answer: BloomAnswer = {
    unsent,
    noGateway: parts.chunkFilter === KEEP_ALL_FILTER,
    failed,
    kept,
    keptIds,
    verdicts,
  };
  // The audit's test per n-gram settings of the chunks' blooms ("" for none).
  const audits = new Map<string, BloomTest>();
  const auditOf = (c: IndexedChunk): BloomTest | undefined => {
    if (c.ref.from < from || c.ref.through > through || c.bloom.kind !== "block") return undefined;
    const { ngrams, metadataTokens } = c.bloom;
    const flags =
      metadataTokens === undefined
        ? ""
        : `${metadataTokens.keys ? "k" : ""}${metadataTokens.values ? "v" : ""}`;
    const key = `${ngrams === undefined ? "" : `${ngrams.length}/${ngrams.skip}`}:${flags}`;
    let t = audits.get(key);
    if (t === undefined) audits.set(key, (t = testedPart(test, ngrams, metadataTokens)));
    return t.kind === "all" ? undefined : t;
  };
  // Without explain, failure or chunks left unsent, the planned chunks are those the gateway
  // kept, found where they were sent: a wide needle judged each of its 500 chunks to find
  // the five it kept.
  const answeredAll = own && failed === undefined && !answer.noGateway && unsent.size === 0;
  const found = answeredAll && explain === undefined ? keptIn(kept, sending) : undefined;
  const out: PlannedChunk[] = [];
  for (const { series: i, chunk: k } of found ?? []) {
    const { series, labels, cutoff } = matched[i]!;
    const chunk = series.chunks[k]!;
    out.push(planned(chunk, labels, cutoff, auditOf(chunk)));
  }
  for (const { series, labels, cutoff } of found === undefined ? matched : []) {
    for (const chunk of series.chunks) {
      const judged = judge(chunk, series.fingerprint, answer);
      explain?.add(series.labels, chunk, judged);
      if (judged.outcome === "pruned") continue;
      const audit = judged.reason === "passed" ? auditOf(chunk) : undefined;
      out.push(planned(chunk, labels, cutoff, audit));
    }
  }
  const pruned = inRange - out.length;
  stats.chunksPrunedByBlooms = pruned;
  parts.metrics?.chunksPruned.inc(pruned);
  parts.metrics?.bloomPrunedChunks.inc({ tenant }, pruned);
  return out;
}
