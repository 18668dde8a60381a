/**
 * What a bloom filter can answer about a query, following Loki 3.4
 * (`pkg/storage/bloom/v1/bloom_tester.go`, `ExtractTestableLabelMatchers`):
 *
 * - Label filters written with `=` before the first parser, `label_format`, `keep` or
 *   `drop` stage are tested against structured-metadata tokens `name` and `name=value`,
 *   combined as the query combines them. A regex that expands to at most 200 strings is an
 *   `or` of those; `.+` tests only that the key is present.
 * - Everything else is `all` ("keep"): `!=`, `!~`, numeric and duration comparisons,
 *   unsimplifiable regexes, filters after a parser, an `or` with an untestable side, a
 *   filter on an empty value, and names that are not structured metadata (`__error__`).
 *
 * The one invariant is no false negatives: when an entry passes the pipeline, the test
 * evaluates true against any bloom holding that entry's tokens. The property test in
 * `bloom.test.ts` checks it on random queries and entries.
 */
import { rangeAggregations } from "./ast.js";
import type { Expr, LabelFilter, LogExpr, Stage } from "./ast.js";
import { parsePattern } from "./pattern.js";
import { regexLiterals } from "./simplify.js";

/** A bloom test tree. `all` means "cannot tell": never prune on it. */
export type BloomTest =
  | { kind: "all" }
  | { kind: "key"; name: string }
  | { kind: "kv"; name: string; value: string }
  | { kind: "and"; children: BloomTest[] }
  | { kind: "or"; children: BloomTest[] };

const ALL: BloomTest = { kind: "all" };

/** Stages after which labels may differ from the entry's structured metadata. */
const LABEL_BARRIERS = new Set<Stage["kind"]>([
  "json",
  "logfmt",
  "regexp",
  "pattern",
  "unpack",
  "labelFormat",
  "keep",
  "drop",
]);

/** The log queries inside any query (one for a log query, one per range aggregation). */
export function logSelectors(e: Expr): LogExpr[] {
  return e.kind === "log" ? [e] : rangeAggregations(e).map((a) => a.range.selector);
}

/**
 * The structured-metadata bloom test of a query. For a query with several log selectors
 * (a binary operation), a chunk may serve any of them, so their tests are or-ed.
 */
export function extractBloomTests(e: Expr): BloomTest {
  const sels = logSelectors(e);
  if (sels.length === 0) return ALL;
  return or(sels.map(extractFromLog));
}

function extractFromLog(e: LogExpr): BloomTest {
  const tests: BloomTest[] = [];
  for (const stage of e.pipeline) {
    if (LABEL_BARRIERS.has(stage.kind)) break;
    if (stage.kind === "labelFilter") tests.push(fromFilter(stage.filter));
  }
  return and(tests);
}

function fromFilter(f: LabelFilter): BloomTest {
  switch (f.kind) {
    case "and":
      return and([fromFilter(f.left), fromFilter(f.right)]);
    case "or":
      return or([fromFilter(f.left), fromFilter(f.right)]);
    case "string": {
      if (f.name.startsWith("__")) return ALL;
      if (f.op === "=") return f.value === "" ? ALL : { kind: "kv", name: f.name, value: f.value };
      if (f.op !== "=~") return ALL;
      if (f.value === ".+") return { kind: "key", name: f.name };
      const lits = regexLiterals(f.value);
      if (lits === undefined || lits.length === 0 || lits.includes("")) return ALL;
      return or(lits.map((value) => ({ kind: "kv", name: f.name, value })));
    }
    case "number":
    case "duration":
    case "bytes":
    case "ip":
      return ALL;
  }
}

function and(children: BloomTest[]): BloomTest {
  const kept: BloomTest[] = [];
  for (const c of children) {
    if (c.kind === "all") continue;
    if (c.kind === "and") kept.push(...c.children);
    else kept.push(c);
  }
  if (kept.length === 0) return ALL;
  return kept.length === 1 ? kept[0]! : { kind: "and", children: kept };
}

function or(children: BloomTest[]): BloomTest {
  const kept: BloomTest[] = [];
  for (const c of children) {
    if (c.kind === "all") return ALL;
    if (c.kind === "or") kept.push(...c.children);
    else kept.push(c);
  }
  if (kept.length === 0) return ALL;
  return kept.length === 1 ? kept[0]! : { kind: "or", children: kept };
}

/** The token a bloom holds for a structured-metadata pair (the key alone is the name). */
export function kvToken(name: string, value: string): string {
  return `${name}=${value}`;
}

/**
 * Evaluates a test against a bloom's tokens: `has` answers whether the bloom may hold
 * `name` or `name=value`. When `streamLabels` is given, a leaf on a name that is a stream
 * label of the series answers true: that label is not in the bloom. The token form of
 * {@link evaluateMetadataTest}, which the gateway and chunk readers call with their own
 * oracles; the property tests state the no-false-negatives rule with it.
 */
export function evaluateBloomTest(
  test: BloomTest,
  has: (token: string) => boolean,
  streamLabels?: Readonly<Record<string, string>>,
): boolean {
  return evaluateMetadataTest(
    test,
    { key: has, pair: (name, value) => has(name) && has(kvToken(name, value)) },
    streamLabels,
  );
}

/** What a metadata test asks of a set of entries: may one have this name, this pair? */
export interface MetadataOracle {
  key(name: string): boolean;
  pair(name: string, value: string): boolean;
}

/**
 * Evaluates a test against anything that can answer for a name and a name-value pair
 * (a bloom through {@link evaluateBloomTest}, a chunk block through its symbols), with
 * the same rule for stream labels.
 */
export function evaluateMetadataTest(
  test: BloomTest,
  may: MetadataOracle,
  streamLabels?: Readonly<Record<string, string>>,
): boolean {
  switch (test.kind) {
    case "all":
      return true;
    case "key":
      return (streamLabels !== undefined && test.name in streamLabels) || may.key(test.name);
    case "kv":
      return (
        (streamLabels !== undefined && test.name in streamLabels) || may.pair(test.name, test.value)
      );
    case "and":
      return test.children.every((c) => evaluateMetadataTest(c, may, streamLabels));
    case "or":
      return test.children.some((c) => evaluateMetadataTest(c, may, streamLabels));
  }
}

/**
 * What {@link chunkFilters} asks of a chunk: `@sieve/chunk`'s ChunkReader (its block
 * symbols, and the symbol ids of a string).
 */
export interface ChunkSymbols {
  blockMayHold(block: number, s: string): boolean;
  symbolIds(s: string): readonly number[];
}

/** Which blocks of a chunk, and which of their entries, may pass a metadata test. */
export interface ChunkFilters {
  readonly block: (block: number) => boolean;
  /** An entry by its metadata as symbol ids (name, value, for `pairs` pairs). */
  readonly entry: (refs: Uint32Array, pairs: number) => boolean;
}

/**
 * A metadata test applied inside a chunk, exactly: a block may pass when its symbols hold
 * the names and values the test needs, an entry when its own pairs do (a name that is one
 * of `streamLabels` passes, as for blooms). Undefined for a test that cannot prune.
 */
export function chunkFilters(
  chunk: ChunkSymbols,
  test: BloomTest,
  streamLabels: Readonly<Record<string, string>>,
): ChunkFilters | undefined {
  if (test.kind === "all") return undefined;
  let b = 0;
  const inBlock: MetadataOracle = {
    key: (name) => chunk.blockMayHold(b, name),
    pair: (name, value) => chunk.blockMayHold(b, name) && chunk.blockMayHold(b, value),
  };
  let refs: Uint32Array = new Uint32Array(0);
  let pairs = 0;
  const inEntry: MetadataOracle = {
    key: (name) => {
      const names = chunk.symbolIds(name);
      for (let j = 0; j < pairs; j++) if (names.includes(refs[2 * j]!)) return true;
      return false;
    },
    pair: (name, value) => {
      const names = chunk.symbolIds(name);
      const values = chunk.symbolIds(value);
      for (let j = 0; j < pairs; j++) {
        if (names.includes(refs[2 * j]!) && values.includes(refs[2 * j + 1]!)) return true;
      }
      return false;
    },
  };
  return {
    block: (block) => {
      b = block;
      return evaluateMetadataTest(test, inBlock, streamLabels);
    },
    entry: (entryRefs, entryPairs) => {
      refs = entryRefs;
      pairs = entryPairs;
      return evaluateMetadataTest(test, inEntry, streamLabels);
    },
  };
}

// ---------------------------------------------------------------------------------------
// Line n-grams

/** A line-filter test for n-gram blooms: `contains` holds when every n-gram of the literal is present. */
export type LineTest =
  | { kind: "all" }
  | { kind: "contains"; literal: string }
  | { kind: "and"; children: LineTest[] }
  | { kind: "or"; children: LineTest[] };

/**
 * The n-grams of `text` (by code point, every offset): the tokens an ingester adds to a
 * line bloom and the lookups {@link evaluateLineTest} makes. Shorter text has none.
 */
export function ngrams(text: string, n: number): string[] {
  const cps = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i + n <= cps.length; i++) out.push(cps.slice(i, i + n).join(""));
  return out;
}

/**
 * The line-filter test of a query for n-gram blooms of size `n`: `|=` literals of at least
 * `n` code points (an `or` chain only when every operand qualifies), `|~` regexes that
 * expand to such literals, and `|>` pattern literals. Negative filters never prune, and
 * filters after `line_format` or `decolorize` see another line than the one stored.
 */
export function extractLineFilterTests(e: Expr, n: number): LineTest {
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`n-gram size must be a positive integer, got ${n}`);
  const sels = logSelectors(e);
  if (sels.length === 0) return { kind: "all" };
  return lineOr(sels.map((s) => lineFromLog(s, n)));
}

function lineFromLog(e: LogExpr, n: number): LineTest {
  const tests: LineTest[] = [];
  const long = (s: string): boolean => Array.from(s).length >= n;
  for (const stage of e.pipeline) {
    if (stage.kind === "lineFormat" || stage.kind === "decolorize") break;
    if (stage.kind !== "lineFilter") continue;
    if (stage.op === "|=") {
      tests.push(
        lineOr(
          stage.terms.map((t): LineTest =>
            t.ip || !long(t.value) ? { kind: "all" } : { kind: "contains", literal: t.value },
          ),
        ),
      );
    } else if (stage.op === "|~") {
      tests.push(
        lineOr(
          stage.terms.map((t): LineTest => {
            const lits = regexLiterals(t.value);
            if (lits === undefined || lits.length === 0 || !lits.every(long))
              return { kind: "all" };
            return lineOr(lits.map((literal) => ({ kind: "contains", literal })));
          }),
        ),
      );
    } else if (stage.op === "|>") {
      tests.push(
        lineOr(
          stage.terms.map((t): LineTest => {
            const p = parsePattern(t.value, false);
            const lits = p.parts.flatMap((part) =>
              "lit" in part && long(part.lit) ? [part.lit] : [],
            );
            return lineAnd(lits.map((literal) => ({ kind: "contains", literal })));
          }),
        ),
      );
    }
  }
  return lineAnd(tests);
}

function lineAnd(children: LineTest[]): LineTest {
  const kept = children.flatMap((c) =>
    c.kind === "all" ? [] : c.kind === "and" ? c.children : [c],
  );
  if (kept.length === 0) return { kind: "all" };
  return kept.length === 1 ? kept[0]! : { kind: "and", children: kept };
}

function lineOr(children: LineTest[]): LineTest {
  if (children.some((c) => c.kind === "all") || children.length === 0) return { kind: "all" };
  const kept = children.flatMap((c) => (c.kind === "or" ? c.children : [c]));
  return kept.length === 1 ? kept[0]! : { kind: "or", children: kept };
}

/** Evaluates a line test against an n-gram bloom (`has` as for {@link evaluateBloomTest}). */
export function evaluateLineTest(
  test: LineTest,
  n: number,
  has: (token: string) => boolean,
): boolean {
  switch (test.kind) {
    case "all":
      return true;
    case "contains":
      return ngrams(test.literal, n).every(has);
    case "and":
      return test.children.every((c) => evaluateLineTest(c, n, has));
    case "or":
      return test.children.some((c) => evaluateLineTest(c, n, has));
  }
}
