/**
 * Tails at the ingester (Loki's `pkg/ingester/tailer.go`): a querier that tails a query
 * subscribes here, and from then on every entry this ingester appends to a matching stream
 * is run through the query's pipeline and pushed to it, as it is appended.
 *
 * Why pushed at append rather than read back from the heads: an entry is appended exactly
 * once (exact duplicates are refused before), before any flush can cut or free its head,
 * so a flush can neither hide an entry from a tail nor show it twice; and nothing is held
 * here for a tail: what a tail is sent is the querier's to bound (services/querier's
 * tail.ts drops what its client cannot take, and says so in `dropped_entries`).
 */
import type { Entry } from "@sieve/chunk";
import { matchesLabels } from "@sieve/logql";
import type { LogExpr, Pipeline } from "@sieve/logql";
import { compilePipeline } from "@sieve/logql";
import type {
  IngesterEntry,
  IngesterTail,
  IngesterTailRequest,
  IngesterTailSink,
} from "@sieve/proto";
import { parseLogQuery, runPipeline } from "./query.js";

/** What a tail reads of the stream an entry was appended to. */
export interface TailedStream {
  readonly labels: string;
  readonly labelMap: Readonly<Record<string, string>>;
  readonly fingerprint: bigint;
}

interface Tailer {
  readonly expr: LogExpr;
  readonly pipeline: Pipeline | undefined;
  readonly sink: IngesterTailSink;
}

/** The tails one ingester holds, by tenant. */
export class Tails {
  private readonly byTenant = new Map<string, Set<Tailer>>();

  /** Tails held, over every tenant. */
  get size(): number {
    let n = 0;
    for (const set of this.byTenant.values()) n += set.size;
    return n;
  }

  /** Whether `tenant` has a tail: the append path collects what it appends only then. */
  has(tenant: string): boolean {
    return this.byTenant.has(tenant);
  }

  /**
   * Holds a tail of `req` from now on. A selector that does not parse is refused: `held`
   * rejects with `invalid_selector`.
   */
  add(req: IngesterTailRequest, sink: IngesterTailSink): IngesterTail {
    let expr: LogExpr;
    try {
      expr = parseLogQuery(req.selector);
    } catch (error) {
      const held = Promise.reject(error instanceof Error ? error : new Error(String(error)));
      held.catch(() => undefined); // the caller awaits it; never an unhandled rejection
      return { held, close: () => undefined };
    }
    const tailer: Tailer = {
      expr,
      pipeline: expr.pipeline.length === 0 ? undefined : compilePipeline(expr.pipeline),
      sink,
    };
    let set = this.byTenant.get(req.tenant);
    if (set === undefined) this.byTenant.set(req.tenant, (set = new Set()));
    set.add(tailer);
    return {
      held: Promise.resolve(),
      close: () => {
        this.remove(req.tenant, tailer);
      },
    };
  }

  private remove(tenant: string, tailer: Tailer): void {
    const set = this.byTenant.get(tenant);
    if (set === undefined) return;
    set.delete(tailer);
    if (set.size === 0) this.byTenant.delete(tenant);
  }

  /**
   * Pushes `entries`, just appended to `stream` of `tenant`, to the tenant's tails whose
   * selector matches, each through its own pipeline. A pipeline that fails (past one of
   * LogQL's bounds) ends its tail with the error; the others go on.
   */
  notify(tenant: string, stream: TailedStream, entries: readonly Entry[]): void {
    const set = this.byTenant.get(tenant);
    if (set === undefined || entries.length === 0) return;
    for (const t of [...set]) {
      if (!matchesLabels(t.expr.matchers, stream.labelMap)) continue;
      const out: IngesterEntry[] = [];
      try {
        for (const e of entries) {
          const kept = runPipeline(t.pipeline, e, stream.labelMap);
          if (kept !== null) out.push(kept);
        }
      } catch (error) {
        this.remove(tenant, t);
        t.sink.ended(error as Error);
        continue;
      }
      if (out.length === 0) continue;
      t.sink.entries({
        labels: stream.labels,
        labelMap: stream.labelMap,
        fingerprint: stream.fingerprint,
        entries: out,
      });
    }
  }

  /** Ends every tail (the ingester stops): each sink hears why. */
  endAll(error: Error): void {
    const all = [...this.byTenant.values()].flatMap((set) => [...set]);
    this.byTenant.clear();
    for (const t of all) t.sink.ended(error);
  }
}
