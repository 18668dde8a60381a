/**
 * The experiment spec: what `sieve experiment run SPEC.yaml` reads. docs/experiments.md
 * describes every key; {@link parseSpec} validates the whole document and names the first
 * bad key by its path (`queries.shapes[1].fields`), so a typo never runs a long experiment
 * with a default.
 */
import { DEFAULT_BLOCK_TARGET_BYTES } from "@sieve/chunk";
import type { BloomLayout } from "@sieve/index";
import { parse as parseYaml } from "yaml";

/** A metadata field of a generated dataset. */
export interface FieldSpec {
  readonly name: string;
  /** Distinct values; 0: every run of `linesPerValue` lines gets a new one. */
  readonly cardinality: number;
  /** Consecutive lines of a stream that share a value (a trace's lines). */
  readonly linesPerValue: number;
  /** The value is also written into the line (`name=value`), so line filters can find it. */
  readonly inLine: boolean;
}

export interface GeneratedSpec {
  readonly streams: number;
  readonly lines: number;
  /** The lines' time span in seconds, ending when the run starts. */
  readonly spanSeconds: number;
  readonly lineShape: "logfmt" | "json" | "plain";
  /** Mean line length in bytes. */
  readonly lineBytes: number;
  readonly fields: readonly FieldSpec[];
  /** Zipf exponent of lines across streams; 0 spreads them evenly. */
  readonly zipf: number;
  readonly seed: number;
}

export const REPLAY_FORMATS = ["logcli-jsonl", "loki-push-json", "lines"] as const;
export type ReplayFormat = (typeof REPLAY_FORMATS)[number];

export interface ReplaySpec {
  /** Absolute, or relative to the spec file. */
  readonly file: string;
  readonly format: ReplayFormat;
  /**
   * Labels added to every line's stream, as a selector: `{job="replay"}`. A `lines` file's
   * whole stream; for logcli's JSONL, the labels its streams share (logcli leaves them out).
   */
  readonly labels: string;
  /** `rebase`: shifted so the newest line is at the run's start; `keep`: as in the file. */
  readonly timestamps: "keep" | "rebase";
  /** Metadata fields to sample needles from; empty: every field the file holds. */
  readonly fields: readonly string[];
}

export type DatasetSpec =
  | { readonly name: string; readonly generated: GeneratedSpec }
  | { readonly name: string; readonly replay: ReplaySpec };

/** Line n-grams of a configuration: off, or length and skip. */
export type NgramSetting = { readonly length: number; readonly skip: number } | "off";

/** Tokens a bloom may hold: structured-metadata names, name=value pairs, chunk-prefixed forms. */
export const TOKEN_KINDS = ["key", "key=value", "prefixed"] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** A matrix of bloom configurations: every combination of its axes runs. */
export interface MatrixSpec {
  readonly falsePositiveRate: readonly number[];
  readonly filterLayout: readonly BloomLayout[];
  readonly ngrams: readonly NgramSetting[];
  /** Each item one set of token kinds the blooms hold. */
  readonly tokens: readonly (readonly TokenKind[])[];
  readonly chunkTargetBytes: readonly number[];
  readonly chunkBlockBytes: readonly number[];
}

/** One query shape: `repetitions` queries, each with other needles. */
export interface ShapeSpec {
  readonly name: string;
  /** The fields whose values are the needles; two or more combine with `combine`. */
  readonly fields: readonly string[];
  /** Values sampled from the data, or never generated. */
  readonly values: "present" | "absent";
  readonly combine: "and" | "or";
  /** `narrow`: the needle's own stream; `wide`: every stream. */
  readonly selector: "narrow" | "wide";
  /** `metadata`: `| field="value"`; `line`: `|= "value"`. */
  readonly filter: "metadata" | "line";
}

export interface QueriesSpec {
  readonly repetitions: number;
  readonly limit: number;
  /** Each query once in a freshly started process (no cache holds anything). */
  readonly cold: boolean;
  /** Each query again in a running process, after a first pass. */
  readonly warm: boolean;
  readonly shapes: readonly ShapeSpec[];
}

export interface ExperimentSpec {
  readonly name: string;
  readonly datasets: readonly DatasetSpec[];
  /** One matrix, or several whose configurations run one after another (the baseline first). */
  readonly configurations: readonly MatrixSpec[];
  readonly queries: QueriesSpec;
}

/** A spec that cannot run: `path` names the bad key. */
export class SpecError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
    this.name = "SpecError";
  }
}

type Doc = Record<string, unknown>;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const DURATION_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/** Reads a mapping's keys, refusing any not in `known`. */
class Reader {
  constructor(
    readonly path: string,
    private readonly doc: Doc,
    known: readonly string[],
  ) {
    for (const key of Object.keys(doc)) {
      if (!known.includes(key)) {
        throw new SpecError(this.at(key), `unknown key (known: ${known.join(", ")})`);
      }
    }
  }

  at(key: string): string {
    return this.path === "" ? key : `${this.path}.${key}`;
  }

  has(key: string): boolean {
    return this.doc[key] !== undefined && this.doc[key] !== null;
  }

  raw(key: string): unknown {
    return this.doc[key];
  }

  string(key: string, fallback?: string, pattern?: RegExp): string {
    const v = this.doc[key] ?? fallback;
    if (typeof v !== "string" || v === "") throw new SpecError(this.at(key), "must be a string");
    if (pattern !== undefined && !pattern.test(v)) {
      throw new SpecError(this.at(key), `${JSON.stringify(v)} does not match ${pattern.source}`);
    }
    return v;
  }

  oneOf<T extends string>(key: string, allowed: readonly T[], fallback?: T): T {
    const v = this.doc[key] ?? fallback;
    if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) {
      throw new SpecError(this.at(key), `must be one of ${allowed.join(", ")}`);
    }
    return v as T;
  }

  number(key: string, min: number, max: number, fallback?: number, integer = true): number {
    return checkNumber(this.at(key), this.doc[key] ?? fallback, min, max, integer);
  }

  boolean(key: string, fallback: boolean): boolean {
    const v = this.doc[key] ?? fallback;
    if (typeof v !== "boolean") throw new SpecError(this.at(key), "must be true or false");
    return v;
  }

  /** A duration such as `2h` or `90m`, in seconds. */
  duration(key: string, fallback: string): number {
    const v = this.doc[key] ?? fallback;
    const m = typeof v === "string" ? DURATION.exec(v) : null;
    if (m === null) throw new SpecError(this.at(key), "must be a duration such as 30m or 2h");
    const seconds = Number(m[1]) * DURATION_SECONDS[m[2]!]!;
    if (!(seconds >= 1 && seconds <= 366 * 86_400)) {
      throw new SpecError(this.at(key), "must be between 1s and 366d");
    }
    return seconds;
  }

  mapping(key: string, known: readonly string[], fallback: Doc = {}): Reader {
    return new Reader(this.at(key), asMapping(this.at(key), this.doc[key] ?? fallback), known);
  }

  /** A list; a scalar is a list of one, for matrix axes. */
  list(key: string, fallback?: readonly unknown[]): { path: string; items: unknown[] } {
    const v = this.doc[key] ?? fallback;
    if (v === undefined) throw new SpecError(this.at(key), "is required");
    const items = Array.isArray(v) ? (v as unknown[]) : [v];
    if (items.length === 0) throw new SpecError(this.at(key), "must not be empty");
    return { path: this.at(key), items };
  }
}

function asMapping(path: string, v: unknown): Doc {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new SpecError(path, "must be a mapping");
  }
  return v as Doc;
}

function checkNumber(path: string, v: unknown, min: number, max: number, integer = true): number {
  if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v))) {
    throw new SpecError(path, integer ? "must be an integer" : "must be a number");
  }
  if (v < min || v > max) throw new SpecError(path, `must be between ${min} and ${max}`);
  return v;
}

/** Parses and validates a spec's YAML text; throws a {@link SpecError} naming the bad key. */
export function parseSpec(text: string): ExperimentSpec {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new SpecError("(file)", `not YAML: ${(error as Error).message}`);
  }
  const root = new Reader("", asMapping("(file)", doc), [
    "name",
    "datasets",
    "configurations",
    "queries",
  ]);
  const datasets = root.list("datasets").items.map((d, i) => dataset(`datasets[${i}]`, d));
  const names = new Set<string>();
  datasets.forEach((d, i) => {
    if (names.has(d.name)) throw new SpecError(`datasets[${i}].name`, "is used twice");
    names.add(d.name);
  });
  const queries = queriesSpec(
    root.mapping("queries", ["repetitions", "limit", "cold", "warm", "shapes"]),
  );
  const spec: ExperimentSpec = {
    name: root.string("name", undefined, NAME),
    datasets,
    configurations: matrices(root),
    queries,
  };
  checkFields(spec);
  return spec;
}

function dataset(path: string, v: unknown): DatasetSpec {
  const r = new Reader(path, asMapping(path, v), ["name", "generated", "replay"]);
  const name = r.string("name", undefined, NAME);
  if (r.has("generated") === r.has("replay")) {
    throw new SpecError(path, "needs exactly one of generated, replay");
  }
  if (r.has("generated")) {
    const g = r.mapping("generated", [
      "streams",
      "lines",
      "span",
      "lineShape",
      "lineBytes",
      "fields",
      "zipf",
      "seed",
    ]);
    const fields = g.list("fields").items.map((f, i) => field(`${g.at("fields")}[${i}]`, f));
    return {
      name,
      generated: {
        streams: g.number("streams", 1, 100_000),
        lines: g.number("lines", 1, 1_000_000_000),
        spanSeconds: g.duration("span", "1h"),
        lineShape: g.oneOf("lineShape", ["logfmt", "json", "plain"], "logfmt"),
        lineBytes: g.number("lineBytes", 32, 64 * 1024, 200),
        fields,
        zipf: g.number("zipf", 0, 5, 0, false),
        seed: g.number("seed", 0, 2 ** 31, 1),
      },
    };
  }
  const p = r.mapping("replay", ["file", "format", "labels", "timestamps", "fields"]);
  const format = p.oneOf("format", REPLAY_FORMATS);
  if (format === "lines" && !p.has("labels")) {
    throw new SpecError(p.at("labels"), 'is required for format lines (e.g. {job="replay"})');
  }
  const fields = p.has("fields") ? p.list("fields") : { path: "", items: [] };
  return {
    name,
    replay: {
      file: p.string("file"),
      format,
      labels: p.string("labels", "{}"),
      timestamps: p.oneOf("timestamps", ["keep", "rebase"], "rebase"),
      fields: fields.items.map((f, i) => fieldName(`${fields.path}[${i}]`, f)),
    },
  };
}

function fieldName(path: string, v: unknown): string {
  if (typeof v !== "string" || !FIELD_NAME.test(v)) {
    throw new SpecError(path, "must be a field name ([A-Za-z_][A-Za-z0-9_]*)");
  }
  return v;
}

function field(path: string, v: unknown): FieldSpec {
  const r = new Reader(path, asMapping(path, v), [
    "name",
    "cardinality",
    "linesPerValue",
    "inLine",
  ]);
  return {
    name: fieldName(r.at("name"), r.raw("name")),
    cardinality: r.number("cardinality", 0, 1_000_000_000, 0),
    linesPerValue: r.number("linesPerValue", 1, 1_000_000, 1),
    inLine: r.boolean("inLine", false),
  };
}

const MATRIX_KEYS = [
  "falsePositiveRate",
  "filterLayout",
  "ngrams",
  "tokens",
  "chunkTargetBytes",
  "chunkBlockBytes",
];

/** `configurations`: one matrix (a mapping) or a list of them. */
function matrices(root: Reader): MatrixSpec[] {
  const raw = root.raw("configurations") ?? {};
  if (!Array.isArray(raw)) return [matrix(root.mapping("configurations", MATRIX_KEYS))];
  if (raw.length === 0) throw new SpecError("configurations", "must not be empty");
  return raw.map((m, i) => {
    const path = `configurations[${i}]`;
    return matrix(new Reader(path, asMapping(path, m), MATRIX_KEYS));
  });
}

function matrix(r: Reader): MatrixSpec {
  const axis = <T>(
    key: string,
    fallback: unknown[],
    item: (path: string, v: unknown) => T,
  ): T[] => {
    const { path, items } = r.list(key, fallback);
    return items.map((v, i) => item(`${path}[${i}]`, v));
  };
  return {
    falsePositiveRate: axis("falsePositiveRate", [0.01], (p, v) =>
      checkNumber(p, v, 0.000001, 0.5, false),
    ),
    filterLayout: axis("filterLayout", ["ribbon"], (p, v) => {
      if (v !== "ribbon" && v !== "exact" && v !== "scalable")
        throw new SpecError(p, "must be ribbon, exact or scalable");
      return v;
    }),
    ngrams: axis("ngrams", ["off"], ngram),
    tokens: axis("tokens", [[...TOKEN_KINDS]], tokenSet),
    chunkTargetBytes: axis("chunkTargetBytes", [1_572_864], (p, v) =>
      checkNumber(p, v, 1024, 256 * 1024 * 1024),
    ),
    chunkBlockBytes: axis("chunkBlockBytes", [DEFAULT_BLOCK_TARGET_BYTES], (p, v) =>
      checkNumber(p, v, 1024, 4 * 1024 * 1024),
    ),
  };
}

function tokenSet(path: string, v: unknown): TokenKind[] {
  if (!Array.isArray(v)) {
    throw new SpecError(path, `must be a list of token kinds (${TOKEN_KINDS.join(", ")})`);
  }
  const kinds = (v as unknown[]).map((k, i) => {
    if (typeof k !== "string" || !(TOKEN_KINDS as readonly string[]).includes(k)) {
      throw new SpecError(`${path}[${i}]`, `must be one of ${TOKEN_KINDS.join(", ")}`);
    }
    return k as TokenKind;
  });
  return TOKEN_KINDS.filter((k) => kinds.includes(k));
}

function ngram(path: string, v: unknown): NgramSetting {
  if (v === "off") return "off";
  const r = new Reader(path, asMapping(path, v), ["length", "skip"]);
  return { length: r.number("length", 1, 64), skip: r.number("skip", 0, 64, 0) };
}

function queriesSpec(r: Reader): QueriesSpec {
  const { path, items } = r.list("shapes");
  const shapes = items.map((v, i) => shape(`${path}[${i}]`, v));
  const names = new Set<string>();
  shapes.forEach((s, i) => {
    if (names.has(s.name)) throw new SpecError(`${path}[${i}].name`, "is used twice");
    names.add(s.name);
  });
  const cold = r.boolean("cold", true);
  const warm = r.boolean("warm", true);
  if (!cold && !warm) throw new SpecError(r.at("warm"), "cold and warm cannot both be false");
  return {
    repetitions: r.number("repetitions", 1, 10_000, 10),
    limit: r.number("limit", 1, 100_000, 1000),
    cold,
    warm,
    shapes,
  };
}

function shape(path: string, v: unknown): ShapeSpec {
  const r = new Reader(path, asMapping(path, v), [
    "name",
    "fields",
    "values",
    "combine",
    "selector",
    "filter",
  ]);
  const fields = r.list("fields");
  return {
    name: r.string("name", undefined, NAME),
    fields: fields.items.map((f, i) => fieldName(`${fields.path}[${i}]`, f)),
    values: r.oneOf("values", ["present", "absent"], "present"),
    combine: r.oneOf("combine", ["and", "or"], "and"),
    selector: r.oneOf("selector", ["narrow", "wide"], "narrow"),
    filter: r.oneOf("filter", ["metadata", "line"], "metadata"),
  };
}

/**
 * Checks what only the whole spec can: every shape's fields exist in every generated
 * dataset, and a line shape's fields are written into the lines.
 */
function checkFields(spec: ExperimentSpec): void {
  spec.queries.shapes.forEach((s, i) => {
    for (const d of spec.datasets) {
      if (!("generated" in d)) continue;
      for (const [j, name] of s.fields.entries()) {
        const f = d.generated.fields.find((x) => x.name === name);
        const at = `queries.shapes[${i}].fields[${j}]`;
        if (f === undefined) throw new SpecError(at, `dataset ${d.name} has no field ${name}`);
        if (s.filter === "line" && !f.inLine) {
          throw new SpecError(
            at,
            `a line filter needs ${name} written into ${d.name}'s lines (inLine: true)`,
          );
        }
      }
    }
  });
}

/** `--quick`: every dataset a tenth (at least 2,000 lines), at most 3 repetitions. */
export function quickSpec(spec: ExperimentSpec): ExperimentSpec {
  return {
    ...spec,
    datasets: spec.datasets.map((d) =>
      "generated" in d
        ? {
            ...d,
            generated: {
              ...d.generated,
              lines: Math.max(Math.min(d.generated.lines, 2000), Math.ceil(d.generated.lines / 10)),
              fields: d.generated.fields.map((f) => ({
                ...f,
                cardinality: f.cardinality === 0 ? 0 : Math.max(1, Math.ceil(f.cardinality / 10)),
              })),
            },
          }
        : d,
    ),
    queries: { ...spec.queries, repetitions: Math.min(spec.queries.repetitions, 3) },
  };
}
