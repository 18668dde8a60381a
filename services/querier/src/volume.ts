/**
 * `index/volume` and `index/volume_range` (Loki 3's `VolumeHandler`, its volume middleware
 * `pkg/querier/queryrange/volume.go` and `seriesvolume`): the bytes of a tenant's series
 * over a range, per series or per label, from the index (flushed chunks, as their line
 * bytes) and the ingesters (unflushed heads and chunks), in Prometheus' shapes.
 *
 * Parameters as Loki's `ParseVolumeInstantQuery` / `ParseVolumeRangeQuery`, in Loki's order
 * and words. The accumulation (names, target labels, buckets, a chunk's bytes shared by
 * time) is `@sieve/index`'s `VolumeAccumulator`, which the ingesters run too, so the two
 * sides add up. The answer is a vector when every series has one sample (always for
 * `volume`), a matrix otherwise; series sorted by their first sample, largest first.
 */
import {
  DEFAULT_VOLUME_LIMIT,
  VolumeAccumulator,
  VolumeCellsError,
  VolumeLimitError,
  volumeMaxSeriesMessage,
  type VolumeAggregateBy,
} from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import type { Matcher } from "@sieve/logql";
import type { QuerierParts, QueryContext } from "./context.js";
import { QueryError, queryMemory } from "./errors.js";
import {
  ParamError,
  parseBounds,
  parseInstantQuery,
  parseRangeQuery,
  type Form,
} from "./params.js";
import { parseSelector } from "./parse.js";
import { readSeries } from "./index-read.js";
import type { QueryLimits } from "./config.js";
import type { Querier } from "./querier.js";
import type { QueryStats } from "./stats.js";

/** Loki's `seriesvolume.MatchAny`: the query that selects every series. */
const MATCH_ANY = "{}";

const ERR_END_BEFORE_START = "end timestamp must not be before or equal to start time";
/** What one (name, bucket) value of an accumulator holds, about: map entries and numbers. */
const CELL_BYTES = 64;

/** A parsed volume request; `step` 0 for `index/volume`. */
export interface VolumeQuery {
  readonly query: string;
  readonly start: bigint;
  readonly end: bigint;
  readonly step: bigint;
  readonly limit: number;
  readonly targetLabels: readonly string[];
  readonly aggregateBy: VolumeAggregateBy;
}

/**
 * Loki's `volumeLimit`: default 100, an integer (Go's `strconv.Atoi` words), 0 read as
 * 100, a negative one refused. Returns the form the rest is parsed from (0 replaced).
 */
function volumeLimit(form: Form): Form {
  const raw = form.get("limit") ?? "";
  if (raw === "") return form;
  if (!/^[+-]?\d+$/.test(raw)) {
    throw new ParamError(`strconv.Atoi: parsing ${JSON.stringify(raw)}: invalid syntax`);
  }
  const n = BigInt(raw);
  if (n === 0n) {
    const copy = new URLSearchParams(form);
    copy.set("limit", String(DEFAULT_VOLUME_LIMIT));
    return copy;
  }
  if (n < 0n) throw new ParamError("limit must be a positive value");
  return form;
}

/** Loki's `volumeAggregateBy`: `series` (default) or `labels`. */
function aggregateBy(form: Form): VolumeAggregateBy {
  const raw = form.get("aggregateBy") ?? "";
  if (raw === "") return "series";
  if (raw === "series" || raw === "labels") return raw;
  throw new ParamError("invalid aggregation option");
}

/** Loki's `targetLabels`: comma-separated; empty = none. */
function targetLabels(form: Form): string[] {
  const raw = form.get("targetLabels") ?? "";
  return raw === "" ? [] : raw.split(",");
}

/** Loki's `ParseVolumeInstantQuery`: `limit`, `time`, `direction`, then the range. */
export function parseVolumeInstantQuery(raw: Form, nowNs: bigint): VolumeQuery {
  const form = volumeLimit(raw);
  const instant = parseInstantQuery(form, nowNs);
  const by = aggregateBy(form);
  const targets = targetLabels(form);
  const { start, end } = parseBounds(form, nowNs);
  if (end < start) throw new ParamError(ERR_END_BEFORE_START);
  return {
    query: instant.query,
    start,
    end,
    step: 0n,
    limit: instant.limit,
    targetLabels: targets,
    aggregateBy: by,
  };
}

/** Loki's `ParseVolumeRangeQuery`: the range query's parameters and checks, then these. */
export function parseVolumeRangeQuery(raw: Form, nowNs: bigint): VolumeQuery {
  const form = volumeLimit(raw);
  const range = parseRangeQuery(form, nowNs);
  const by = aggregateBy(form);
  return {
    query: range.query,
    start: range.start,
    end: range.end,
    step: range.step,
    limit: range.limit,
    targetLabels: targetLabels(form),
    aggregateBy: by,
  };
}

/** The matchers of a volume query: Loki's `ParseMatchers(query, true)`, `{}` for every series. */
function volumeMatchers(query: string): Matcher[] {
  return query === MATCH_ANY ? [] : parseSelector(query);
}

/** One series of the answer, Prometheus' shape. */
type Sample = [number, string];
interface VolumeSeries {
  readonly metric: Readonly<Record<string, string>>;
  readonly samples: Sample[];
}

/** A volume answer's `data`, before its statistics. */
export interface VolumeData {
  readonly resultType: "vector" | "matrix";
  readonly result: (
    | { metric: Record<string, string>; value: Sample }
    | {
        metric: Record<string, string>;
        values: Sample[];
      }
  )[];
}

/** The metric of a name: the series' labels (`series`), or `{name: ""}` (`labels`). */
function metricOf(name: string, by: VolumeAggregateBy): Record<string, string> | undefined {
  if (by === "labels") return { [name]: "" };
  try {
    const out: Record<string, string> = {};
    for (const l of parseLabels(name)) out[l.name] = l.value;
    return out;
  } catch {
    return undefined; // as Loki, a name that does not parse is left out
  }
}

/**
 * Runs a volume query: the index's series and chunks over [start, end] and the ingesters'
 * volumes, accumulated alike, each bucket's `limit` largest names kept.
 */
export async function runVolume(
  parts: QuerierParts,
  tenant: string,
  q: VolumeQuery,
  limits: QueryLimits,
  ctx: QueryContext,
): Promise<VolumeData> {
  if (!limits.volumeEnabled) throw new QueryError("not_found", "not found");
  const matchers = volumeMatchers(q.query);
  const maxSeries = limits.volumeMaxSeries > 0 ? limits.volumeMaxSeries : Number.MAX_SAFE_INTEGER;
  const acc = new VolumeAccumulator({
    start: q.start,
    end: q.end,
    step: q.step,
    aggregateBy: q.aggregateBy,
    targetLabels: q.targetLabels,
    matcherNames: matchers.map((m) => m.name),
    maxSeries,
    // About 64 bytes a (name, bucket) value: the query's memory budget bounds them.
    ...(limits.maxQueryMemoryBytes > 0 && {
      maxCells: Math.max(1, Math.floor(limits.maxQueryMemoryBytes / CELL_BYTES)),
    }),
  });
  // A read across tenants (`a|b`) adds every tenant's series and heads into the one
  // accumulator, as Loki's multi-tenant querier merges their volumes.
  const tenants = tenant.split("|");
  const fromIngesters = Promise.all(
    tenants.map((t) =>
      ctx.race(
        parts.ingesters.volume(
          {
            tenant: t,
            ...(q.query !== MATCH_ANY && { selector: q.query }),
            start: q.start,
            end: q.end,
            step: q.step,
            targetLabels: q.targetLabels,
            aggregateBy: q.aggregateBy,
            maxSeries: Math.min(maxSeries, 2 ** 32 - 1),
          },
          ctx.callOptions(),
        ),
      ),
    ),
  );
  // Settled either way, so a failure of one side never leaves the other unobserved.
  fromIngesters.catch(() => undefined);
  try {
    for (const t of tenants) {
      for (const s of await readSeries(parts, t, q.start, q.end, ctx, [matchers])) {
        const labels = parts.labels.tryOf(s.labels, "store");
        if (labels === undefined) continue;
        const names = acc.namesOf(sortedPairs(labels));
        if (names === undefined) continue;
        for (const c of s.chunks)
          acc.addChunk(names, c.ref.from, c.ref.through, c.lineBytes ?? c.bytes);
      }
    }
    for (const v of (await fromIngesters).flat()) acc.add(v.name, v.bucket, v.bytes);
  } catch (error) {
    if (error instanceof VolumeLimitError) throw new QueryError("volume_max_series", error.message);
    if (error instanceof VolumeCellsError) throw queryMemory(limits.maxQueryMemoryBytes);
    // An ingester's refusal past the same limit, relayed as a 400 in its words.
    if (error instanceof QueryError && error.message.includes(volumeMaxSeriesMessage(maxSeries))) {
      throw new QueryError("volume_max_series", volumeMaxSeriesMessage(maxSeries));
    }
    throw error;
  }
  return shape(acc.top(q.limit), q.aggregateBy);
}

/** The label pairs of a parsed series, sorted by name (a canonical label set). */
function sortedPairs(labels: Readonly<Record<string, string>>): { name: string; value: string }[] {
  return Object.keys(labels)
    .sort()
    .map((name) => ({ name, value: labels[name]! }));
}

/** Loki's `toPrometheusData`: vector or matrix, series by first sample then name. */
function shape(
  top: { name: string; samples: { at: number; bytes: number }[] }[],
  by: VolumeAggregateBy,
): VolumeData {
  const series: (VolumeSeries & { name: string })[] = [];
  let matrix = false;
  for (const { name, samples } of top) {
    const metric = metricOf(name, by);
    if (metric === undefined) continue;
    if (samples.length > 1) matrix = true;
    series.push({ name, metric, samples: samples.map((s) => [s.at, String(s.bytes)]) });
  }
  const first = (s: VolumeSeries): number => Number(s.samples[0]![1]);
  series.sort((a, b) => first(b) - first(a) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return matrix
    ? {
        resultType: "matrix",
        result: series.map((s) => ({ metric: { ...s.metric }, values: s.samples })),
      }
    : {
        resultType: "vector",
        result: series.map((s) => ({ metric: { ...s.metric }, value: s.samples[0]! })),
      };
}

/**
 * The `index/volume` and `index/volume_range` routes (handler.ts, and multi-tenant.ts for
 * `a|b`): the form parsed as Loki's, the query run, the answer with its stats.
 */
export async function routeVolume(
  querier: Pick<Querier, "volume">,
  route: "index_volume" | "index_volume_range",
  tenant: string,
  form: Form,
  nowNs: bigint,
): Promise<{ body: unknown; stats: QueryStats }> {
  const q =
    route === "index_volume"
      ? parseVolumeInstantQuery(form, nowNs)
      : parseVolumeRangeQuery(form, nowNs);
  const t0 = performance.now();
  const { data, stats } = await querier.volume(tenant, q);
  const json = stats.toJSON((performance.now() - t0) / 1000);
  return { body: { status: "success", data: { ...data, stats: json } }, stats };
}
