/**
 * Reads across tenants, as Loki's querier serves them with `multi_tenant_queries_enabled`
 * (`pkg/querier/multi_tenant_querier.go`): `X-Scope-OrgID: a|b` reads tenants `a` and `b`,
 * each stream and series of the answer carries `__tenant_id__`, and a selector's matchers
 * on `__tenant_id__` choose the tenants read (they are taken out of the selector, since no
 * stored stream has that label). The HTTP layer lets such a tenant through only when the
 * querier's `multiTenantQueriesEnabled` is on; a task whose tenant holds `|` is routed here.
 *
 * Each tenant is read on its own, with its own limits, and the answers merged: log lines by
 * time in the query's direction (the `limit` best over all tenants), label names and values
 * as unions, series and index stats summed. A metric query collects every tenant's streams,
 * labelled with their tenant, and evaluates once (metrics-query.ts), under the smallest of
 * the tenants' limits (`Querier.limits`), so `sum by (__tenant_id__)` works as in Loki.
 */
import { printExpr, type LogExpr } from "@sieve/logql";
import {
  detectFieldValues,
  detectFields,
  detectLabels,
  detectedLabelsBody,
  detectedFieldsBody,
  detectedValuesBody,
  parseDetectedFieldsQuery,
} from "./detected.js";
import type { QueryTask } from "./handler.js";
import { applyInterval, queryResponse, toStreams } from "./marshal.js";
import {
  DEFAULT_SINCE_NS,
  ParamError,
  parseBounds,
  parseExplain,
  parseInstantQuery,
  parseRangeQuery,
  seriesMatchers,
  type Direction,
  type Form,
} from "./params.js";
import { Querier, TopEntries, parseSelector, type ResultEntry } from "./querier.js";
import { formatQuery } from "./routes-detected.js";
import { QueryError } from "./errors.js";
import { QueryStats } from "./stats.js";
import { TENANT_LABEL, splitTenantMatchers, tenantsOf } from "./multi-tenant-metric.js";
import { routeVolume } from "./volume.js";

export {
  TENANT_LABEL,
  TENANT_SEPARATOR,
  splitTenantMatchers,
  tenantsOf,
} from "./multi-tenant-metric.js";

/** A log query's per-tenant reads: the tenants its selector admits, and the query each reads. */
function logPlan(expr: LogExpr, tenants: readonly string[]): { tenants: string[]; expr: LogExpr } {
  const { matchers, admits } = splitTenantMatchers(expr.matchers);
  if (matchers.length === 0) {
    throw new ParamError(
      "parse error : queries require at least one regexp or equality matcher that does not have an empty-compatible value besides __tenant_id__",
    );
  }
  return { tenants: tenants.filter(admits), expr: { ...expr, matchers } };
}

const withTenant = (e: ResultEntry, tenant: string): ResultEntry => ({
  timestamp: e.timestamp,
  line: e.line,
  labels: { ...e.labels, [TENANT_LABEL]: tenant },
  stream: { ...e.stream, [TENANT_LABEL]: tenant },
  metadata: e.metadata,
});

/** Adds `from`'s counters to `into` (the merged answer's statistics). */
function addStats(into: QueryStats, from: QueryStats): void {
  for (const [key, value] of Object.entries(from)) {
    if (typeof value === "number") (into as unknown as Record<string, number>)[key]! += value;
  }
  for (const stage of Object.keys(into.stages) as (keyof QueryStats["stages"])[]) {
    into.stages[stage] += from.stages[stage];
  }
  into.bloomsUsed ||= from.bloomsUsed;
}

/** The best `limit` lines of a log query over the admitted tenants, each labelled. */
async function selectLogsAcross(
  querier: Querier,
  tenants: readonly string[],
  expr: LogExpr,
  start: bigint,
  end: bigint,
  limit: number,
  direction: Direction,
): Promise<{ entries: ResultEntry[]; stats: QueryStats }> {
  const plan = logPlan(expr, tenants);
  const query = printExpr(plan.expr);
  const stats = new QueryStats();
  const top = new TopEntries(limit, direction === "backward");
  for (const tenant of plan.tenants) {
    const answer = await querier.selectLogs({
      tenant,
      query,
      expr: plan.expr,
      start,
      end,
      limit,
      direction,
    });
    addStats(stats, answer.stats);
    for (const e of answer.entries) top.add(withTenant(e, tenant));
  }
  const entries = top.result();
  stats.entriesReturned = entries.length;
  return { entries, stats };
}

/** Label sets of the series over every admitted tenant, each with its tenant. */
async function seriesAcross(
  querier: Querier,
  tenants: readonly string[],
  groups: readonly string[],
  start: bigint,
  end: bigint,
): Promise<Record<string, string>[]> {
  const out: Record<string, string>[] = [];
  const parsed = groups.map((g) => splitTenantMatchers(parseSelector(g)));
  for (const tenant of tenants) {
    let own: string[];
    if (parsed.length === 0) own = [];
    else {
      const admitted = parsed.filter((p) => p.admits(tenant));
      if (admitted.length === 0) continue;
      // A group of tenant matchers alone selects every series of the tenants it admits.
      own = admitted.some((p) => p.matchers.length === 0)
        ? []
        : admitted.map((p) => printExpr({ kind: "log", matchers: p.matchers, pipeline: [] }));
    }
    for (const labels of await querier.series(tenant, own, start, end)) {
      out.push({ ...labels, [TENANT_LABEL]: tenant });
    }
  }
  return out;
}

const sortedUnion = (lists: readonly string[][]): string[] => [...new Set(lists.flat())].sort();

/**
 * Runs a task whose tenant names several (`a|b`). Answers as the single-tenant routes do,
 * with `__tenant_id__` on every stream and series.
 */
export async function routeMultiTenant(
  querier: Querier,
  task: QueryTask,
  form: Form,
): Promise<{ body: unknown; stats?: QueryStats; status?: number }> {
  const tenants = tenantsOf(task.tenant);
  const { flags } = task;
  const now = task.nowNs;
  switch (task.route) {
    case "query_range":
    case "query": {
      const range = task.route === "query_range";
      const q = range ? parseRangeQuery(form, now) : parseInstantQuery(form, now);
      const explain = parseExplain(form);
      const t0 = performance.now();
      const expr = Querier.parse(q.query);
      if (expr.kind === "log") {
        const [start, end] =
          "start" in q ? [q.start, q.end] : [q.time - DEFAULT_SINCE_NS, q.time + 1n];
        const { entries, stats } = await selectLogsAcross(
          querier,
          tenants,
          expr,
          start,
          end,
          q.limit,
          q.direction,
        );
        const kept = "interval" in q ? applyInterval(entries, q.interval) : entries;
        const result = toStreams(kept, flags.length > 0);
        const json = stats.toJSON((performance.now() - t0) / 1000);
        return { body: queryResponse("streams", result, json, flags), stats };
      }
      // One evaluation over every tenant's streams (metrics-query.ts reads `a|b`).
      if ("start" in q) {
        const answer = await querier.selectMatrix({
          tenant: task.tenant,
          query: q.query,
          expr,
          start: q.start,
          end: q.end,
          step: q.step,
          explain,
        });
        const json = answer.stats.toJSON((performance.now() - t0) / 1000);
        const body = queryResponse("matrix", answer.result, json, flags, answer.explain);
        return { body, stats: answer.stats };
      }
      const answer = await querier.selectVector(task.tenant, expr, q.time, explain);
      const json = answer.stats.toJSON((performance.now() - t0) / 1000);
      const body = queryResponse("vector", answer.result, json, flags, answer.explain);
      return { body, stats: answer.stats };
    }
    case "labels": {
      const { start, end } = parseBounds(form, now);
      const query = form.get("query") ?? "";
      const names = (await seriesAcross(querier, tenants, query ? [query] : [], start, end)).map(
        (s) => Object.keys(s).filter((k) => k !== TENANT_LABEL),
      );
      return { body: { status: "success", data: sortedUnion(names) } };
    }
    case "label_values": {
      const { start, end } = parseBounds(form, now);
      const name = task.labelName ?? "";
      const query = form.get("query") ?? "";
      const series = await seriesAcross(querier, tenants, query ? [query] : [], start, end);
      const values = series.map((s) => (s[name] === undefined ? [] : [s[name]]));
      return { body: { status: "success", data: sortedUnion(values) } };
    }
    case "series": {
      const { start, end } = parseBounds(form, now);
      const series = await seriesAcross(querier, tenants, seriesMatchers(form), start, end);
      const key = (s: Record<string, string>) => JSON.stringify(Object.entries(s).sort());
      series.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      return { body: { status: "success", data: series } };
    }
    case "index_stats": {
      const { start, end } = parseBounds(form, now);
      if (end < start)
        throw new ParamError("end timestamp must not be before or equal to start time");
      const { matchers, admits } = splitTenantMatchers(parseSelector(form.get("query") ?? ""));
      const query = printExpr({ kind: "log", matchers, pipeline: [] });
      const sum = { streams: 0, chunks: 0, bytes: 0, entries: 0 };
      for (const tenant of tenants.filter(admits)) {
        const s = await querier.indexStats(tenant, query, start, end);
        sum.streams += s.streams;
        sum.chunks += s.chunks;
        sum.bytes += s.bytes;
        sum.entries += s.entries;
      }
      return { body: sum };
    }
    case "detected_labels": {
      const { start, end } = parseBounds(form, now);
      const query = form.get("query") ?? "";
      const series = await seriesAcross(querier, tenants, query ? [query] : [], start, end);
      return { body: detectedLabelsBody(detectLabels(series)) };
    }
    case "detected_fields":
    case "detected_field_values": {
      const q = parseDetectedFieldsQuery(form, now);
      const expr = Querier.parse(q.query);
      if (expr.kind !== "log") {
        throw new ParamError("a metric query has no log lines: use a log query");
      }
      const { entries } = await selectLogsAcross(
        querier,
        tenants,
        expr,
        q.start,
        q.end,
        q.lineLimit,
        "backward",
      );
      if (task.route === "detected_fields") {
        return { body: detectedFieldsBody(detectFields(entries, q.fieldLimit), q.fieldLimit) };
      }
      const values = detectFieldValues(entries, task.labelName ?? "", q.fieldLimit);
      return { body: detectedValuesBody(values, q.fieldLimit) };
    }
    case "format_query":
      return formatQuery(form.get("query") ?? "");
    case "index_volume":
    case "index_volume_range":
      // Every tenant's series and heads in one accumulator (volume.ts), as Loki merges them.
      return routeVolume(querier, task.route, task.tenant, form, now);
    case "patterns":
      // The ingesters' patterns are read one tenant at a time.
      throw new QueryError(
        "bad_request",
        `${task.route} does not read across tenants: name one tenant in X-Scope-OrgID`,
      );
  }
}
