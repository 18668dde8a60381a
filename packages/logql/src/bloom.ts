/**
 * What a bloom filter can answer about a query, following Loki 3.4
 * (`pkg/storage/bloom/v1/bloom_tester.go`, `ExtractTestableLabelMatchers`) for structured
 * metadata and Loki 3.0 (`ExtractTestableLineFilters`) for line n-grams:
 *
 * - Label filters written with `=` before the first parser, `label_format`, `keep` or
 *   `drop` stage are tested against structured-metadata tokens `name` and `name=value`,
 *   combined as the query combines them. A regex that expands to at most 200 strings is an
 *   `or` of those; `.+` tests only that the key is present.
 * - Line filters before those stages (and before `line_format` and `decolorize`, which
 *   change the line) are `line` leaves, a literal the line must contain: `|= "a"`, an `or`
 *   chain of them, a `|~` regex that expands to literals (a case-insensitive one does
 *   not), the literals of a `|>` pattern. Which of them a bloom can test depends on the
 *   n-grams it was built with (`@sieve/index`'s `literalNgrams`): a literal too short for
 *   them, or a bloom without n-grams, answers "may match".
 * - Everything else is `all` ("keep"): `!=`, `!~`, `!>`, numeric and duration comparisons,
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
  /** The line contains `literal` (a line filter), testable with line n-grams. */
  | { kind: "line"; literal: string }
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
  let lineChanged = false;
  for (const stage of e.pipeline) {
    if (LABEL_BARRIERS.has(stage.kind)) break;
    if (stage.kind === "lineFormat" || stage.kind === "decolorize") lineChanged = true;
    if (stage.kind === "labelFilter") tests.push(fromFilter(stage.filter));
    if (stage.kind === "lineFilter" && !lineChanged) tests.push(fromLineFilter(stage));
  }
  return and(tests);
}

/** A literal the line must contain, or `all` when it is empty. */
function contains(literal: string): BloomTest {
  return literal === "" ? ALL : { kind: "line", literal };
}

function fromLineFilter(stage: Extract<Stage, { kind: "lineFilter" }>): BloomTest {
  switch (stage.op) {
    case "|=":
      return or(stage.terms.map((t) => (t.ip ? ALL : contains(t.value))));
    case "|~":
      return or(
        stage.terms.map((t) => {
          const lits = regexLiterals(t.value);
          return lits === undefined || lits.length === 0 ? ALL : or(lits.map(contains));
        }),
      );
    case "|>":
      return or(
        stage.terms.map((t) => {
          const parts = parsePattern(t.value, false).parts;
          return and(parts.flatMap((part) => ("lit" in part ? [contains(part.lit)] : [])));
        }),
      );
    case "!=":
    case "!~":
    case "!>":
      // A bloom says what may be present, never what is absent.
      return ALL;
  }
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

/**
 * The test with its line leaves read as "may match": what a bloom without line n-grams can
 * answer. The same object when the test has none.
 */
export function withoutLineTests(test: BloomTest): BloomTest {
  switch (test.kind) {
    case "line":
      return ALL;
    case "and":
    case "or": {
      const children = test.children.map(withoutLineTests);
      if (children.every((c, i) => c === test.children[i])) return test;
      return test.kind === "and" ? and(children) : or(children);
    }
    case "all":
    case "key":
    case "kv":
      return test;
  }
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

/**
 * What a bloom test asks of a set of entries: may one have this name, this pair, a line
 * containing this literal? Without `line`, a line leaf may match.
 */
export interface MetadataOracle {
  key(name: string): boolean;
  pair(name: string, value: string): boolean;
  line?(literal: string): boolean;
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
    case "line":
      return may.line === undefined || may.line(test.literal);
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
  // A pair's value first: it is rarer than its name (a trace id against trace_id, in every
  // block), so a chunk that does not hold it is refused without finding the name's ids,
  // which walks its symbol table, or decoding which blocks refer to them.
  const inBlock: MetadataOracle = {
    key: (name) => chunk.blockMayHold(b, name),
    pair: (name, value) => chunk.blockMayHold(b, value) && chunk.blockMayHold(b, name),
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
      const values = chunk.symbolIds(value);
      if (values.length === 0) return false;
      const names = chunk.symbolIds(name);
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
