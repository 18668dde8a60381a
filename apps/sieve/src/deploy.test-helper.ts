/**
 * Readers of the deployment files for the tests that check them against each other and
 * against Sieve: docker-compose.yml, the Dockerfile, deploy/nginx, deploy/prometheus,
 * deploy/grafana (its dashboard's PromQL parsed by Prometheus's own grammar,
 * `@prometheus-io/lezer-promql`, the version of the Prometheus image compose runs).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parser as promqlParser } from "@prometheus-io/lezer-promql";
import { parse as parseYaml } from "yaml";

/** A node of a parsed PromQL tree (`@lezer/common`'s, reached through the parser's type). */
type SyntaxNode = ReturnType<typeof promqlParser.parse>["topNode"];

/** The repository's root. */
export const REPO = resolve(import.meta.dirname, "../../..");

/** A file of the repository as text. */
export function repoText(path: string): string {
  return readFileSync(join(REPO, path), "utf8");
}

/** A YAML file of the repository, anchors and merge keys (`<<: *x`) resolved as Compose does. */
export function repoYaml(path: string): unknown {
  return parseYaml(repoText(path), { merge: true });
}

// ---- docker-compose.yml ----------------------------------------------------------------

/** One service of docker-compose.yml, the keys the tests read. */
export interface ComposeService {
  readonly image?: string;
  readonly build?: unknown;
  readonly command?: string[] | string;
  readonly entrypoint?: string[] | string;
  readonly environment?: Record<string, string | number | boolean | null>;
  readonly volumes?: string[];
  readonly ports?: string[];
  readonly depends_on?: Record<string, { condition: string }> | string[];
  readonly healthcheck?: { test: string[] | string };
}

/** docker-compose.yml as parsed. */
export interface ComposeFile {
  readonly services: Record<string, ComposeService>;
  readonly volumes?: Record<string, unknown>;
}

export function readCompose(): ComposeFile {
  return repoYaml("docker-compose.yml") as ComposeFile;
}

/** The services a service waits for, by name. */
export function dependencies(service: ComposeService): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((d) => [d, "service_started"]));
  return Object.fromEntries(Object.entries(deps).map(([name, d]) => [name, d.condition]));
}

// ---- nginx -----------------------------------------------------------------------------

/** Text without `#` comments (nginx's and the shell's). */
function stripComments(text: string): string {
  return text.replace(/#[^\n]*/g, "");
}

/** Each `upstream NAME { server HOST:PORT; ... }` of an nginx configuration, as `HOST:PORT`s. */
export function nginxUpstreams(conf: string): Map<string, string[]> {
  const upstreams = new Map<string, string[]>();
  for (const m of stripComments(conf).matchAll(/upstream\s+([\w-]+)\s*\{([^}]*)\}/g)) {
    const servers = [...m[2]!.matchAll(/server\s+([^\s;]+)[^;]*;/g)].map((s) => s[1]!);
    upstreams.set(m[1]!, servers);
  }
  return upstreams;
}

/** The ports of the `listen` directives. */
export function nginxListenPorts(conf: string): number[] {
  return [...stripComments(conf).matchAll(/listen\s+(?:[\w.:[\]]+:)?(\d+)[^;]*;/g)].map((m) =>
    Number(m[1]),
  );
}

/** The upstream names of every `proxy_pass http://NAME...`. */
export function nginxProxyPasses(conf: string): string[] {
  return [...stripComments(conf).matchAll(/proxy_pass\s+http:\/\/([\w-]+)/g)].map((m) => m[1]!);
}

/** The files of the `include` directives. */
export function nginxIncludes(conf: string): string[] {
  return [...stripComments(conf).matchAll(/include\s+([^\s;]+)\s*;/g)].map((m) => m[1]!);
}

// ---- Grafana's dashboard ---------------------------------------------------------------

/** One query of a dashboard panel. */
export interface PanelQuery {
  readonly panel: string;
  readonly expr: string;
  readonly datasourceUid: string | undefined;
}

interface DashboardPanel {
  readonly title?: string;
  readonly type?: string;
  readonly datasource?: { uid?: string };
  readonly targets?: { expr?: string; datasource?: { uid?: string } }[];
  readonly panels?: DashboardPanel[];
}

/** Every query of every panel (rows' nested panels too) of a dashboard's JSON model. */
export function dashboardQueries(dashboard: { panels?: DashboardPanel[] }): PanelQuery[] {
  const out: PanelQuery[] = [];
  const visit = (panels: readonly DashboardPanel[]): void => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        if (target.expr === undefined) continue;
        out.push({
          panel: panel.title ?? "(untitled)",
          expr: target.expr,
          datasourceUid: target.datasource?.uid ?? panel.datasource?.uid,
        });
      }
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels ?? []);
  return out;
}

/**
 * Grafana's interval variables replaced by a duration, so the expression is plain PromQL
 * (what Grafana sends Prometheus once it has substituted them).
 */
export function withoutGrafanaVariables(expr: string): string {
  return expr.replace(
    /\$__(?:rate_interval|interval|range)\b|\$\{__(?:rate_interval|interval|range)\}/g,
    "1m",
  );
}

/** A metric an expression selects, with the labels its enclosing aggregations group by. */
export interface SelectedMetric {
  /** The name as written in the selector (a histogram's `_bucket` included). */
  readonly name: string;
  /** Labels of every `by (...)` around the selector. */
  readonly groupedBy: readonly string[];
  /** Labels its own matchers name (`{route="..."}`). */
  readonly matched: readonly string[];
}

/** What {@link analysePromql} finds: the syntax errors, empty when the expression is valid. */
export interface PromqlAnalysis {
  readonly errors: readonly string[];
  readonly metrics: readonly SelectedMetric[];
}

/**
 * Parses one PromQL expression with Prometheus's grammar: where it does not parse (the
 * grammar's error nodes), and each vector selector's metric name (a bare name or
 * `{__name__="..."}`), with the labels the aggregations around it group by. Function
 * names, aggregation operators, label names and keywords are syntax nodes of their own
 * kinds, so none is taken for a metric.
 */
export function analysePromql(expr: string): PromqlAnalysis {
  const text = withoutGrafanaVariables(expr);
  const tree = promqlParser.parse(text);
  const errors: string[] = [];
  const metrics: SelectedMetric[] = [];
  const slice = (node: SyntaxNode): string => text.slice(node.from, node.to);
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError)
        errors.push(`at ${ref.from}: ${JSON.stringify(text.slice(ref.from, ref.from + 20))}`);
      if (ref.name !== "VectorSelector") return;
      const node = ref.node;
      const matched: string[] = [];
      let name =
        node.getChild("Identifier") === null ? undefined : slice(node.getChild("Identifier")!);
      for (const matcher of node.getChild("LabelMatchers")?.getChildren("UnquotedLabelMatcher") ??
        []) {
        const label = slice(matcher.getChild("LabelName")!);
        const value = matcher.getChild("StringLiteral");
        if (label === "__name__" && value !== null) name = JSON.parse(slice(value)) as string;
        else matched.push(label);
      }
      const groupedBy: string[] = [];
      for (let up = node.parent; up !== null; up = up.parent) {
        if (up.name !== "AggregateExpr") continue;
        const modifier = up.getChild("AggregateModifier");
        if (modifier?.getChild("By") === null || modifier === null) continue;
        for (const label of modifier.getChild("GroupingLabels")?.getChildren("LabelName") ?? []) {
          groupedBy.push(slice(label));
        }
      }
      if (name !== undefined) metrics.push({ name, groupedBy, matched });
    },
  });
  return { errors, metrics };
}

// ---- Prometheus's text exposition ------------------------------------------------------

/** The metric families of an exposition: name to type (`# TYPE name type`). */
export function metricTypes(exposition: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
  return types;
}

/** The label names seen on any sample of the series named `series` (e.g. `x_bucket`). */
export function sampleLabels(exposition: string, series: string): Set<string> {
  const labels = new Set<string>();
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(`${series}{`)) continue;
    const body = line.slice(series.length + 1, line.lastIndexOf("}"));
    for (const m of body.matchAll(/([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"/g)) labels.add(m[1]!);
  }
  return labels;
}

/**
 * The family a series name belongs to: itself when exported under that name, else a
 * histogram's or a summary's (`_bucket`, `_sum`, `_count`) when the name minus the suffix
 * is exported with that type. Undefined: the exposition has no such metric.
 */
export function familyOf(types: ReadonlyMap<string, string>, series: string): string | undefined {
  if (types.has(series)) return series;
  const m = /^(.*)_(bucket|sum|count)$/.exec(series);
  if (m === null) return undefined;
  const type = types.get(m[1]!);
  if (type === "histogram") return m[1];
  if (type === "summary" && m[2] !== "bucket") return m[1];
  return undefined;
}
