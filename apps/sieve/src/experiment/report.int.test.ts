// report.html in a real browser: Debian's Chromium (scripts/chromium.sh installs it when
// missing; a browser that cannot be had fails this test, it is never skipped) opens the
// page from a file, logs no console error and no page error, and lays out every plot with
// a nonzero size. A full-page screenshot is left in the OS temp dir for a human to look at.
import { execFile } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { chromium, type Browser } from "playwright-core";
import { afterAll, describe, expect, it } from "vitest";
import { renderReport } from "./report.js";
import type { ConfigurationSettings, ExperimentResults, ResultRow } from "./results.js";

const ROOT = resolve(import.meta.dirname, "../../../..");
const PLOTS = 5;

/** The browser's path from scripts/chromium.sh; its own message when it cannot install one. */
async function chromiumPath(): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)("sh", ["scripts/chromium.sh", "path"], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout.trim();
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? "";
    throw new Error(
      `sh scripts/chromium.sh path failed, so no browser to test the report in:\n${stderr}`,
      {
        cause: err,
      },
    );
  }
}

const SETTINGS: ConfigurationSettings = {
  blooms: true,
  falsePositiveRate: 0.01,
  layout: "exact",
  ngramLength: 0,
  ngramSkip: 0,
  tokens: ["key", "key=value", "prefixed"],
  chunkTargetBytes: 1_572_864,
  chunkBlockBytes: 262_144,
};

/** Plausible figures: pruning falls and blooms shrink as the rate grows; scalable is bigger. */
function row(configuration: string, settings: ConfigurationSettings, query: string): ResultRow {
  // The scalable filter's effective rate runs a little above its target.
  const fp = settings.blooms
    ? settings.falsePositiveRate * (settings.layout === "scalable" ? 1.25 : 1)
    : 0;
  const absent = query.includes("absent");
  const inRange = absent ? 480 : 48;
  const pruned = settings.blooms ? Math.round(inRange * (absent ? 1 - fp * 1.3 : 0.92 - fp)) : 0;
  const falsePositives = settings.blooms ? Math.round(inRange * fp * (absent ? 1.3 : 0.8)) : 0;
  const chunkBytes = 52_428_800;
  const scalable = settings.layout === "scalable" ? 1.45 : 1;
  const bloomBytes = settings.blooms
    ? Math.round(chunkBytes * 0.0021 * -Math.log(fp) * scalable)
    : 0;
  const ingest = settings.blooms ? 11 + 0.9 * -Math.log(fp) * scalable : 10;
  return {
    dataset: "app-logs",
    configuration,
    settings,
    query,
    example: `{service="checkout"} | trace_id="${absent ? "0000dead0000beef" : "7f3a9c21e4b0d5a6"}"`,
    queries: 20,
    chunksInRange: inRange,
    chunksPruned: pruned,
    chunksFetched: inRange - pruned,
    falsePositiveChunks: falsePositives,
    observedFalsePositiveRate: settings.blooms ? falsePositives / (falsePositives + pruned) : null,
    bytesFetched: (inRange - pruned) * 190_000,
    prunedShare: pruned / inRange,
    chunkBytes,
    bloomBytes,
    bloomRatio: bloomBytes / chunkBytes,
    ingestSeconds: ingest,
    ingestCostRatio: ingest / 10,
    cold: { p50: 25 + (inRange - pruned) * 1.5, p99: 60 + (inRange - pruned) * 3, samples: 20 },
    warm: { p50: 4 + (inRange - pruned) * 0.4, p99: 12 + (inRange - pruned), samples: 20 },
    correct: true,
  };
}

function fixture(): ExperimentResults {
  const fprs = [0.001, 0.005, 0.01, 0.05, 0.1];
  const queries = ["needle-present-narrow", "needle-absent-wide"];
  const configs: [string, ConfigurationSettings][] = [
    ["baseline", { ...SETTINGS, blooms: false }],
    ...(["exact", "scalable"] as const).flatMap((layout) =>
      fprs.map((fp): [string, ConfigurationSettings] => [
        `fp=${fp} ${layout}`,
        { ...SETTINGS, falsePositiveRate: fp, layout },
      ]),
    ),
  ];
  return {
    spec: { name: "fp-sweep" },
    specText: `name: fp-sweep\n# <script>alert("not run")</script>\nconfigurations:\n  falsePositiveRate: [0.001, 0.005, 0.01, 0.05, 0.1]\n  filterLayout: [exact, scalable]\n`,
    quick: true,
    startedAt: "2025-01-02T03:04:05.000Z",
    finishedAt: "2025-01-02T03:07:35.000Z",
    interrupted: true,
    environment: {
      sieveVersion: "0.1.0",
      gitRevision: "f3b5c8e",
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      cpuModel: "Test CPU @ 2.0GHz",
      cpus: 2,
      memoryBytes: 8 * 1024 ** 3,
      loadStart: 0.4,
      loadEnd: 1.3,
    },
    datasets: [
      { name: "app-logs", kind: "generated", streams: 50, lines: 200_000, rawBytes: 31_457_280 },
    ],
    rows: configs.flatMap(([name, settings]) => queries.map((q) => row(name, settings, q))),
  };
}

describe("report.html in Chromium", () => {
  let browser: Browser | undefined;
  afterAll(async () => {
    await browser?.close();
  });

  it("renders with no errors and shows every plot", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sieve-report-"));
    const file = join(dir, "report.html");
    await writeFile(file, await renderReport(fixture()));

    browser = await chromium.launch({
      executablePath: await chromiumPath(),
      args: ["--no-sandbox"],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    // A self-contained page asks for nothing; any request but the file itself is a bug.
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));

    await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
    const svgs = await page.locator("svg").all();
    expect(svgs).toHaveLength(PLOTS);
    for (const svg of svgs) {
      const box = await svg.boundingBox(); // null when not laid out
      expect(box?.width ?? 0).toBeGreaterThan(0);
      expect(box?.height ?? 0).toBeGreaterThan(0);
    }
    expect(await page.locator(".banner.interrupted").isVisible()).toBe(true);
    expect(await page.locator("pre").innerText()).toContain('<script>alert("not run")</script>');

    const screenshot = join(dir, "report.png");
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`report screenshot: ${screenshot} (page: ${file})`);

    expect(errors).toEqual([]);
    expect(requests).toEqual([pathToFileURL(file).href]);
  });
});
