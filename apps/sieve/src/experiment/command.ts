/**
 * `sieve experiment run SPEC.yaml --out DIR [--quick] [--keep-data]`: runs a chunk-pruning
 * experiment (docs/experiments.md) and writes `results.json`, `results.csv` and
 * `report.html` to DIR. Ctrl-C stops after the step in progress and keeps every
 * configuration that finished; a second Ctrl-C exits at once.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { SingleBar } from "cli-progress";
import { openDataset, type Dataset } from "./datasets.js";
import { renderReport } from "./report.js";
import type { ExperimentResults, ResultRow, RunEnvironment } from "./results.js";
import { runDataset, type Progress } from "./runner.js";
import { SpecError, parseSpec, quickSpec } from "./spec.js";

export const EXPERIMENT_USAGE = `Usage: sieve experiment run SPEC.yaml --out DIR [--quick] [--keep-data]

Runs every configuration of SPEC (docs/experiments.md) on the real path in this process
and writes DIR/results.json, DIR/results.csv and DIR/report.html.

  --out DIR      where the results go (created)
  --quick        every dataset a tenth, at most 3 repetitions a query shape
  --keep-data    keep each configuration's data directory under DIR/work
`;

/** Lines sampled per dataset for present needles. */
const SAMPLE_LINES = 2000;

/** Runs `sieve experiment ...`; returns the exit code. */
export async function experimentCommand(argv: readonly string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        out: { type: "string" },
        quick: { type: "boolean" },
        "keep-data": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    process.stderr.write(`sieve experiment: ${(error as Error).message}\n\n${EXPERIMENT_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    process.stdout.write(EXPERIMENT_USAGE);
    return 0;
  }
  if (positionals[0] !== "run" || positionals.length !== 2 || values.out === undefined) {
    process.stderr.write(
      `sieve experiment: expected run SPEC.yaml --out DIR\n\n${EXPERIMENT_USAGE}`,
    );
    return 2;
  }
  const specFile = resolve(positionals[1]!);
  const out = resolve(values.out);
  let specText: string;
  try {
    specText = await readFile(specFile, "utf8");
  } catch (error) {
    process.stderr.write(`sieve experiment: ${(error as Error).message}\n`);
    return 1;
  }
  // An object, not a boolean: the signal handler sets it while the run awaits.
  const stop = { requested: false };
  const onSigint = (): void => {
    if (stop.requested) process.exit(130);
    stop.requested = true;
    process.stderr.write(
      "\nsieve experiment: stopping after this step (Ctrl-C again to quit now)\n",
    );
  };
  process.on("SIGINT", onSigint);
  try {
    const parsedSpec = parseSpec(specText);
    const spec = values.quick === true ? quickSpec(parsedSpec) : parsedSpec;
    await mkdir(out, { recursive: true });
    const startedAt = new Date();
    const loadStart = loadavg()[0]!;
    const rows: ResultRow[] = [];
    const datasets: Dataset[] = [];
    const write = async (interrupted: boolean): Promise<void> => {
      const results: ExperimentResults = {
        spec,
        specText,
        quick: values.quick === true,
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        interrupted,
        environment: environment(loadStart),
        datasets: datasets.map((d) => d.summary),
        rows,
      };
      await writeFile(join(out, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
      await writeFile(join(out, "results.csv"), toCsv(rows));
      await writeFile(join(out, "report.html"), await renderReport(results));
    };
    const progress = progressReporter();
    for (const d of spec.datasets) {
      if (stop.requested) break;
      process.stderr.write(`dataset ${d.name}: reading\n`);
      const dataset = await openDataset(d, {
        specDir: dirname(specFile),
        nowMs: startedAt.getTime(),
        sampleSize: SAMPLE_LINES,
        replayFraction: values.quick === true ? 0.1 : 1,
      });
      datasets.push(dataset);
      const s = dataset.summary;
      process.stderr.write(
        `dataset ${d.name}: ${s.lines} lines, ${(s.rawBytes / 1e6).toFixed(1)} MB, ${s.streams} streams\n`,
      );
      await runDataset(
        spec,
        dataset,
        {
          workDir: join(out, "work"),
          progress,
          stopped: () => stop.requested,
          keepData: values["keep-data"] === true,
        },
        (row) => rows.push(row),
      );
    }
    await write(stop.requested);
    process.stderr.write(
      `${stop.requested ? "stopped: kept what finished in" : "done:"} ${join(out, "report.html")}\n`,
    );
    return stop.requested ? 130 : 0;
  } catch (error) {
    if (error instanceof SpecError) {
      process.stderr.write(`sieve experiment: ${specFile}: ${error.message}\n`);
      return 2;
    }
    process.stderr.write(`sieve experiment: ${(error as Error).message}\n`);
    return 1;
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/**
 * A progress bar with ETA per configuration on a terminal; a line per configuration
 * otherwise (a log, CI).
 */
function progressReporter(): Progress {
  const tty = process.stderr.isTTY;
  let bar: SingleBar | undefined;
  let name = "";
  // Seconds per phase (the time up to each step goes to that step's phase), for the log line.
  let phases = new Map<string, number>();
  let last = 0;
  return {
    begin(configuration, steps) {
      name = configuration;
      phases = new Map();
      last = performance.now();
      if (!tty) return;
      bar = new SingleBar({
        format: `${configuration.padEnd(40)} [{bar}] {percentage}% | ETA {eta_formatted} | {phase}`,
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 50,
      });
      bar.start(steps, 0, { phase: "starting" });
    },
    step(phase, n = 1) {
      const now = performance.now();
      phases.set(phase, (phases.get(phase) ?? 0) + (now - last) / 1000);
      last = now;
      bar?.increment(n, { phase });
    },
    end() {
      bar?.stop();
      bar = undefined;
      const total = [...phases.values()].reduce((a, b) => a + b, 0);
      const parts = [...phases].map(([phase, s]) => `${phase} ${s.toFixed(1)} s`).join(", ");
      process.stderr.write(`${name}: ${total.toFixed(1)} s (${parts})\n`);
    },
  };
}

function environment(loadStart: number): RunEnvironment {
  const here = dirname(fileURLToPath(import.meta.url));
  const pkg = JSON.parse(readFileSync(join(here, "../../package.json"), "utf8")) as {
    version: string;
  };
  let gitRevision: string | undefined;
  try {
    gitRevision = execFileSync("git", ["describe", "--always", "--dirty"], {
      cwd: here,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    // not a checkout
  }
  return {
    sieveVersion: pkg.version,
    ...(gitRevision !== undefined && { gitRevision }),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpuModel: cpus()[0]?.model ?? "unknown",
    cpus: cpus().length,
    memoryBytes: totalmem(),
    loadStart,
    loadEnd: loadavg()[0]!,
  };
}

const CSV_COLUMNS: [string, (r: ResultRow) => string | number | boolean | null][] = [
  ["dataset", (r) => r.dataset],
  ["configuration", (r) => r.configuration],
  ["blooms", (r) => r.settings.blooms],
  ["falsePositiveRate", (r) => r.settings.falsePositiveRate],
  ["layout", (r) => r.settings.layout],
  ["ngramLength", (r) => r.settings.ngramLength],
  ["ngramSkip", (r) => r.settings.ngramSkip],
  ["tokens", (r) => r.settings.tokens.join(" ")],
  ["chunkTargetBytes", (r) => r.settings.chunkTargetBytes],
  ["chunkBlockBytes", (r) => r.settings.chunkBlockBytes],
  ["query", (r) => r.query],
  ["queries", (r) => r.queries],
  ["chunksInRange", (r) => r.chunksInRange],
  ["chunksPruned", (r) => r.chunksPruned],
  ["chunksFetched", (r) => r.chunksFetched],
  ["falsePositiveChunks", (r) => r.falsePositiveChunks],
  ["observedFalsePositiveRate", (r) => r.observedFalsePositiveRate],
  ["bytesFetched", (r) => r.bytesFetched],
  ["prunedShare", (r) => r.prunedShare],
  ["chunkBytes", (r) => r.chunkBytes],
  ["bloomBytes", (r) => r.bloomBytes],
  ["bloomRatio", (r) => r.bloomRatio],
  ["ingestSeconds", (r) => r.ingestSeconds],
  ["ingestCostRatio", (r) => r.ingestCostRatio],
  ["coldP50Ms", (r) => r.cold.p50],
  ["coldP99Ms", (r) => r.cold.p99],
  ["warmP50Ms", (r) => r.warm.p50],
  ["warmP99Ms", (r) => r.warm.p99],
  ["correct", (r) => r.correct],
  ["example", (r) => r.example],
];

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
function csvField(v: string | number | boolean | null): string {
  const s = v === null ? "" : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** One row per configuration × query shape, every figure. */
export function toCsv(rows: readonly ResultRow[]): string {
  const lines = [CSV_COLUMNS.map(([name]) => name).join(",")];
  for (const r of rows) lines.push(CSV_COLUMNS.map(([, get]) => csvField(get(r))).join(","));
  return `${lines.join("\r\n")}\r\n`;
}
