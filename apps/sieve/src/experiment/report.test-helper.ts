// Hand-built experiment results for the report's tests: a blooms-off baseline and every
// fp × layout over two query shapes, with plausible figures (pruning falls and blooms shrink
// as the rate grows; the scalable layout is bigger).
import type { ConfigurationSettings, ExperimentResults, ResultRow } from "./results.js";

export const FPRS = [0.001, 0.01, 0.05, 0.1];
export const LAYOUTS = ["exact", "scalable"] as const;
export const QUERIES = ["needle-present-narrow", "needle-absent-wide"] as const;

export const SPEC_TEXT = `name: fp-sweep
# a comment with <script>alert("x")</script> & friends
datasets:
  - name: app-logs
    generated: { streams: 50, lines: 100000 }
`;

export const BASE_SETTINGS: ConfigurationSettings = {
  blooms: true,
  falsePositiveRate: 0.01,
  layout: "exact",
  ngramLength: 0,
  ngramSkip: 0,
  tokens: ["key", "key=value", "prefixed"],
  chunkTargetBytes: 1_572_864,
  chunkBlockBytes: 262_144,
};

export function row(
  configuration: string,
  settings: ConfigurationSettings,
  query: string,
): ResultRow {
  const fp = settings.blooms ? settings.falsePositiveRate : 0;
  const absent = query.includes("absent");
  const inRange = absent ? 400 : 40;
  const pruned = settings.blooms ? Math.round(inRange * (absent ? 1 - fp * 1.2 : 0.9 - fp)) : 0;
  const falsePositives = settings.blooms ? Math.round(inRange * fp * 1.1) : 0;
  const chunkBytes = 50_000_000;
  const bloomBytes = settings.blooms
    ? Math.round(chunkBytes * 0.002 * -Math.log(fp) * (settings.layout === "scalable" ? 1.4 : 1))
    : 0;
  return {
    dataset: "app-logs",
    configuration,
    settings,
    query,
    example: `{app="checkout"} | trace_id="${absent ? "deadbeef" : "a1b2c3"}"`,
    queries: 20,
    chunksInRange: inRange,
    chunksPruned: pruned,
    chunksFetched: inRange - pruned,
    falsePositiveChunks: falsePositives,
    observedFalsePositiveRate: settings.blooms ? falsePositives / (falsePositives + pruned) : null,
    bytesFetched: (inRange - pruned) * 180_000,
    prunedShare: pruned / inRange,
    chunkBytes,
    bloomBytes,
    bloomRatio: bloomBytes / chunkBytes,
    ingestSeconds: settings.blooms ? 12 + 4 * -Math.log10(fp) : 10,
    ingestCostRatio: settings.blooms ? (12 + 4 * -Math.log10(fp)) / 10 : 1,
    cold: {
      p50: settings.blooms ? 30 + 100 * fp : 90,
      p99: settings.blooms ? 80 : 200,
      samples: 20,
    },
    warm: { p50: settings.blooms ? 5 + 20 * fp : 25, p99: settings.blooms ? 12 : 60, samples: 20 },
    correct: true,
  };
}

/** Blooms-off baseline, then every fp × layout, each with every query shape. */
export function fixture(overrides: Partial<ExperimentResults> = {}): ExperimentResults {
  const configs: [string, ConfigurationSettings][] = [
    ["baseline", { ...BASE_SETTINGS, blooms: false }],
    ...LAYOUTS.flatMap((layout) =>
      FPRS.map((fp): [string, ConfigurationSettings] => [
        `fp-sweep fp=${fp} layout=${layout}`,
        { ...BASE_SETTINGS, falsePositiveRate: fp, layout },
      ]),
    ),
  ];
  return {
    spec: { name: "fp-sweep" },
    specText: SPEC_TEXT,
    quick: true,
    startedAt: "2025-01-02T03:04:05.000Z",
    finishedAt: "2025-01-02T03:07:35.000Z",
    interrupted: false,
    environment: {
      sieveVersion: "0.1.0",
      gitRevision: "f3b5c8e",
      node: "v22.11.0",
      platform: "linux x64",
      cpuModel: "Test CPU @ 2.0GHz",
      cpus: 2,
      memoryBytes: 8 * 1024 ** 3,
      loadStart: 0.5,
      loadEnd: 1.25,
    },
    datasets: [
      { name: "app-logs", kind: "generated", streams: 50, lines: 100_000, rawBytes: 12_345_678 },
    ],
    rows: configs.flatMap(([name, settings]) => QUERIES.map((q) => row(name, settings, q))),
    ...overrides,
  };
}
