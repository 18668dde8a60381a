// `sieve experiment run` as a user runs it: the built command as a child process, a tiny
// spec, and every figure checked against what the test counts itself.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SIEVE_MAIN, scratchDir } from "../sieve.test-helper.js";
import type { ExperimentResults } from "./results.js";

const SPEC = `
name: tiny
datasets:
  - name: shop
    generated:
      streams: 6
      lines: 6000
      span: 30m
      fields:
        - { name: trace_id, linesPerValue: 5, inLine: true }
configurations:
  - { falsePositiveRate: 0.2, chunkTargetBytes: 16384, chunkBlockBytes: 4096 }
  # Loki 3.0's blooms: line n-grams, no metadata tokens.
  - falsePositiveRate: 0.2
    ngrams: [{ length: 4, skip: 0 }]
    tokens: [[prefixed]]
    chunkTargetBytes: 16384
    chunkBlockBytes: 4096
queries:
  repetitions: 2
  shapes:
    - { name: present-wide, fields: [trace_id], selector: wide }
    - { name: absent-wide, fields: [trace_id], values: absent, selector: wide }
    - { name: line-narrow, fields: [trace_id], filter: line, selector: narrow }
`;

interface Run {
  code: number | null;
  stderr: string;
}

/** Runs `sieve experiment <args>`; `onStderr` sees its output as it comes. */
async function experiment(
  args: string[],
  onStderr?: (text: string, kill: () => void) => void,
): Promise<Run> {
  const child = spawn(process.execPath, [SIEVE_MAIN, "experiment", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (data: Buffer) => {
    stderr += data.toString();
    onStderr?.(stderr, () => child.kill("SIGINT"));
  });
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stderr };
}

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

// Three configurations, each with 6 cold queries in a freshly started sieve all (about 1 s
// each): 25-45 s here with the suite running beside it.
describe("sieve experiment run", { timeout: 180_000 }, () => {
  it("runs every configuration on the real path and reports figures that add up", async () => {
    const dir = scratchDir("experiment-");
    writeFileSync(join(dir, "tiny.yaml"), SPEC);
    const out = join(dir, "out");
    const run = await experiment(["run", join(dir, "tiny.yaml"), "--out", out, "--keep-data"]);
    expect(run.code, run.stderr).toBe(0);
    const results = JSON.parse(
      readFileSync(join(out, "results.json"), "utf8"),
    ) as ExperimentResults;
    expect(results.interrupted).toBe(false);
    expect(results.datasets).toMatchObject([
      { name: "shop", kind: "generated", streams: 6, lines: 6000 },
    ]);
    const configurations = ["blooms-off", "fp0.2-ribbon", "fp0.2-ribbon-ngram4s0-tokens-p"];
    expect([...new Set(results.rows.map((r) => r.configuration))]).toEqual(configurations);
    expect(results.rows).toHaveLength(9);

    for (const name of configurations) {
      // What the store holds, counted here: every chunk object, every bloom block.
      const store = files(join(out, "work", "shop", name, "data", "store"));
      const chunks = store.filter((f) => f.includes("/chunks/"));
      const chunkBytes = chunks.reduce((n, f) => n + statSync(f).size, 0);
      const bloomBytes = store
        .filter((f) => f.includes("/blooms/"))
        .reduce((n, f) => n + statSync(f).size, 0);
      expect(chunks.length).toBeGreaterThan(6);
      const rows = results.rows.filter((r) => r.configuration === name);
      for (const r of rows) {
        expect(r.correct).toBe(true);
        expect(r.chunkBytes).toBe(chunkBytes);
        expect(r.bloomBytes).toBe(bloomBytes);
        expect(r.queries).toBe(2);
        expect(r.chunksPruned + r.chunksFetched).toBe(r.chunksInRange);
        expect(r.cold.samples).toBe(2);
        expect(r.warm.samples).toBe(2);
      }
      const wide = rows.filter((r) => r.query !== "line-narrow");
      // A wide selector over the whole range has every chunk in range, in each query.
      for (const r of wide) expect(r.chunksInRange).toBe(2 * chunks.length);
      const absent = rows.find((r) => r.query === "absent-wide")!;
      if (name === "blooms-off") {
        expect(absent.falsePositiveChunks).toBe(0);
        expect(bloomBytes).toBe(0);
        for (const r of rows) {
          expect(r.chunksPruned).toBe(0);
          expect(r.observedFalsePositiveRate).toBeNull();
        }
      } else if (name.includes("ngram")) {
        // Blooms without metadata tokens cannot prune a metadata test, nor count a false
        // positive for one: they did not test it.
        for (const r of wide) {
          expect(r.chunksPruned).toBe(0);
          expect(r.falsePositiveChunks).toBe(0);
        }
      } else {
        // No line holds an absent value: every chunk the blooms kept is a false positive.
        expect(absent.falsePositiveChunks).toBe(absent.chunksFetched);
        // Blooms at fp 0.2 prune most of the chunks without the needle, not all.
        expect(absent.chunksPruned).toBeGreaterThan(absent.chunksInRange / 2);
        expect(absent.observedFalsePositiveRate).toBe(
          absent.falsePositiveChunks / (absent.falsePositiveChunks + absent.chunksPruned),
        );
      }
      const line = rows.find((r) => r.query === "line-narrow")!;
      // Only n-gram blooms prune a line filter.
      if (name.includes("ngram")) expect(line.chunksPruned).toBeGreaterThan(0);
      else expect(line.chunksPruned).toBe(0);
    }
    const metadataBloom = results.rows.find((r) => r.configuration === "fp0.2-ribbon")!.bloomBytes;
    const ngramBloom = results.rows.find((r) => r.configuration === configurations[2])!.bloomBytes;
    expect(ngramBloom).toBeGreaterThan(metadataBloom * 5);

    const csv = readFileSync(join(out, "results.csv"), "utf8").trimEnd().split("\r\n");
    expect(csv).toHaveLength(10);
    expect(csv[0]).toMatch(/^dataset,configuration,blooms,/);
    const html = readFileSync(join(out, "report.html"), "utf8");
    expect(html.match(/<svg/g)?.length).toBeGreaterThanOrEqual(5);
    expect(html).toContain(configurations[2]);
    expect(readFileSync(join(out, "work", "shop", "blooms-off", "sieve.yaml"), "utf8")).toContain(
      "bloomsEnabled: false",
    );
  });

  it("stops on Ctrl-C and keeps the configurations that finished", async () => {
    const dir = scratchDir("experiment-");
    writeFileSync(join(dir, "tiny.yaml"), SPEC);
    const out = join(dir, "out");
    let sent = false;
    const run = await experiment(["run", join(dir, "tiny.yaml"), "--out", out], (text, kill) => {
      if (!sent && text.includes("shop/blooms-off:")) {
        sent = true;
        kill();
      }
    });
    expect(run.code, run.stderr).toBe(130);
    expect(run.stderr).toContain("stopping after this step");
    const results = JSON.parse(
      readFileSync(join(out, "results.json"), "utf8"),
    ) as ExperimentResults;
    expect(results.interrupted).toBe(true);
    expect(new Set(results.rows.map((r) => r.configuration))).toEqual(new Set(["blooms-off"]));
    expect(readFileSync(join(out, "report.html"), "utf8")).toContain("nterrupted");
  });

  it.each([
    [
      "a bad key",
      SPEC.replace("repetitions: 2", "repetitons: 2"),
      "queries.repetitons: unknown key",
    ],
    [
      "an unknown field",
      SPEC.replace("fields: [trace_id], values", "fields: [span_id], values"),
      "no field span_id",
    ],
  ])("refuses a spec with %s before running anything (exit 2)", async (_what, text, message) => {
    const dir = scratchDir("experiment-");
    writeFileSync(join(dir, "bad.yaml"), text);
    const run = await experiment(["run", join(dir, "bad.yaml"), "--out", join(dir, "out")]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(readdirSync(dir)).toEqual(["bad.yaml"]);
  });
});
