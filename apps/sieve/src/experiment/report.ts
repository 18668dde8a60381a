/**
 * `report.html` of `sieve experiment run`: one self-contained page drawn from
 * `results.json` alone (see results.ts): the run, its plots, the summary table and the
 * spec text. Plots are Vega-Lite specs compiled with `vega-lite` and rendered to SVG by
 * `vega`'s headless View, inlined into the page: nothing is fetched when it is opened, so
 * it can be mailed, archived or opened offline.
 *
 * Rows with blooms off are the baseline: they are in the tables, in the latency and
 * ingest plots, and out of every plot whose x axis is a false-positive rate.
 */
import { parse, View, Warn } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { ExperimentResults, ResultRow } from "./results.js";

/** The page, as HTML text. Every string taken from `results` is escaped. */
export async function renderReport(results: ExperimentResults): Promise<string> {
  const title = `Sieve experiment: ${specName(results.spec) ?? "results"}`;
  const plots: string[] = [];
  for (const plot of PLOTS) plots.push(await renderPlot(plot, results.rows));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${esc(title)}</h1>
<p class="lede">${esc(runLine(results))}</p>
${banners(results)}
<section id="run">
<h2>Machine and version</h2>
${environmentTable(results)}
<h2>Datasets</h2>
${datasetsTable(results)}
</section>
<section id="plots">
<h2>Plots</h2>
<div class="plots">
${plots.join("\n")}
</div>
</section>
<section id="summary">
<h2>Summary</h2>
<p class="note">One row per dataset × configuration × query shape. Chunk counts are sums over
the row's queries (cold pass). Observed FPR = false-positive chunks / (false-positive chunks +
pruned chunks). Latencies are per query, in milliseconds. Each configuration's stored bloom and
chunk bytes are in the Configurations table below.</p>
${summaryTable(results.rows)}
<h2>Configurations</h2>
${configurationsTable(results.rows)}
<h2>Query shapes</h2>
${queriesTable(results.rows)}
</section>
<section id="spec">
<h2>Spec</h2>
<pre>${esc(results.specText)}</pre>
</section>
</body>
</html>
`;
}

// ---------------------------------------------------------------------------------------
// Page parts

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  margin: 0 auto; padding: 1.5rem 2rem 3rem; max-width: 1800px; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 .6rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 0 0 .3rem; }
.lede { color: #555; margin: 0 0 1rem; }
.note { color: #555; margin: .2rem 0 .6rem; max-width: 70rem; }
.banner { padding: .7rem 1rem; border-radius: 4px; margin: 1rem 0; font-weight: 600; }
.banner.interrupted { background: #fff4d6; border: 1px solid #e0b000; color: #5c4500; }
.banner.incorrect { background: #fde2e1; border: 1px solid #d33; color: #7a0b07; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; }
th, td { padding: .2rem .45rem; border-bottom: 1px solid #e4e4e4; text-align: left; }
td { white-space: nowrap; }
th { background: #f4f4f4; vertical-align: bottom; }
thead th { max-width: 6.5rem; }
.n { text-align: right; }
td.n { font-variant-numeric: tabular-nums; }
tr.baseline td { background: #f8f8fb; }
td.bad { color: #b00; font-weight: 600; }
table.kv th { background: none; text-align: left; font-weight: 600; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #f6f6f6; border: 1px solid #e0e0e0; padding: .8rem 1rem; overflow-x: auto;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5rem 2.5rem; }
figure.plot { margin: 0 0 1.5rem; max-width: 100%; }
figure.plot svg { max-width: 100%; height: auto; display: block; }
.empty { color: #777; font-style: italic; }
`;

function banners(results: ExperimentResults): string {
  const out: string[] = [];
  if (results.interrupted) {
    out.push(
      `<div class="banner interrupted" role="alert">Interrupted: the run was stopped before every configuration finished. This report covers only the configurations that completed.</div>`,
    );
  }
  const wrong = results.rows.filter((r) => !r.correct).length;
  if (wrong > 0) {
    out.push(
      `<div class="banner incorrect" role="alert">${wrong} row${wrong === 1 ? "" : "s"} answered differently from the blooms-off baseline (column “correct”).</div>`,
    );
  }
  return out.join("\n");
}

function runLine(results: ExperimentResults): string {
  const started = Date.parse(results.startedAt);
  const finished = Date.parse(results.finishedAt);
  const parts = [`Started ${results.startedAt}`, `finished ${results.finishedAt}`];
  if (Number.isFinite(started) && Number.isFinite(finished) && finished >= started) {
    parts.push(seconds((finished - started) / 1000));
  }
  if (results.quick) parts.push("quick run (--quick: datasets scaled down)");
  parts.push(`${results.rows.length} result rows`);
  return parts.join(" · ");
}

function environmentTable(results: ExperimentResults): string {
  const e = results.environment;
  const rows: [string, string][] = [
    ["Sieve", e.sieveVersion + (e.gitRevision === undefined ? "" : ` (${e.gitRevision})`)],
    ["Node", e.node],
    ["Platform", e.platform],
    ["CPU", `${e.cpuModel} × ${e.cpus}`],
    ["Memory", bytes(e.memoryBytes)],
    ["Load average (1 min)", `${fixed(e.loadStart, 2)} at start, ${fixed(e.loadEnd, 2)} at end`],
  ];
  const body = rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("\n");
  return `<table class="kv">\n${body}\n</table>`;
}

function datasetsTable(results: ExperimentResults): string {
  return table(
    [
      ["Dataset", false],
      ["Kind", false],
      ["Streams", true],
      ["Lines", true],
      ["Raw bytes", true],
    ],
    results.datasets.map((d) => ({
      cells: [d.name, d.kind, int(d.streams), int(d.lines), bytes(d.rawBytes)],
    })),
  );
}

function summaryTable(rows: readonly ResultRow[]): string {
  return table(
    [
      ["Dataset", false],
      ["Configuration", false],
      ["Query", false],
      ["Chunks in range", true],
      ["Pruned", true],
      ["Fetched", true],
      ["Pruned share", true],
      ["False-positive chunks", true],
      ["Observed FPR", true],
      ["Configured FPR", true],
      ["Bloom / chunk bytes", true],
      ["Bytes fetched", true],
      ["Ingest s", true],
      ["Ingest × baseline", true],
      ["Cold p50 ms", true],
      ["Cold p99 ms", true],
      ["Warm p50 ms", true],
      ["Warm p99 ms", true],
      ["Correct", false],
    ],
    rows.map((r) => ({
      baseline: !r.settings.blooms,
      cells: [
        r.dataset,
        r.configuration,
        { text: r.query, title: r.example },
        int(r.chunksInRange),
        int(r.chunksPruned),
        int(r.chunksFetched),
        percent(r.prunedShare),
        int(r.falsePositiveChunks),
        r.observedFalsePositiveRate === null ? "—" : percent(r.observedFalsePositiveRate),
        r.settings.blooms ? percent(r.settings.falsePositiveRate) : "off",
        percent(r.bloomRatio),
        bytes(r.bytesFetched),
        fixed(r.ingestSeconds, 2),
        r.ingestCostRatio === null ? "—" : `${fixed(r.ingestCostRatio, 2)}×`,
        latency(r.cold.p50, r.cold.samples),
        latency(r.cold.p99, r.cold.samples),
        latency(r.warm.p50, r.warm.samples),
        latency(r.warm.p99, r.warm.samples),
        r.correct ? "yes" : { text: "NO", bad: true },
      ],
    })),
  );
}

function configurationsTable(rows: readonly ResultRow[]): string {
  return table(
    [
      ["Dataset", false],
      ["Configuration", false],
      ["Blooms", false],
      ["Configured FPR", true],
      ["Layout", false],
      ["Line n-grams", false],
      ["Tokens", false],
      ["Chunk target", true],
      ["Block", true],
      ["Chunk bytes", true],
      ["Bloom bytes", true],
      ["Ingest s", true],
    ],
    perConfiguration(rows).map((r) => {
      const s = r.settings;
      return {
        baseline: !s.blooms,
        cells: [
          r.dataset,
          r.configuration,
          s.blooms ? "on" : "off (baseline)",
          s.blooms ? percent(s.falsePositiveRate) : "—",
          s.blooms ? s.layout : "—",
          s.ngramLength === 0 ? "off" : `length ${s.ngramLength}, skip ${s.ngramSkip}`,
          s.blooms ? s.tokens.join(", ") || "none" : "—",
          bytes(s.chunkTargetBytes),
          bytes(s.chunkBlockBytes),
          bytes(r.chunkBytes),
          bytes(r.bloomBytes),
          fixed(r.ingestSeconds, 2),
        ],
      };
    }),
  );
}

function queriesTable(rows: readonly ResultRow[]): string {
  const first = new Map<string, ResultRow>();
  for (const r of rows) if (!first.has(r.query)) first.set(r.query, r);
  return table(
    [
      ["Query shape", false],
      ["Queries per row", true],
      ["Example", false],
    ],
    [...first.values()].map((r) => ({
      cells: [r.query, int(r.queries), { text: r.example, code: true }],
    })),
  );
}

/** A cell: plain text, or text with a tooltip, as code, or flagged. All of it escaped. */
type Cell = string | { text: string; title?: string; code?: boolean; bad?: boolean };

/** `columns`: header and whether the column is numeric (right-aligned). */
function table(
  columns: readonly (readonly [string, boolean])[],
  rows: readonly { cells: readonly Cell[]; baseline?: boolean }[],
): string {
  const head = columns
    .map(([name, numeric]) => `<th${numeric ? ' class="n"' : ""}>${esc(name)}</th>`)
    .join("");
  const body = rows
    .map(({ cells, baseline }) => {
      const tds = cells.map((cell, i) => {
        const numeric = columns[i]?.[1] === true;
        const c = typeof cell === "string" ? { text: cell } : cell;
        const classes = [numeric ? "n" : "", c.bad === true ? "bad" : ""].filter(Boolean);
        const cls = classes.length > 0 ? ` class="${classes.join(" ")}"` : "";
        const title = c.title === undefined ? "" : ` title="${esc(c.title)}"`;
        const text = c.code === true ? `<code>${esc(c.text)}</code>` : esc(c.text);
        return `<td${cls}${title}>${text}</td>`;
      });
      return `<tr${baseline === true ? ' class="baseline"' : ""}>${tds.join("")}</tr>`;
    })
    .join("\n");
  return `<div class="scroll"><table>\n<thead><tr>${head}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table></div>`;
}

// ---------------------------------------------------------------------------------------
// Plots

/** One plot: its title, what it shows, and its Vega-Lite spec (undefined: no data). */
interface Plot {
  readonly id: string;
  readonly title: string;
  readonly caption: string;
  readonly empty: string;
  readonly spec: (rows: readonly ResultRow[]) => TopLevelSpec | undefined;
}

const PLOTS: readonly Plot[] = [
  {
    id: "pruned-share",
    title: "Pruned share vs false-positive rate",
    caption:
      "Share of the chunks in range that the blooms pruned, per query shape, one line per filter layout. Baseline rows (blooms off) are left out.",
    empty: "No rows with blooms on: nothing to plot.",
    spec: prunedShareSpec,
  },
  {
    id: "bloom-size",
    title: "Bloom bytes / chunk bytes vs false-positive rate",
    caption: "Bytes of bloom per byte of chunk, one point per configuration.",
    empty: "No rows with blooms on: nothing to plot.",
    spec: bloomRatioSpec,
  },
  {
    id: "observed-fpr",
    title: "Observed vs configured false-positive rate",
    caption:
      "Each point is a configuration × query shape; the dashed line is observed = configured. Both axes are symmetric-log, so an observed rate of 0 stays on the plot.",
    empty: "No row has an observed false-positive rate (no blooms, or no chunk was ever tested).",
    spec: observedFprSpec,
  },
  {
    id: "latency",
    title: "Query latency p50, cold and warm",
    caption: "Median latency per query in milliseconds, per configuration and query shape.",
    empty: "No latency was measured (cold and warm passes both off).",
    spec: latencySpec,
  },
  {
    id: "ingest-cost",
    title: "Ingest cost of blooms",
    caption:
      "Ingest time (push to end of flush) relative to the blooms-off baseline; the dashed line is the baseline (1×).",
    empty: "No configuration has an ingest-time ratio to the baseline.",
    spec: ingestCostSpec,
  },
];

async function renderPlot(plot: Plot, rows: readonly ResultRow[]): Promise<string> {
  const spec = plot.spec(rows);
  const body = spec === undefined ? `<p class="empty">${esc(plot.empty)}</p>` : await toSvg(spec);
  // As wide as its plot, so the caption wraps under it and two plots fit side by side.
  const width = /^<svg[^>]* width="(\d+)"/.exec(body)?.[1] ?? "420";
  return `<figure class="plot" id="plot-${plot.id}" style="width: ${width}px">
<h3>${esc(plot.title)}</h3>
<figcaption class="note">${esc(plot.caption)}</figcaption>
${body}
</figure>`;
}

/**
 * Vega-Lite → Vega → SVG text, headless (`renderer: "none"`: no canvas, no DOM). Vega
 * escapes the text it writes into the SVG. Warnings go to the console (Vega's default
 * logger), so a plot that draws wrongly says so.
 */
async function toSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: "none", logLevel: Warn });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Shared look: one font, quiet grid, legends on top so wide plots stay readable. */
const CONFIG = {
  font: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
  axis: { labelFontSize: 11, titleFontSize: 12, titleFontWeight: 600, gridColor: "#eee" },
  legend: { labelFontSize: 11, titleFontSize: 12, orient: "top", labelLimit: 320 },
  header: { labelFontSize: 12, labelFontWeight: 600, title: null },
  view: { stroke: "#ddd" },
} as const;

/** Colors fixed per layout, so every plot paints `ribbon`, `exact` and `scalable` alike. */
const LAYOUT_COLORS: Readonly<Record<string, string>> = {
  ribbon: "#54a24b",
  exact: "#4c78a8",
  scalable: "#f58518",
  "blooms off": "#9d9d9d",
};

/** A color scale: the layouts' fixed colors when every value is a layout, else a scheme. */
function colorScale(
  values: readonly string[],
): { domain: string[]; range: string[] } | { scheme: "tableau10" } {
  const domain = [...new Set(values)].sort();
  if (domain.every((v) => v in LAYOUT_COLORS)) {
    return { domain, range: domain.map((v) => LAYOUT_COLORS[v]!) };
  }
  return { scheme: "tableau10" };
}

const bloomRows = (rows: readonly ResultRow[]) =>
  rows.filter((r) => r.settings.blooms && r.settings.falsePositiveRate > 0);

/**
 * The line a bloom row belongs to in the FPR plots: its layout, plus whatever else varies
 * among the bloom configurations (dataset, n-grams, chunk sizes), so two configurations
 * differing in more than the rate are never joined into one line.
 */
function seriesOf(rows: readonly ResultRow[]): (r: ResultRow) => string {
  const varies = (f: (r: ResultRow) => unknown) => new Set(rows.map(f)).size > 1;
  const dataset = varies((r) => r.dataset);
  const ngram = varies((r) => `${r.settings.ngramLength}/${r.settings.ngramSkip}`);
  const tokens = varies((r) => r.settings.tokens.join(","));
  const target = varies((r) => r.settings.chunkTargetBytes);
  const block = varies((r) => r.settings.chunkBlockBytes);
  return (r) => {
    const s = r.settings;
    const parts: string[] = [s.layout];
    if (dataset) parts.unshift(r.dataset);
    if (ngram)
      parts.push(s.ngramLength === 0 ? "no n-grams" : `n-gram ${s.ngramLength}/${s.ngramSkip}`);
    if (tokens) parts.push(`tokens ${s.tokens.join(", ") || "none"}`);
    if (target) parts.push(`chunk ${bytes(s.chunkTargetBytes)}`);
    if (block) parts.push(`block ${bytes(s.chunkBlockBytes)}`);
    return parts.join(" · ");
  };
}

/** The configured rates as a log x axis: ticks at those rates, a little room either side. */
function fprAxis(fprs: readonly number[], title: string) {
  const values = [...new Set(fprs)].sort((a, b) => a - b);
  const lo = values[0]!;
  const hi = values[values.length - 1]!;
  return {
    field: "fpr",
    type: "quantitative" as const,
    title,
    scale: { type: "log" as const, domain: [lo / 1.6, hi * 1.6], nice: false },
    // Ticks at the configured rates; past a dozen they would collide, so Vega picks.
    axis: { format: ".3~%", ...(values.length <= 12 ? { values } : {}), grid: true },
  };
}

function prunedShareSpec(rows: readonly ResultRow[]): TopLevelSpec | undefined {
  const bloom = bloomRows(rows);
  if (bloom.length === 0) return undefined;
  const series = seriesOf(bloom);
  const values = bloom
    .map((r) => ({
      panel: r.query,
      series: series(r),
      fpr: r.settings.falsePositiveRate,
      pruned: r.prunedShare,
    }))
    .filter((v) => Number.isFinite(v.pruned));
  if (values.length === 0) return undefined;
  const panels = new Set(values.map((v) => v.panel)).size;
  return {
    config: CONFIG,
    data: { values },
    facet: { field: "panel", type: "nominal", sort: null },
    columns: Math.min(panels, 3),
    spec: {
      width: 300,
      height: 200,
      mark: LINE_MARK,
      encoding: {
        ...rateLines(values),
        y: {
          field: "pruned",
          type: "quantitative",
          title: "Pruned share of chunks in range",
          scale: { domain: [0, 1] },
          axis: { format: "~%" },
        },
      },
    },
  };
}

const LINE_MARK = { type: "line", point: { size: 45 }, strokeWidth: 2 } as const;

/**
 * One line per layout series over the configured rate (x): a colour each, and dashes too,
 * so a line drawn over an equal one still shows.
 */
function rateLines(values: readonly { series: string; fpr: number }[]) {
  return {
    x: fprAxis(
      values.map((v) => v.fpr),
      "Configured false-positive rate",
    ),
    color: {
      field: "series",
      type: "nominal",
      title: "Layout",
      scale: colorScale(values.map((v) => v.series)),
    },
    strokeDash: { field: "series", type: "nominal", title: "Layout" },
    order: { field: "fpr", type: "quantitative" },
  } as const;
}

function bloomRatioSpec(rows: readonly ResultRow[]): TopLevelSpec | undefined {
  const bloom = perConfiguration(bloomRows(rows));
  if (bloom.length === 0) return undefined;
  const series = seriesOf(bloom);
  const values = bloom
    .map((r) => ({ series: series(r), fpr: r.settings.falsePositiveRate, ratio: r.bloomRatio }))
    .filter((v) => Number.isFinite(v.ratio));
  if (values.length === 0) return undefined;
  // An all-zero column would leave Vega a zero-width domain: give it one to draw on.
  const flat = values.every((v) => v.ratio === 0);
  return {
    config: CONFIG,
    data: { values },
    width: 420,
    height: 260,
    mark: LINE_MARK,
    encoding: {
      ...rateLines(values),
      y: {
        field: "ratio",
        type: "quantitative",
        title: "Bloom bytes / chunk bytes",
        scale: flat ? { domain: [0, 0.01] } : { zero: true },
        axis: { format: ".2~%" },
      },
    },
  };
}

function observedFprSpec(rows: readonly ResultRow[]): TopLevelSpec | undefined {
  const bloom = bloomRows(rows).filter((r) => Number.isFinite(r.observedFalsePositiveRate));
  if (bloom.length === 0) return undefined;
  const series = seriesOf(bloom);
  const values = bloom.map((r) => ({
    series: series(r),
    query: r.query,
    configured: r.settings.falsePositiveRate,
    observed: r.observedFalsePositiveRate!,
  }));
  const fprs = [...new Set(values.map((v) => v.configured))].sort((a, b) => a - b);
  const top = Math.max(...fprs, ...values.map((v) => v.observed));
  // One domain and one scale on both axes, so observed = configured is the diagonal.
  const hi = Math.max(top, Math.min(1, top * 1.3));
  // symlog is linear below `constant` and logarithmic above: a quarter of the smallest
  // configured rate keeps 0 on the plot and still spreads 0.1%..10% apart.
  const scale = { type: "symlog" as const, constant: fprs[0]! / 4, domain: [0, hi], nice: false };
  const ticks = [0, ...fprs].length <= 13 ? { values: [0, ...fprs] } : {};
  return {
    config: CONFIG,
    width: 340,
    height: 340,
    layer: [
      {
        data: { values: [{ v: 0 }, { v: hi }] },
        mark: { type: "line", color: "#888", strokeDash: [5, 4], strokeWidth: 1.5 },
        encoding: {
          x: { field: "v", type: "quantitative", scale },
          y: { field: "v", type: "quantitative", scale },
        },
      },
      {
        data: { values },
        mark: { type: "point", filled: true, size: 70, opacity: 0.85 },
        encoding: {
          x: {
            field: "configured",
            type: "quantitative",
            title: "Configured false-positive rate",
            scale,
            axis: { format: ".3~%", ...ticks },
          },
          y: {
            field: "observed",
            type: "quantitative",
            title: "Observed false-positive rate",
            scale,
            axis: { format: ".3~%", ...ticks },
          },
          color: {
            field: "series",
            type: "nominal",
            title: "Layout",
            scale: colorScale(values.map((v) => v.series)),
          },
          shape: { field: "query", type: "nominal", title: "Query shape" },
        },
      },
    ],
  };
}

/** How a configuration is named on a categorical axis (with its dataset when there are several). */
function configLabel(rows: readonly ResultRow[]): (r: ResultRow) => string {
  const several = new Set(rows.map((r) => r.dataset)).size > 1;
  return (r) => (several ? `${r.dataset} / ${r.configuration}` : r.configuration);
}

function latencySpec(rows: readonly ResultRow[]): TopLevelSpec | undefined {
  const label = configLabel(rows);
  const values = rows.flatMap((r) =>
    (["cold", "warm"] as const)
      .filter((pass) => r[pass].samples > 0 && Number.isFinite(r[pass].p50))
      .map((pass) => ({ panel: r.query, configuration: label(r), pass, p50: r[pass].p50 })),
  );
  if (values.length === 0) return undefined;
  const configurations = [...new Set(values.map((v) => v.configuration))];
  const top = new Map<string, number>();
  for (const v of values) top.set(v.panel, Math.max(top.get(v.panel) ?? 0, v.p50));
  const peaks = [...top.values()];
  // The baseline's cold queries can dwarf every other bar: each shape gets its own axis,
  // unless one is all zeros (a zero-height domain); all zeros get an axis to 1 ms.
  const independent = peaks.every((p) => p > 0);
  const flat = peaks.every((p) => p === 0);
  return {
    config: CONFIG,
    data: { values },
    facet: { field: "panel", type: "nominal", sort: null },
    columns: Math.min(top.size, configurations.length > 8 ? 1 : 2),
    resolve: { scale: { y: independent ? "independent" : "shared" } },
    spec: {
      // 30 px per configuration, but room for the axis title when there are few.
      width: Math.max(140, 30 * configurations.length),
      height: 200,
      mark: { type: "bar" },
      encoding: {
        x: {
          field: "configuration",
          type: "nominal",
          title: "Configuration",
          sort: configurations,
          axis: { labelAngle: -35, labelLimit: 220 },
        },
        xOffset: { field: "pass", type: "nominal", sort: ["cold", "warm"] },
        y: {
          field: "p50",
          type: "quantitative",
          title: "p50 latency (ms)",
          ...(flat ? { scale: { domain: [0, 1] } } : {}),
        },
        color: {
          field: "pass",
          type: "nominal",
          title: "Pass",
          scale: { domain: ["cold", "warm"], range: ["#54a24b", "#b279a2"] },
        },
      },
    },
  };
}

function ingestCostSpec(rows: readonly ResultRow[]): TopLevelSpec | undefined {
  const configs = perConfiguration(rows).filter((r) => Number.isFinite(r.ingestCostRatio));
  if (configs.length === 0) return undefined;
  const label = configLabel(configs);
  const values = configs.map((r) => ({
    configuration: label(r),
    layout: r.settings.blooms ? r.settings.layout : "blooms off",
    ratio: r.ingestCostRatio!,
  }));
  const x = {
    field: "configuration",
    type: "nominal",
    title: "Configuration",
    sort: values.map((v) => v.configuration),
    axis: { labelAngle: -35, labelLimit: 220 },
  } as const;
  const y = {
    field: "ratio",
    type: "quantitative",
    title: "Ingest time relative to baseline",
    scale: { zero: true },
  } as const;
  return {
    config: CONFIG,
    width: Math.max(140, 36 * values.length),
    height: 240,
    layer: [
      {
        data: { values },
        mark: { type: "bar" },
        encoding: {
          x,
          y,
          color: {
            field: "layout",
            type: "nominal",
            title: "Layout",
            scale: colorScale(values.map((v) => v.layout)),
          },
        },
      },
      {
        data: { values },
        mark: { type: "text", dy: -6, fontSize: 10, color: "#333" },
        encoding: { x, y, text: { field: "ratio", type: "quantitative", format: ".2f" } },
      },
      {
        data: { values: [{ one: 1 }] },
        mark: { type: "rule", color: "#666", strokeDash: [5, 4] },
        encoding: { y: { field: "one", type: "quantitative" } },
      },
    ],
  };
}

/** The first row of each dataset × configuration (its stored bytes and ingest figures). */
function perConfiguration(rows: readonly ResultRow[]): ResultRow[] {
  const seen = new Map<string, ResultRow>();
  for (const r of rows) {
    const key = JSON.stringify([r.dataset, r.configuration]);
    if (!seen.has(key)) seen.set(key, r);
  }
  return [...seen.values()];
}

// ---------------------------------------------------------------------------------------
// Text

/** The spec's `name`, when the spec has one. */
function specName(spec: unknown): string | undefined {
  if (typeof spec !== "object" || spec === null || !("name" in spec)) return undefined;
  return typeof spec.name === "string" ? spec.name : undefined;
}

const ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text for HTML element content and quoted attribute values. */
function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function int(n: number): string {
  return Number.isFinite(n) ? n.toLocaleString("en-US") : "—";
}

/** 3 significant digits: 0.1%, 0.841%, 97.2%, 100%. */
function percent(x: number): string {
  if (!Number.isFinite(x)) return "—";
  return `${Number((x * 100).toPrecision(3))}%`;
}

function fixed(x: number, digits: number): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

function latency(ms: number, samples: number): string {
  if (samples === 0 || !Number.isFinite(ms)) return "—";
  return ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0);
}

function seconds(s: number): string {
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${Math.floor(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function bytes(n: number): string {
  if (!Number.isFinite(n)) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ${units[u]!}`;
}
