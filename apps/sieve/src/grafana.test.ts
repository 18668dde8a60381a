/**
 * Grafana's provisioning (deploy/grafana) as Grafana reads it: the data sources file
 * (`apiVersion: 1`, each source with a name, a type Grafana knows, proxy access and a URL
 * naming a compose service on its port), the dashboard provider (a `file` provider whose
 * path is where compose mounts the dashboards), and the "Sieve" dashboard's JSON model
 * (every query on a provisioned data source, every PromQL expression valid by Prometheus's
 * grammar, the panels the issue asks for). That each metric it uses is exported is
 * dashboard.int.test.ts's, against a running Sieve.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import {
  REPO,
  analysePromql,
  dashboardQueries,
  nginxListenPorts,
  readCompose,
  repoText,
  repoYaml,
} from "./deploy.test-helper.js";

interface Datasource {
  name: string;
  uid: string;
  type: string;
  access: string;
  url: string;
  isDefault?: boolean;
}

const compose = readCompose();
const grafana = compose.services.grafana!;
const datasources = repoYaml("deploy/grafana/provisioning/datasources/datasources.yaml") as {
  apiVersion: number;
  datasources: Datasource[];
};
const providers = repoYaml("deploy/grafana/provisioning/dashboards/dashboards.yaml") as {
  apiVersion: number;
  providers: {
    name: string;
    type: string;
    folder?: string;
    options: { path: string };
  }[];
};
const DASHBOARD = "deploy/grafana/dashboards/sieve.json";
const dashboard = JSON.parse(repoText(DASHBOARD)) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: { id: number; title: string; type: string; gridPos: unknown }[];
};

/** Where compose mounts a folder of the repository in the grafana container. */
function mountOf(source: string): string | undefined {
  const volume = grafana.volumes?.find((v) => v.startsWith(`${source}:`));
  return volume?.split(":")[1];
}

describe("Grafana's data sources", () => {
  test("are provisioned from the folder Grafana reads, in its version 1 format", () => {
    expect(mountOf("./deploy/grafana/provisioning")).toBe("/etc/grafana/provisioning");
    expect(datasources.apiVersion).toBe(1);
    const uids = datasources.datasources.map((d) => d.uid);
    expect(new Set(uids).size).toBe(uids.length);
    expect(datasources.datasources.filter((d) => d.isDefault === true)).toHaveLength(1);
    for (const source of datasources.datasources) {
      expect(source.name, JSON.stringify(source)).toMatch(/\S/);
      expect(["loki", "prometheus"]).toContain(source.type);
      expect(source.access).toBe("proxy");
    }
  });

  test("Sieve is a Loki data source through the gateway, the cluster's entry point", () => {
    const loki = datasources.datasources.filter((d) => d.type === "loki");
    expect(loki).toHaveLength(1);
    const url = new URL(loki[0]!.url);
    expect(url.hostname).toBe("gateway");
    expect(Number(url.port)).toBe(nginxListenPorts(repoText("deploy/nginx/nginx.conf"))[0]);
    expect(loki[0]!.isDefault).toBe(true);
  });

  test("Prometheus is compose's prometheus on its port", () => {
    const prometheus = datasources.datasources.filter((d) => d.type === "prometheus");
    expect(prometheus).toHaveLength(1);
    expect(prometheus[0]!.url).toBe("http://prometheus:9090");
    expect(compose.services.prometheus!.ports).toEqual(["127.0.0.1:9090:9090"]);
  });
});

describe("Grafana's dashboard provider", () => {
  test("is a file provider reading the folder compose mounts the dashboards at", () => {
    expect(providers.apiVersion).toBe(1);
    expect(providers.providers).toHaveLength(1);
    const provider = providers.providers[0]!;
    expect(provider.type).toBe("file");
    expect(provider.name).toMatch(/\S/);
    expect(provider.options.path).toBe(mountOf("./deploy/grafana/dashboards"));
    // Every file there is a dashboard that parses.
    const files = readdirSync(join(REPO, "deploy/grafana/dashboards"));
    expect(files).toEqual(["sieve.json"]);
  });
});

describe("the Sieve dashboard", () => {
  const queries = dashboardQueries(dashboard);
  const uids = new Set(datasources.datasources.map((d) => d.uid));

  test("is a Grafana dashboard model: uid, title, schema version, panels with unique ids and positions", () => {
    expect(dashboard.uid).toBe("sieve");
    expect(dashboard.title).toBe("Sieve");
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      expect(panel.gridPos, panel.title).toEqual({
        x: expect.any(Number) as number,
        y: expect.any(Number) as number,
        w: expect.any(Number) as number,
        h: expect.any(Number) as number,
      });
    }
  });

  test("has the panels the cluster is watched by", () => {
    const titles = dashboard.panels.map((p) => p.title);
    for (const title of [
      "Push rate",
      "Refusals by reason",
      "Queue lag",
      "Flushes by reason",
      "Chunks pruned share",
      "Observed false-positive rate",
      "Query latency",
    ]) {
      expect(titles).toContain(title);
    }
  });

  test("queries only provisioned data sources, by uid", () => {
    expect(queries.length).toBeGreaterThanOrEqual(7);
    for (const query of queries) {
      expect(uids.has(query.datasourceUid ?? ""), `${query.panel}: ${query.expr}`).toBe(true);
    }
  });

  test.each(queries.map((q) => [q.panel, q.expr] as const))(
    "%s: %s is valid PromQL naming Sieve's metrics",
    (_panel, expr) => {
      const { errors, metrics } = analysePromql(expr);
      expect(errors).toEqual([]);
      expect(metrics.length).toBeGreaterThan(0);
      for (const metric of metrics) expect(metric.name).toMatch(/^sieve_[a-z0-9_]+$/);
    },
  );

  test("the PromQL check finds errors and metric names, not functions or labels", () => {
    expect(analysePromql("sum by (reason) (rate(x_total[5m])").errors).not.toEqual([]);
    expect(analysePromql("rate(x_total[5m]) +").errors).not.toEqual([]);
    const { errors, metrics } = analysePromql(
      'histogram_quantile(0.99, sum by (le, route) (rate(a_seconds_bucket{route=~"q.*"}[$__rate_interval]))) / on() group_left sum(b_total) + {__name__="c"}',
    );
    expect(errors).toEqual([]);
    expect(metrics).toEqual([
      { name: "a_seconds_bucket", groupedBy: ["le", "route"], matched: ["route"] },
      { name: "b_total", groupedBy: [], matched: [] },
      { name: "c", groupedBy: [], matched: [] },
    ]);
  });
});
