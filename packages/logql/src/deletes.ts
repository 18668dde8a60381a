/**
 * Delete requests as a line test (Loki's `deletion.deleteRequest.FilterFunction` and
 * `log.NewFilteringPipeline`): a line is deleted when its stream matches a request's
 * selector, its timestamp is within the request's range (both ends inclusive, as Loki's
 * `ts.Before(start) || ts.After(end)` keeps neither side out) and the request's pipeline
 * (its line filters, or whatever stages the query has) keeps it. The querier and the
 * ingesters filter query results with it until a request is processed, and the compactor
 * rewrites chunks with it: one definition, so what a query hides is what processing removes.
 */
import type { LogExpr } from "./ast.js";
import { parseSyntax } from "./parser.js";
import { matchesLabels } from "./matchers.js";
import { compilePipeline, type Pipeline } from "./pipeline.js";
import { validateExpr } from "./validate.js";

/** One delete request, as query-time filtering needs it. Times are Unix ns, inclusive. */
export interface DeleteSpec {
  /** A log selector with optional line filters, e.g. `{app="api"} |= "secret"`. */
  readonly query: string;
  readonly start: bigint;
  readonly end: bigint;
}

/** An entry as chunks and heads hold it. */
export interface DeletableEntry {
  readonly timestamp: bigint;
  readonly line: string;
  readonly structuredMetadata: readonly { readonly name: string; readonly value: string }[];
}

/** True when the entry is deleted (one stream's requests). */
export type StreamDeleteTest = (e: DeletableEntry) => boolean;

/**
 * Parses a delete request's query: a log selector, optionally with a pipeline (Loki's
 * `ParseLogSelector`). Throws the parser's error; a metric query is refused too.
 */
export function parseDeleteQuery(query: string): LogExpr {
  const expr = parseSyntax(query);
  validateExpr(expr);
  if (expr.kind !== "log") throw new Error("not a log selector");
  return expr;
}

interface Compiled {
  readonly expr: LogExpr;
  readonly start: bigint;
  readonly end: bigint;
  /** Undefined: no pipeline, the whole range of the matching streams goes. */
  readonly pipeline: Pipeline | undefined;
}

/**
 * A tenant's delete requests compiled once. {@link forStream} answers the test of one
 * stream, or undefined when no request selects it: the querier and the ingesters then read
 * that stream with no cost at all, so a tenant without requests pays nothing.
 */
export class DeleteFilter {
  private readonly requests: readonly Compiled[];
  /** Earliest start and latest end over the requests: an entry outside is never deleted. */
  readonly start: bigint;
  readonly end: bigint;
  private readonly byLabels = new WeakMap<object, StreamDeleteTest | null>();

  private constructor(requests: readonly Compiled[]) {
    this.requests = requests;
    let start = requests[0]!.start;
    let end = requests[0]!.end;
    for (const r of requests) {
      if (r.start < start) start = r.start;
      if (r.end > end) end = r.end;
    }
    this.start = start;
    this.end = end;
  }

  /**
   * The filter of `specs` that overlap [from, through] (all when omitted), or undefined
   * when none does. A request whose query does not parse (it was checked when accepted,
   * so only a damaged record) throws: better a failed query than deleted lines shown.
   */
  static compile(
    specs: readonly DeleteSpec[],
    from?: bigint,
    through?: bigint,
  ): DeleteFilter | undefined {
    const compiled: Compiled[] = [];
    for (const s of specs) {
      if (s.end < s.start) continue;
      if (from !== undefined && s.end < from) continue;
      if (through !== undefined && s.start > through) continue;
      const expr = parseDeleteQuery(s.query);
      const pipeline = expr.pipeline.length === 0 ? undefined : compilePipeline(expr.pipeline);
      compiled.push({ expr, start: s.start, end: s.end, pipeline });
    }
    return compiled.length === 0 ? undefined : new DeleteFilter(compiled);
  }

  /**
   * The test of the stream with `labels`, or undefined when no request selects it. Memoised
   * by the record's identity (the querier and the ingesters share one record per stream).
   */
  forStream(labels: Readonly<Record<string, string>>): StreamDeleteTest | undefined {
    const seen = this.byLabels.get(labels);
    if (seen !== undefined) return seen ?? undefined;
    const mine = this.requests.filter((r) => matchesLabels(r.expr.matchers, labels));
    const test = mine.length === 0 ? undefined : streamTest(mine, labels);
    this.byLabels.set(labels, test ?? null);
    return test;
  }
}

function streamTest(
  requests: readonly Compiled[],
  labels: Readonly<Record<string, string>>,
): StreamDeleteTest {
  return (e) => {
    const ts = e.timestamp;
    for (const r of requests) {
      if (ts < r.start || ts > r.end) continue;
      const p = r.pipeline;
      if (p === undefined) return true;
      if (p.testLine !== undefined) {
        if (p.testLine(e.line)) return true;
        continue;
      }
      const structuredMetadata: Record<string, string> = {};
      for (const m of e.structuredMetadata) structuredMetadata[m.name] = m.value;
      if (p.process({ timestamp: ts, line: e.line, labels, structuredMetadata }) !== null)
        return true;
    }
    return false;
  };
}
