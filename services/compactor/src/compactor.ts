/**
 * The compactor role (Loki's `pkg/compactor/compactor.go`, without the ring): a loop that
 * takes the store's lock, and while it holds it, every `compactionIntervalMs` runs index
 * compaction, retention and garbage collection (run.ts), then the plugged-in jobs (delete
 * request processing). A compactor without the lock waits, trying again every
 * `lockRetryMs`, and takes over once the holder's lease lapses.
 */
import { hostname } from "node:os";
import type { ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { retentionConfig, type CompactorConfig } from "./config.js";
import { CompactorLock, LockLostError } from "./lock.js";
import { CompactorMetrics, type RunOutcome } from "./metrics.js";
import { Retention } from "@sieve/logql";
import { runOnce, type RunReport } from "./run.js";

/** What a {@link CompactorJob} runs with. */
export interface JobContext {
  readonly store: ObjectStore;
  readonly logger: Logger;
  /**
   * The lock: `check()` throws unless this compactor still holds it. Call it before every
   * deletion or swap, as the compactor's own steps do.
   */
  readonly lock: Pick<CompactorLock, "check" | "held">;
  /** The retention rules (a job that rewrites chunks must not resurrect expired lines). */
  readonly retention: Retention;
}

/**
 * Work plugged into each run, after compaction, retention and garbage collection, under
 * the same lock: delete request processing is one. A job that throws fails the run (its
 * error is logged and counted); the next run calls it again.
 */
export interface CompactorJob {
  readonly name: string;
  run(ctx: JobContext): Promise<void>;
}

/** What a compactor is made of. */
export interface CompactorDeps {
  readonly config: CompactorConfig;
  readonly store: ObjectStore;
  readonly logger: Logger;
  readonly registry?: Registry;
  readonly jobs?: readonly CompactorJob[];
  /** Wall clock, Unix ms (retention and object ages); default `Date.now`. */
  readonly now?: () => number;
}

/** The id a compactor uses when none is configured: `<host>-<pid>`, as a segment writer name. */
export function defaultInstanceId(): string {
  const host = hostname()
    .replace(/[^A-Za-z0-9_.-]/g, "-")
    .slice(0, 48);
  return `${host === "" ? "compactor" : host}-${process.pid}`;
}

/** One compactor. */
export class Compactor {
  readonly metrics: CompactorMetrics;
  readonly lock: CompactorLock;
  readonly retention: Retention;
  readonly instanceId: string;
  private readonly deps: CompactorDeps;
  private readonly jobs: CompactorJob[];
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(deps: CompactorDeps) {
    this.deps = deps;
    this.instanceId = deps.config.instanceId === "" ? defaultInstanceId() : deps.config.instanceId;
    this.metrics = new CompactorMetrics(deps.registry);
    this.lock = new CompactorLock(deps.store, {
      owner: this.instanceId,
      ttlMs: deps.config.lockTtlMs,
    });
    this.retention = new Retention(retentionConfig(deps.config));
    this.jobs = [...(deps.jobs ?? [])];
  }

  /** Plugs a job into every later run (the lead wires the delete processor here). */
  addJob(job: CompactorJob): void {
    this.jobs.push(job);
  }

  /** Whether this compactor holds the lock now. */
  get holdsLock(): boolean {
    return this.lock.held;
  }

  /**
   * One run: compaction, retention, garbage, then the jobs. The lock must be held (see
   * {@link start}); a run that loses it stops before its next deletion with
   * {@link LockLostError}.
   */
  async runOnce(): Promise<RunReport> {
    const { config, store, logger } = this.deps;
    const report = await runOnce({
      store,
      lock: this.lock,
      retention: this.retention,
      logger,
      metrics: this.metrics,
      writer: this.instanceId,
      minSegmentsToCompact: config.minSegmentsToCompact,
      maxSegmentChunks: config.maxSegmentChunks,
      garbageGracePeriodMs: config.garbageGracePeriodMs,
      now: this.deps.now ?? Date.now,
    });
    for (const job of this.jobs) {
      try {
        await job.run({ store, logger, lock: this.lock, retention: this.retention });
        this.metrics.jobRuns.inc({ job: job.name, outcome: "success" });
      } catch (error) {
        this.metrics.jobRuns.inc({ job: job.name, outcome: "failure" });
        throw error;
      }
    }
    return report;
  }

  /** Starts the loop (see the top of this file). */
  start(): void {
    if (this.loopDone !== undefined) return;
    const { lockTtlMs } = this.deps.config;
    this.renewTimer = setInterval(() => {
      if (!this.lock.held) return;
      this.lock.renew().then(
        (ok) => {
          if (!ok) this.lostLock();
        },
        (error: unknown) => {
          this.deps.logger.warn({ err: error }, "compactor lock renewal failed");
        },
      );
    }, lockTtlMs / 3);
    this.renewTimer.unref();
    this.loopDone = this.loop();
  }

  /** Stops the loop, waits for a run in progress, and releases the lock. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.renewTimer);
    this.wake?.();
    await this.loopDone;
    await this.running?.catch(() => undefined);
    await this.lock.release().catch((error: unknown) => {
      this.deps.logger.warn({ err: error }, "could not release the compactor lock");
    });
    this.metrics.lockHeld.set(0);
  }

  private lostLock(): void {
    this.metrics.lockHeld.set(0);
    this.deps.logger.warn({ owner: this.instanceId }, "compactor lock lost to another compactor");
  }

  private async loop(): Promise<void> {
    const { compactionIntervalMs, lockRetryMs } = this.deps.config;
    let nextRun = 0;
    while (!this.stopping) {
      if (!this.lock.held) {
        let held = false;
        try {
          held = await this.lock.acquire();
        } catch (error) {
          this.deps.logger.warn({ err: error }, "could not read or take the compactor lock");
        }
        this.metrics.lockHeld.set(held ? 1 : 0);
        if (!held) {
          await this.sleep(lockRetryMs);
          continue;
        }
        this.deps.logger.info({ owner: this.instanceId }, "compactor lock taken");
        nextRun = 0;
      }
      const now = performance.now();
      if (now >= nextRun) {
        nextRun = now + compactionIntervalMs;
        const run = this.logRun();
        this.running = run;
        await run;
        this.running = undefined;
        continue;
      }
      await this.sleep(Math.min(nextRun - now, lockRetryMs));
    }
  }

  /**
   * Whether a run is in progress: work on this thread that others sharing it may yield
   * to (the main thread's needle queries go to query workers meanwhile: inline.ts).
   */
  get busy(): boolean {
    return this.running !== undefined;
  }

  /** One run, timed, counted and logged; never throws. */
  private async logRun(): Promise<void> {
    const started = performance.now();
    let outcome: RunOutcome = "success";
    let report: RunReport | undefined;
    try {
      report = await this.runOnce();
    } catch (error) {
      outcome = error instanceof LockLostError ? "lock_lost" : "failure";
      this.deps.logger.error({ err: error, outcome }, "compactor run failed");
    }
    const seconds = (performance.now() - started) / 1000;
    this.metrics.runs.inc({ outcome });
    this.metrics.runDuration.observe({ outcome }, seconds);
    if (outcome === "success") {
      this.metrics.lastSuccessfulRun.set(Date.now() / 1000);
      this.deps.logger.info({ ...report, seconds }, "compactor run done");
    }
    if (outcome === "lock_lost") this.lostLock();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}
