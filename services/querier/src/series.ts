/**
 * The series, labels and index-stats endpoints: series from the index (no chunks read)
 * merged with the ingesters' recent series.
 */
import { matchesLabels, type Matcher } from "@sieve/logql";
import type { QuerierParts, QueryContext } from "./context.js";
import { readSeries } from "./index-read.js";

/** What `/index/stats` answers (Loki's shape). */
export interface IndexStats {
  streams: number;
  chunks: number;
  bytes: number;
  entries: number;
}

/**
 * Label sets of the tenant's series over [start, end] matching any group (all when none):
 * `groups` as the client wrote them, for the ingesters, and `selectors` parsed from them.
 */
export async function selectSeries(
  parts: QuerierParts,
  tenant: string,
  groups: readonly string[],
  selectors: readonly Matcher[][],
  start: bigint,
  end: bigint,
  ctx: QueryContext,
): Promise<Readonly<Record<string, string>>[]> {
  const fromStore = await readSeries(parts, tenant, start, end, ctx);
  const fromIngesters = await ctx.race(
    Promise.all(
      (groups.length === 0 ? [undefined] : groups).map((selector) =>
        parts.ingesters.series(
          {
            tenant,
            start,
            end,
            ...(selector !== undefined && { selector }),
          },
          ctx.callOptions(),
        ),
      ),
    ),
  );
  const out = new Map<string, Readonly<Record<string, string>>>();
  const consider = (canonical: string, where: string): void => {
    if (out.has(canonical)) return;
    // A series whose labels do not parse is left out (and reported), not a failed answer.
    const labels = parts.labels.tryOf(canonical, where);
    if (labels === undefined) return;
    if (selectors.length === 0 || selectors.some((m) => matchesLabels(m, labels)))
      out.set(canonical, labels);
  };
  for (const s of fromStore) consider(s.labels, "store");
  for (const answer of fromIngesters) for (const s of answer) consider(s.labels, "ingester");
  return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, l]) => l);
}

/**
 * Streams, chunks, bytes and entries the index holds for `query` (whose `matchers` these
 * are) over [start, end].
 */
export async function readIndexStats(
  parts: QuerierParts,
  tenant: string,
  query: string,
  matchers: readonly Matcher[],
  start: bigint,
  end: bigint,
  ctx: QueryContext,
): Promise<IndexStats> {
  const out: IndexStats = { streams: 0, chunks: 0, bytes: 0, entries: 0 };
  const streams = new Set<string>();
  // The ingesters' unflushed chunks count too, as Loki's ingesters' GetStats: asked while
  // the index is read.
  const unflushed = ctx.race(
    parts.ingesters.stats({ tenant, selector: query, start, end }, ctx.callOptions()),
  );
  unflushed.catch(() => undefined);
  for (const s of await readSeries(parts, tenant, start, end, ctx)) {
    const labels = parts.labels.tryOf(s.labels, "store");
    if (labels === undefined || !matchesLabels(matchers, labels)) continue;
    streams.add(s.labels);
    for (const c of s.chunks) {
      out.chunks++;
      // The lines' bytes (Loki's unit), or the object's size for a chunk indexed before
      // segments recorded them (version 3).
      out.bytes += c.lineBytes ?? c.bytes;
      out.entries += c.entries;
    }
  }
  const fromIngesters = await unflushed;
  out.chunks += fromIngesters.chunks;
  out.bytes += fromIngesters.bytes;
  out.entries += fromIngesters.entries;
  // A stream in both the index and an ingester counts once: the ingesters' series say which.
  const recent = await ctx.race(
    parts.ingesters.series({ tenant, selector: query, start, end }, ctx.callOptions()),
  );
  for (const s of recent)
    if (parts.labels.tryOf(s.labels, "ingester") !== undefined) streams.add(s.labels);
  out.streams = streams.size;
  return out;
}
