// report.html from hand-built results: one inline SVG per plot with the axis titles each
// plot should carry, one table row per result row, every string from the results escaped,
// nothing fetched from the network; and the edge cases a real run produces (one row, no
// observed rate, an interrupted run, all-zero figures, blooms off only).
import { afterEach, beforeEach, describe, expect, it, vi, type MockInstance } from "vitest";
import { renderReport } from "./report.js";
import type { ResultRow } from "./results.js";
import { FPRS, LAYOUTS, QUERIES, SPEC_TEXT, fixture } from "./report.test-helper.js";

const PLOT_IDS = ["pruned-share", "bloom-size", "observed-fpr", "latency", "ingest-cost"];

/** The HTML of one plot's <figure>. */
function figure(html: string, id: string): string {
  const m = new RegExp(`<figure class="plot" id="plot-${id}"[^>]*>([\\s\\S]*?)</figure>`).exec(
    html,
  );
  if (m === null) throw new Error(`no figure plot-${id}`);
  return m[1]!;
}

const count = (text: string, needle: string) => text.split(needle).length - 1;

/** <tbody> rows of the table that follows `heading`. */
function tableRows(html: string, heading: string): string[] {
  const at = html.indexOf(`<h2>${heading}</h2>`);
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(html.slice(at))![1]!;
  return body.split("\n").filter((l) => l.startsWith("<tr"));
}

let warn: MockInstance<typeof console.warn>;
beforeEach(() => {
  // Vega and Vega-Lite report a plot they cannot draw right through console.warn.
  warn = vi.spyOn(console, "warn");
});
afterEach(() => {
  expect(warn).not.toHaveBeenCalled();
  warn.mockRestore();
});

describe("renderReport", () => {
  it("draws one inline SVG per plot, with its axis titles", async () => {
    const html = await renderReport(fixture());
    expect(count(html, "<svg")).toBe(PLOT_IDS.length);
    for (const id of PLOT_IDS) expect(count(figure(html, id), "<svg"), id).toBe(1);
    const titles: Record<string, string[]> = {
      "pruned-share": ["Configured false-positive rate", "Pruned share of chunks in range"],
      "bloom-size": ["Configured false-positive rate", "Bloom bytes / chunk bytes"],
      "observed-fpr": ["Configured false-positive rate", "Observed false-positive rate"],
      latency: ["Configuration", "p50 latency (ms)"],
      "ingest-cost": ["Configuration", "Ingest time relative to baseline"],
    };
    for (const [id, want] of Object.entries(titles)) {
      const svg = figure(html, id);
      for (const t of want) expect(svg, `${id}: ${t}`).toContain(`>${t}</text>`);
    }
    // One line per layout, each layout in the legend; facets per query shape.
    const pruned = figure(html, "pruned-share");
    for (const l of LAYOUTS) expect(pruned).toContain(`>${l}</text>`);
    for (const q of QUERIES) expect(pruned).toContain(`>${q}</text>`);
    expect(count(pruned, 'aria-roledescription="line mark"')).toBe(LAYOUTS.length * QUERIES.length);
    // The baseline is not on the FPR plots; it is on the latency and ingest plots.
    expect(pruned).not.toContain(">baseline</text>");
    expect(figure(html, "bloom-size")).not.toContain(">baseline</text>");
    expect(figure(html, "latency")).toContain(">baseline</text>");
    expect(figure(html, "ingest-cost")).toContain(">baseline</text>");
    // Ticks at the configured rates.
    for (const t of ["0.1%", "1%", "5%", "10%"]) expect(pruned).toContain(`>${t}</text>`);
  });

  it("has a table row per result row, and the run's machine and datasets", async () => {
    const results = fixture();
    const html = await renderReport(results);
    const rows = tableRows(html, "Summary");
    expect(rows).toHaveLength(results.rows.length);
    for (const [i, r] of results.rows.entries()) {
      const tr = rows[i]!;
      expect(tr).toContain(`<td>${r.dataset}</td><td>${r.configuration}</td>`);
      expect(tr).toContain(`>${r.query}</td>`);
      expect(tr).toContain(`<td class="n">${r.chunksInRange.toLocaleString("en-US")}</td>`);
      expect(tr).toContain(r.settings.blooms ? `${r.settings.falsePositiveRate * 100}%` : ">off<");
      expect(tr).toContain("<td>yes</td>");
    }
    expect(rows.filter((r) => r.startsWith('<tr class="baseline">'))).toHaveLength(QUERIES.length);
    expect(tableRows(html, "Configurations")).toHaveLength(1 + FPRS.length * LAYOUTS.length);
    expect(tableRows(html, "Datasets")).toHaveLength(1);
    for (const s of [
      "0.1.0 (f3b5c8e)",
      "v22.11.0",
      "Test CPU @ 2.0GHz × 2",
      "8.00 GiB",
      "app-logs",
    ]) {
      expect(html).toContain(s);
    }
    expect(html).toContain("<h1>Sieve experiment: fp-sweep</h1>");
    expect(html).toContain("3 min 30 s");
    expect(html).not.toContain("Interrupted");
  });

  it("shows the spec text verbatim, escaped", async () => {
    const html = await renderReport(fixture());
    expect(html).not.toContain("<script");
    const pre = /<pre>([\s\S]*?)<\/pre>/.exec(html)![1]!;
    expect(pre).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends");
    const unescaped = pre
      .replaceAll("&lt;", "<")
      .replaceAll("&gt;", ">")
      .replaceAll("&quot;", '"')
      .replaceAll("&#39;", "'")
      .replaceAll("&amp;", "&");
    expect(unescaped).toBe(SPEC_TEXT);
  });

  it("escapes every string from the results, in tables and in plots", async () => {
    const evil = `<img src=x onerror="alert(1)">&`;
    const base = fixture();
    const html = await renderReport({
      ...base,
      spec: { name: evil },
      environment: { ...base.environment, cpuModel: evil },
      datasets: [{ ...base.datasets[0]!, name: evil }],
      rows: base.rows.map((r) => ({
        ...r,
        configuration: `${r.configuration} ${evil}`,
        example: evil,
      })),
    });
    expect(html).not.toContain("<img");
    expect(html).not.toContain('"alert(1)"');
    expect(html).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;");
  });

  it("references nothing outside the page", async () => {
    const html = await renderReport(fixture());
    const urls = html.match(/https?:\/\/[^\s"'<>)]*/g) ?? [];
    const namespaces = new Set(["http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"]);
    expect(urls.filter((u) => !namespaces.has(u))).toEqual([]);
    expect(html).not.toMatch(/<(script|link|img|iframe)\b/i);
    expect(html).not.toMatch(/\b(src|href)=/i);
  });

  it("keeps configurations differing in more than the rate on lines of their own", async () => {
    const base = fixture();
    const other = base.rows.map((r) => ({
      ...r,
      dataset: "replayed",
      settings: { ...r.settings, chunkTargetBytes: 4 * 1_048_576 },
    }));
    const html = await renderReport({ ...base, rows: [...base.rows, ...other] });
    const pruned = figure(html, "pruned-share");
    expect(pruned).toContain(">app-logs · exact · chunk 1.50 MiB</text>");
    expect(pruned).toContain(">replayed · scalable · chunk 4.00 MiB</text>");
    expect(count(pruned, 'aria-roledescription="line mark"')).toBe(
      2 * LAYOUTS.length * QUERIES.length,
    );
    // Several datasets: the configuration axes name the dataset too.
    expect(figure(html, "ingest-cost")).toContain(">replayed / baseline</text>");
  });

  it("draws a single row", async () => {
    const one = fixture().rows.find((r) => r.settings.blooms)!;
    const html = await renderReport(fixture({ rows: [one] }));
    expect(count(html, "<svg")).toBe(PLOT_IDS.length);
    expect(tableRows(html, "Summary")).toHaveLength(1);
  });

  it("draws one configuration with all-zero figures", async () => {
    const zero = (r: ResultRow): ResultRow => ({
      ...r,
      chunksInRange: 0,
      chunksPruned: 0,
      chunksFetched: 0,
      falsePositiveChunks: 0,
      observedFalsePositiveRate: 0,
      bytesFetched: 0,
      prunedShare: 0,
      chunkBytes: 0,
      bloomBytes: 0,
      bloomRatio: 0,
      ingestSeconds: 0,
      ingestCostRatio: 0,
      cold: { p50: 0, p99: 0, samples: 1 },
      warm: { p50: 0, p99: 0, samples: 1 },
    });
    const rows = fixture().rows.filter((r) => r.configuration === "fp-sweep fp=0.01 layout=exact");
    const html = await renderReport(fixture({ rows: rows.map(zero) }));
    expect(count(html, "<svg")).toBe(PLOT_IDS.length);
    expect(html).not.toContain("NaN");
  });

  it("leaves out null observed rates and says so when none is left", async () => {
    const base = fixture();
    const some = base.rows.map((r, i) =>
      i % 2 === 0 ? { ...r, observedFalsePositiveRate: null } : r,
    );
    const html = await renderReport({ ...base, rows: some });
    expect(count(html, "<svg")).toBe(PLOT_IDS.length);
    const observed = figure(html, "observed-fpr");
    expect(count(observed, 'aria-roledescription="point"')).toBe(
      some.filter((r) => r.settings.blooms && r.observedFalsePositiveRate !== null).length,
    );

    const none = base.rows.map((r) => ({ ...r, observedFalsePositiveRate: null }));
    const html2 = await renderReport({ ...base, rows: none });
    expect(count(html2, "<svg")).toBe(PLOT_IDS.length - 1);
    expect(figure(html2, "observed-fpr")).toContain('class="empty"');
    expect(tableRows(html2, "Summary").every((r) => r.includes('<td class="n">—</td>'))).toBe(true);
  });

  it("survives figures that went through JSON as null (NaN, 0/0)", async () => {
    const base = fixture();
    const nulls = base.rows.map(
      (r) => JSON.parse(JSON.stringify({ ...r, prunedShare: NaN, bloomRatio: NaN })) as ResultRow,
    );
    const html = await renderReport({ ...base, rows: nulls });
    expect(figure(html, "pruned-share")).toContain('class="empty"');
    expect(figure(html, "bloom-size")).toContain('class="empty"');
    expect(count(html, "<svg")).toBe(PLOT_IDS.length - 2);
    expect(html).not.toContain("NaN");
  });

  it("draws the baseline alone without the FPR plots", async () => {
    const base = fixture();
    const html = await renderReport({ ...base, rows: base.rows.filter((r) => !r.settings.blooms) });
    for (const id of ["pruned-share", "bloom-size", "observed-fpr"]) {
      expect(figure(html, id)).toContain('class="empty"');
    }
    expect(count(html, "<svg")).toBe(2);
  });

  it("draws nothing but the page when there are no rows", async () => {
    const html = await renderReport(fixture({ rows: [], interrupted: true }));
    expect(count(html, "<svg")).toBe(0);
    expect(html).toContain('class="banner interrupted"');
  });

  it("shows an interrupted banner, and flags incorrect rows", async () => {
    const base = fixture();
    const rows = base.rows.map((r, i) => (i === 3 ? { ...r, correct: false } : r));
    const html = await renderReport({ ...base, interrupted: true, rows });
    expect(html).toContain('<div class="banner interrupted" role="alert">Interrupted');
    expect(html).toContain("1 row answered differently from the blooms-off baseline");
    expect(tableRows(html, "Summary")[3]).toContain('<td class="bad">NO</td>');
  });
});
