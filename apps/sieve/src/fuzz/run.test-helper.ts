/**
 * One fuzz run against a fresh `sieve all`, shared by fuzz.int.test.ts (2,000 pushes and 2,000
 * reads) and `pnpm fuzz` (20,000+ each): canary data first, then pushes (even indexes) and
 * reads (odd indexes) interleaved at a fixed concurrency while /ready is probed every 50 ms
 * and RSS sampled every 100 ms, then the canary read back before and after a flush.
 */
import {
  type ReadyStats,
  type RunStats,
  type Sieve,
  ReadyProbe,
  RssSampler,
  pushCanary,
  readCanary,
  rssBytes,
  runRequests,
  startSieve,
} from "./harness.test-helper.js";
import { type FuzzRequest, pushCase } from "./push.test-helper.js";
import { queryCase } from "./query.test-helper.js";
import type { Rng } from "./random.test-helper.js";

/** Request `index` of a run: pushes on even indexes, reads on odd ones. */
export function fuzzRequest(rng: Rng, index: number, nowMs: number): FuzzRequest {
  return index % 2 === 0 ? pushCase(rng, nowMs) : queryCase(rng, nowMs);
}

/** How to run. */
export interface FuzzOptions {
  readonly seed: number;
  /** Pushes, and as many reads. */
  readonly perKind: number;
  readonly concurrency: number;
  /** Called after each answer (the long run prints progress). */
  readonly onAnswer?: (answered: number, total: number) => void;
}

/** Everything one run measured. */
export interface FuzzReport {
  readonly seed: number;
  readonly run: RunStats;
  readonly ready: ReadyStats;
  readonly startRssBytes: number;
  readonly peakRssBytes: number;
  /** Whether the process was still running at the end. */
  readonly alive: boolean;
  /** `intact`, or what is wrong with the canary lines after the fuzz (from the ingester). */
  readonly canaryAfterFuzz: string;
  /** The same after POST /flush (from the store). */
  readonly canaryAfterFlush: string;
  /** The child's last output lines, for a failure message. */
  readonly output: string;
}

async function canaryCheck(
  sieve: Sieve,
  lines: readonly string[],
  read: () => Promise<string[]>,
): Promise<string> {
  if (!sieve.alive()) return "process not running";
  try {
    const got = await read();
    const want = [...lines].sort();
    if (JSON.stringify(got) === JSON.stringify(want)) return "intact";
    const missing = want.filter((l) => !got.includes(l)).length;
    return `got ${got.length} lines of ${want.length}, ${missing} missing`;
  } catch (error) {
    return (error as Error).message;
  }
}

async function flush(url: string): Promise<string> {
  try {
    const res = await fetch(`${url}/flush`, {
      method: "POST",
      signal: AbortSignal.timeout(60_000),
    });
    return res.status === 204 ? "" : `flush answered ${res.status}: ${await res.text()}`;
  } catch (error) {
    return `flush failed: ${(error as Error).message}`;
  }
}

/** Runs one fuzz from a fresh data directory; the child is stopped and its data removed after. */
export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const sieve = await startSieve();
  try {
    const canary = await pushCanary(sieve.url);
    const nowMs = Date.now();
    const total = 2 * options.perKind;
    const startRssBytes = rssBytes(sieve.pid);
    const rss = new RssSampler(sieve.pid);
    const probe = new ReadyProbe(sieve.url);
    let run: RunStats;
    let readyStats: Promise<ReadyStats>;
    try {
      run = await runRequests({
        url: sieve.url,
        seed: options.seed,
        count: total,
        concurrency: options.concurrency,
        make: (rng, index) => fuzzRequest(rng, index, nowMs),
        keepGoing: () => sieve.alive(),
        ...(options.onAnswer !== undefined && {
          onAnswer: (n: number) => options.onAnswer?.(n, total),
        }),
      });
    } finally {
      rss.stop();
      readyStats = probe.stop();
    }
    const ready = await readyStats;
    const alive = sieve.alive();
    const read = () => readCanary(sieve.url, canary);
    const canaryAfterFuzz = await canaryCheck(sieve, canary.lines, read);
    const flushed = alive ? await flush(sieve.url) : "process not running";
    const canaryAfterFlush =
      flushed !== "" ? flushed : await canaryCheck(sieve, canary.lines, read);
    return {
      seed: options.seed,
      run,
      ready,
      startRssBytes,
      peakRssBytes: rss.peakBytes,
      alive,
      canaryAfterFuzz,
      canaryAfterFlush,
      output: sieve.child.output(),
    };
  } finally {
    await sieve.dispose();
  }
}
