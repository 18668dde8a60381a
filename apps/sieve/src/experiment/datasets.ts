/**
 * An experiment's datasets: generated (deterministic by seed) or replayed from a file, as
 * entries in push order, read as many times as there are configurations. A first pass
 * counts them and keeps a uniform sample of lines (reservoir sampling) whose field values
 * are the present needles.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { isAbsolute, join } from "node:path";
import { createInterface } from "node:readline";
import { mulberry32 } from "@sieve/kit";
import { labelsFromObject, labelsString, parseLabels } from "@sieve/labels";
import type { DatasetSummary } from "./results.js";
import { SpecError, type DatasetSpec, type GeneratedSpec, type ReplaySpec } from "./spec.js";

/** One line as pushed. */
export interface LogEntry {
  /** The stream's labels, canonical: `{a="b", c="d"}`. */
  readonly stream: string;
  readonly ts: bigint;
  readonly line: string;
  readonly metadata: readonly { readonly name: string; readonly value: string }[];
}

/** A sampled line: its stream and its fields' values. */
export interface SampledLine {
  readonly stream: string;
  readonly values: Readonly<Record<string, string>>;
}

export interface Dataset {
  readonly summary: DatasetSummary;
  /** Range of the entries, [startNs, endNs). */
  readonly startNs: bigint;
  readonly endNs: bigint;
  /** A selector every stream matches. */
  readonly wideSelector: string;
  readonly sample: readonly SampledLine[];
  /** The same entries, in the same order, on every call. */
  readonly entries: () => AsyncIterable<LogEntry> | Iterable<LogEntry>;
  /** A value of `field` that no entry holds, the `i`th of an endless deterministic list. */
  absentValue(field: string, i: number): string;
}

export interface DatasetOptions {
  /** Where relative replay paths start. */
  readonly specDir: string;
  /** The run's start: generated lines end here, rebased replays too. */
  readonly nowMs: number;
  /** Lines kept in the sample. */
  readonly sampleSize: number;
  /** Keep only the first `fraction` of a replayed file (`--quick`). */
  readonly replayFraction: number;
}

/** Opens a dataset and makes its first pass (counts and sample). */
export async function openDataset(spec: DatasetSpec, options: DatasetOptions): Promise<Dataset> {
  const nowNs = BigInt(options.nowMs) * 1_000_000n;
  const source =
    "generated" in spec
      ? generatedSource(spec.generated, nowNs)
      : await replaySource(spec.replay, options, nowNs);
  const rng = mulberry32(0x5eed);
  const sample: SampledLine[] = [];
  const streams = new Set<string>();
  let lines = 0;
  let rawBytes = 0;
  let start: bigint | undefined;
  let end = 0n;
  for await (const e of source.entries()) {
    lines++;
    rawBytes += Buffer.byteLength(e.line);
    streams.add(e.stream);
    if (start === undefined || e.ts < start) start = e.ts;
    if (e.ts > end) end = e.ts;
    if (e.metadata.length === 0) continue;
    const picked = {
      stream: e.stream,
      values: Object.fromEntries(e.metadata.map((m) => [m.name, m.value])),
    };
    // Reservoir sampling (Algorithm R) over lines with metadata.
    if (sample.length < options.sampleSize) sample.push(picked);
    else {
      const j = Math.floor(rng() * lines);
      if (j < options.sampleSize) sample[j] = picked;
    }
  }
  if (lines === 0) throw new SpecError(`datasets ${spec.name}`, "holds no lines");
  const absentLength = new Map<string, number>();
  return {
    summary: {
      name: spec.name,
      kind: "generated" in spec ? "generated" : "replay",
      streams: streams.size,
      lines,
      rawBytes,
    },
    startNs: start!,
    endNs: end + 1n,
    wideSelector: source.wideSelector(streams),
    sample,
    entries: source.entries,
    absentValue(field, i) {
      let length = absentLength.get(field);
      if (length === undefined) {
        length = sample.find((s) => s.values[field] !== undefined)?.values[field]?.length ?? 16;
        absentLength.set(field, length);
      }
      return hexValue(`absent:${spec.name}:${field}:${i}`, Math.max(8, Math.min(64, length)));
    },
  };
}

interface Source {
  readonly entries: () => AsyncIterable<LogEntry> | Iterable<LogEntry>;
  readonly wideSelector: (streams: ReadonlySet<string>) => string;
}

/** A hex string of `length` from a hash of `key`: values that repeat across runs. */
function hexValue(key: string, length: number): string {
  let out = "";
  for (let i = 0; out.length < length; i++) {
    out += createHash("sha256").update(`${i}:${key}`).digest("hex");
  }
  return out.slice(0, length);
}

const WORDS = (
  "request served user cart checkout payment order item stock cache miss hit retry " +
  "timeout upstream downstream connection pool query index shard replica leader batch " +
  "queue consumer producer commit offset session token refresh login logout render page"
).split(" ");
const LEVELS = ["info", "info", "info", "info", "debug", "warn", "error"];
const PATHS = ["/api/cart", "/api/checkout", "/api/items", "/api/users", "/health", "/api/orders"];

/** Generated lines: see {@link GeneratedSpec}; the same seed gives the same entries. */
function generatedSource(g: GeneratedSpec, nowNs: bigint): Source {
  const streams = Array.from({ length: g.streams }, (_, k) =>
    labelsString(
      labelsFromObject({ env: "experiment", service: `svc-${k % 10}`, pod: `pod-${k}` }),
    ),
  );
  // Cumulative Zipf weights: stream k gets 1/(k+1)^s of the lines.
  const cumulative: number[] = [];
  let total = 0;
  for (let k = 0; k < g.streams; k++) {
    total += 1 / Math.pow(k + 1, g.zipf);
    cumulative.push(total);
  }
  const spanNs = BigInt(Math.round(g.spanSeconds * 1e9));
  const startNs = nowNs - spanNs;
  const valueCache = new Map<string, string>();
  const valueOf = (field: string, i: number): string => {
    const key = `${g.seed}:${field}:${i}`;
    let v = valueCache.get(key);
    if (v === undefined) {
      v = hexValue(key, 16);
      if (valueCache.size > 100_000) valueCache.clear();
      valueCache.set(key, v);
    }
    return v;
  };
  function* entries(): Generator<LogEntry> {
    const rng = mulberry32(g.seed);
    // Per stream and field: the value being repeated and how many lines it has left.
    const runs = streams.map(() => g.fields.map(() => ({ value: "", left: 0 })));
    const fresh = g.fields.map(() => 0);
    for (let n = 0; n < g.lines; n++) {
      const r = rng() * total;
      let lo = 0;
      let hi = g.streams - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (cumulative[mid]! < r) lo = mid + 1;
        else hi = mid;
      }
      const k = lo;
      const metadata = g.fields.map((f, j) => {
        const run = runs[k]![j]!;
        if (run.left === 0) {
          const i = f.cardinality > 0 ? Math.floor(rng() * f.cardinality) : fresh[j]!++;
          run.value = valueOf(f.name, i);
          run.left = f.linesPerValue;
        }
        run.left--;
        return { name: f.name, value: run.value };
      });
      const ts = startNs + (spanNs * BigInt(n)) / BigInt(g.lines);
      yield { stream: streams[k]!, ts, line: makeLine(g, rng, k, metadata), metadata };
    }
  }
  return { entries, wideSelector: () => `{env="experiment"}` };
}

function makeLine(
  g: GeneratedSpec,
  rng: () => number,
  stream: number,
  metadata: readonly { name: string; value: string }[],
): string {
  const level = LEVELS[Math.floor(rng() * LEVELS.length)]!;
  const path = PATHS[Math.floor(rng() * PATHS.length)]!;
  const status = rng() < 0.95 ? 200 : 500;
  const ms = Math.floor(rng() * 900) + 1;
  const target = Math.round(g.lineBytes * (0.75 + rng() * 0.5));
  const inLine = g.fields.flatMap((f, j) => (f.inLine ? [[f.name, metadata[j]!.value]] : []));
  let msg = "";
  const words = (budget: number): string => {
    let out = "";
    while (out.length < budget)
      out += (out === "" ? "" : " ") + WORDS[Math.floor(rng() * WORDS.length)]!;
    return out;
  };
  switch (g.lineShape) {
    case "json": {
      const base = { level, svc: `svc-${stream % 10}`, path, status, duration_ms: ms, msg: "" };
      const head = JSON.stringify({ ...base, ...Object.fromEntries(inLine) });
      msg = words(Math.max(8, target - head.length));
      return JSON.stringify({ ...base, msg, ...Object.fromEntries(inLine) });
    }
    case "plain": {
      const head = `${level.toUpperCase()} [svc-${stream % 10}] ${path} ${status} ${ms}ms ${inLine.map(([k, v]) => `${k}=${v}`).join(" ")}`;
      return `${head} ${words(Math.max(8, target - head.length))}`;
    }
    case "logfmt": {
      const head = `level=${level} svc=svc-${stream % 10} path=${path} status=${status} duration=${ms}ms${inLine.map(([k, v]) => ` ${k}=${v}`).join("")}`;
      return `${head} msg="${words(Math.max(8, target - head.length - 7))}"`;
    }
  }
}

/** A replayed file: see {@link ReplaySpec}. */
async function replaySource(
  r: ReplaySpec,
  options: DatasetOptions,
  nowNs: bigint,
): Promise<Source> {
  const file = isAbsolute(r.file) ? r.file : join(options.specDir, r.file);
  const fields = new Set(r.fields);
  const base = parseSelectorLabels(r.labels);
  // One pass to count lines (for --quick) and find the newest timestamp (for rebase).
  let count = 0;
  let newest: bigint | undefined;
  for await (const e of readReplay(file, r.format, fields, base, nowNs)) {
    count++;
    if (newest === undefined || e.ts > newest) newest = e.ts;
  }
  const keep = Math.max(1, Math.ceil(count * options.replayFraction));
  const shift = r.timestamps === "rebase" && newest !== undefined ? nowNs - newest : 0n;
  async function* entries(): AsyncGenerator<LogEntry> {
    let n = 0;
    for await (const e of readReplay(file, r.format, fields, base, nowNs)) {
      if (n++ >= keep) return;
      yield shift === 0n ? e : { ...e, ts: e.ts + shift };
    }
  }
  return { entries, wideSelector: (streams) => wideSelectorOf(streams) };
}

/**
 * A selector every stream matches: the first label name all streams have, matched by
 * `=~".+"`.
 */
function wideSelectorOf(streams: ReadonlySet<string>): string {
  let common: Set<string> | undefined;
  for (const s of streams) {
    const names = new Set(parseLabels(s).map((l) => l.name));
    common = common === undefined ? names : new Set([...common].filter((n) => names.has(n)));
  }
  const name = [...(common ?? [])].sort()[0];
  if (name === undefined) throw new SpecError("replay", "the streams share no label name");
  return `{${name}=~".+"}`;
}

/** The labels of a `{a="b"}` selector as an object. */
function parseSelectorLabels(selector: string): Record<string, string> {
  try {
    return Object.fromEntries(parseLabels(selector).map((l) => [l.name, l.value]));
  } catch (error) {
    throw new SpecError(
      "replay.labels",
      `${JSON.stringify(selector)}: ${(error as Error).message}`,
    );
  }
}

/** The canonical stream of `labels` over `base` (a label in both keeps the line's value). */
function streamOf(base: Readonly<Record<string, string>>, labels: Record<string, string>): string {
  return labelsString(labelsFromObject({ ...base, ...labels }));
}

const RFC3339 = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/;

/** An RFC 3339 time with up to nanoseconds (Go's RFC3339Nano, as logcli prints it), in ns. */
export function parseRfc3339Nano(text: string): bigint {
  const m = RFC3339.exec(text);
  const ms = m === null ? NaN : Date.parse(`${m[1]}${m[3]}`);
  if (m === null || Number.isNaN(ms))
    throw new Error(`not an RFC 3339 time: ${JSON.stringify(text)}`);
  return BigInt(ms) * 1_000_000n + BigInt((m[2] ?? "").padEnd(9, "0"));
}

/** A line-numbered reading error: which file, which line, what is wrong. */
function lineError(file: string, n: number, message: string): SpecError {
  return new SpecError(`${file}:${n}`, message);
}

/**
 * The entries of a replay file. `logcli query --output=jsonl` writes one
 * `{"labels":{...},"line":"...","timestamp":"<RFC 3339>"}` per line, its labels the stream's
 * and the structured metadata's together: the names in `fields` are taken as metadata, the
 * rest as the stream. logcli leaves out the labels every stream of its answer shares
 * (it prints them to stderr as "Common labels"): `base` (the spec's `labels`) puts them
 * back. A Loki push JSON file holds push bodies (`{"streams":[...]}`), one per line or one
 * in the whole file. A `lines` file is plain lines of the stream `base`, stamped 1 ms
 * apart ending now.
 */
export async function* readReplay(
  file: string,
  format: ReplaySpec["format"],
  fields: ReadonlySet<string>,
  base: Readonly<Record<string, string>>,
  nowNs: bigint,
): AsyncGenerator<LogEntry> {
  if (format === "loki-push-json") {
    yield* readPushJson(file, base);
    return;
  }
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  let n = 0;
  if (format === "lines") {
    const all: string[] = [];
    for await (const line of lines) if (line !== "") all.push(line);
    for (const [i, line] of all.entries()) {
      const ts = nowNs - BigInt(all.length - i) * 1_000_000n;
      yield { stream: streamOf(base, {}), ts, line, metadata: [] };
    }
    return;
  }
  for await (const text of lines) {
    n++;
    if (text.trim() === "") continue;
    let doc: { labels?: unknown; line?: unknown; timestamp?: unknown };
    try {
      doc = JSON.parse(text) as typeof doc;
    } catch {
      throw lineError(file, n, "not JSON");
    }
    if (typeof doc.line !== "string" || typeof doc.timestamp !== "string") {
      throw lineError(file, n, 'needs "line" and "timestamp" (logcli --output=jsonl)');
    }
    const labels = (doc.labels ?? {}) as Record<string, unknown>;
    const stream: Record<string, string> = {};
    const metadata: { name: string; value: string }[] = [];
    for (const [name, value] of Object.entries(labels)) {
      if (typeof value !== "string") throw lineError(file, n, `label ${name} is not a string`);
      if (fields.has(name)) metadata.push({ name, value });
      else stream[name] = value;
    }
    let ts: bigint;
    try {
      ts = parseRfc3339Nano(doc.timestamp);
    } catch (error) {
      throw lineError(file, n, (error as Error).message);
    }
    if (Object.keys(stream).length + Object.keys(base).length === 0) {
      throw lineError(file, n, "no stream labels (give the common ones as replay.labels)");
    }
    yield { stream: streamOf(base, stream), ts, line: doc.line, metadata };
  }
}

async function* readPushJson(
  file: string,
  base: Readonly<Record<string, string>>,
): AsyncGenerator<LogEntry> {
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  const docs: { n: number; text: string }[] = [];
  let whole = "";
  let n = 0;
  for await (const text of lines) {
    n++;
    whole += `${text}\n`;
    if (text.trim() !== "") docs.push({ n, text });
  }
  // One body per line, or one body over the whole file.
  let bodies: { n: number; doc: unknown }[];
  try {
    bodies = docs.map(({ n: at, text }) => ({ n: at, doc: JSON.parse(text) as unknown }));
  } catch {
    try {
      bodies = [{ n: 1, doc: JSON.parse(whole) as unknown }];
    } catch {
      throw lineError(file, 1, "not Loki push JSON (one body per line, or one body)");
    }
  }
  for (const { n: at, doc } of bodies) {
    const streams = (doc as { streams?: unknown }).streams;
    if (!Array.isArray(streams)) throw lineError(file, at, 'needs "streams" (Loki push JSON)');
    for (const s of streams as { stream?: unknown; values?: unknown }[]) {
      if (typeof s.stream !== "object" || s.stream === null || !Array.isArray(s.values)) {
        throw lineError(file, at, 'each stream needs "stream" and "values"');
      }
      const stream = streamOf(base, s.stream as Record<string, string>);
      for (const v of s.values as unknown[]) {
        if (!Array.isArray(v) || typeof v[0] !== "string" || typeof v[1] !== "string") {
          throw lineError(file, at, 'each value is ["<ns>", "<line>", {metadata}?]');
        }
        const metadata = Object.entries((v[2] ?? {}) as Record<string, unknown>).map(
          ([name, value]) => {
            if (typeof value !== "string")
              throw lineError(file, at, `metadata ${name} is not a string`);
            return { name, value };
          },
        );
        yield { stream, ts: BigInt(v[0]), line: v[1], metadata };
      }
    }
  }
}
