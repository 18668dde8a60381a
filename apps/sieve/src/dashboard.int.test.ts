/**
 * Every metric the "Sieve" Grafana dashboard (deploy/grafana/dashboards/sieve.json) queries
 * is one Sieve exports, with the labels the dashboard groups it by: a `sieve all` process
 * (every role's metrics in one registry: distributor, ingester, querier, bloom gateway) is
 * given a push, a refused push, a query, a flush and a compactor run, so the labelled
 * counters have samples, then its /metrics is scraped. The dashboard's expressions are
 * parsed with Prometheus's grammar (deploy.test-helper.ts): a histogram's `_bucket`, `_sum`
 * and `_count` series belong to the family exported under the name without the suffix.
 * `instance` and `job` are Prometheus's target labels, added at scrape time; `le` is the
 * buckets'.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster, scrape, type SieveChild } from "./cluster.test-helper.js";
import {
  analysePromql,
  dashboardQueries,
  familyOf,
  metricTypes,
  repoText,
  sampleLabels,
} from "./deploy.test-helper.js";

/** Labels Prometheus adds to every scraped series (scrape_configs' job, the target). */
const TARGET_LABELS = new Set(["instance", "job"]);
const MAX_LINE_BYTES = 200;

const queries = dashboardQueries(
  JSON.parse(repoText("deploy/grafana/dashboards/sieve.json")) as never,
);
const cluster = new Cluster();
let dir: string;
let sieve: SieveChild;
let exposition = "";

async function push(body: unknown): Promise<Response> {
  return fetch(`${sieve.url}/loki/api/v1/push`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sieve-dashboard-"));
  sieve = await cluster.start({
    target: "all",
    args: ["--data-dir", dir],
    env: {
      SIEVE_DISTRIBUTOR_LIMITS_MAX_LINE_BYTES: String(MAX_LINE_BYTES),
      // A run at the start and every 300 ms: the scrape below waits for one to have ended.
      SIEVE_COMPACTOR_COMPACTION_INTERVAL_MS: "300",
    },
  });
  const now = BigInt(Date.now()) * 1_000_000n;
  const stream = { app: "dashboard", env: "test" };
  const accepted = await push({
    streams: [{ stream, values: [[String(now), "GET /orders status=200 trace_id=abc"]] }],
  });
  expect(accepted.status).toBe(204);
  // Refused for its length (400, Loki's line_too_long): a sample of the refusals by reason.
  const refused = await push({
    streams: [{ stream, values: [[String(now + 1n), "x".repeat(MAX_LINE_BYTES + 1)]] }],
  });
  expect(refused.status).toBe(400);
  const params = new URLSearchParams({
    query: '{app="dashboard"} |= "trace_id=abc"',
    start: String(now - 60_000_000_000n),
    end: String(now + 60_000_000_000n),
  });
  const query = await fetch(`${sieve.url}/loki/api/v1/query_range?${params.toString()}`);
  expect(query.status).toBe(200);
  // Cuts and stores the head: a sample of the flushes by reason.
  expect((await fetch(`${sieve.url}/flush`, { method: "POST" })).status).toBe(204);
  // A compactor run: a sample of the runs by outcome.
  for (;;) {
    exposition = await scrape(sieve.url);
    if (/^sieve_compactor_runs_total\{/m.test(exposition)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, 120_000);

afterAll(async () => {
  await cluster.stopAll();
  await rm(dir, { recursive: true, force: true });
});

describe("the Sieve dashboard's metrics", () => {
  test("the dashboard queries metrics, and `sieve all` exports Sieve's", () => {
    expect(queries.length).toBeGreaterThanOrEqual(7);
    expect(
      [...metricTypes(exposition).keys()].filter((n) => n.startsWith("sieve_")).length,
    ).toBeGreaterThan(20);
  });

  test.each(queries.map((q) => [q.panel, q.expr] as const))(
    "%s: every metric of %s is exported, with the labels it is grouped by",
    (_panel, expr) => {
      const types = metricTypes(exposition);
      const { errors, metrics } = analysePromql(expr);
      expect(errors).toEqual([]);
      expect(metrics.length).toBeGreaterThan(0);
      for (const metric of metrics) {
        const family = familyOf(types, metric.name);
        expect(family, `${metric.name} is not in /metrics`).toBeDefined();
        const wanted = [...metric.groupedBy, ...metric.matched].filter(
          (label) => !TARGET_LABELS.has(label),
        );
        if (wanted.length === 0) continue;
        const labels = sampleLabels(exposition, metric.name);
        for (const label of wanted) {
          expect(labels.has(label), `${metric.name} has no sample labelled ${label}`).toBe(true);
        }
      }
    },
  );

  test("a metric Sieve does not export, or a label it does not carry, is caught", () => {
    const types = metricTypes(exposition);
    expect(familyOf(types, "sieve_querier_chunks_pruned")).toBeUndefined();
    expect(familyOf(types, "sieve_ingester_chunks_flushed_total_bucket")).toBeUndefined();
    expect(familyOf(types, "sieve_querier_request_duration_seconds_bucket")).toBe(
      "sieve_querier_request_duration_seconds",
    );
    expect(sampleLabels(exposition, "sieve_ingester_chunks_flushed_total").has("reason")).toBe(
      true,
    );
    expect(sampleLabels(exposition, "sieve_ingester_chunks_flushed_total").has("tenant")).toBe(
      false,
    );
  });
});
