/**
 * Where pushes are prepared (decompressed, decoded, validated, encoded; see prepare.ts):
 * on a pool of worker threads, so that no body, however large, deep or hostile, holds up
 * the event loop that answers every other request, and so that decoding uses every core.
 * Small uncompressed bodies are prepared inline, where the hop would cost more than the
 * work.
 */
import { Piscina } from "piscina";
import { preparePush } from "./prepare.js";
import type { PrepareOutcome, PrepareTask } from "./prepare.js";
import { snappyDeclaredLength } from "@sieve/proto";

/** How pushes are prepared. */
export interface PreparerOptions {
  /** Worker threads; 0 prepares every push on the main thread (tests, tiny machines). */
  readonly threads: number;
  /** Old-generation heap of each worker, in MiB: a push that needs more gets a 413. */
  readonly heapMb: number;
  /**
   * Uncompressed bodies (JSON bytes, or snappy's declared length) up to this size are
   * prepared inline. Gzip and deflate bodies always go to a worker: 1 KB can inflate to 1 MB.
   */
  readonly inlineMaxBytes: number;
}

/**
 * The worker's entry, as JavaScript: `push-worker-entry.cjs`, which imports
 * `push-worker.js` (it says why). `new URL` relative to this module, through `dist/`, so it
 * resolves both from `dist/workers.js` (production) and from `src/workers.ts` (vitest and
 * tsx load sources, and a worker cannot load TypeScript): the build runs before tests.
 */
const WORKER_FILE = new URL("../dist/push-worker-entry.cjs", import.meta.url);

/** Prepares pushes on a pool of worker threads, or inline. */
export class PushPreparer {
  private readonly pool: Piscina<PrepareTask, PrepareOutcome> | undefined;

  constructor(private readonly options: PreparerOptions) {
    this.pool =
      options.threads > 0
        ? new Piscina({
            filename: WORKER_FILE.href,
            minThreads: 1,
            maxThreads: options.threads,
            // Workers cost ~10 MB each idle; keep them a minute after a burst.
            idleTimeout: 60_000,
            resourceLimits: { maxOldGenerationSizeMb: options.heapMb },
            // Piscina's default parks idle workers in an Atomics.wait loop: measured with
            // `bench/push.ts --seconds 20 --threads 2` (WAL, protobuf), 36.9 MB/s at 21.8 MB
            // per server CPU-second with it, 43.2 MB/s at 25.0 without (medians of 3).
            atomics: "disabled",
          })
        : undefined;
  }

  /** Prepares one push; the body's buffer is transferred to the worker (do not reuse it). */
  async prepare(task: PrepareTask): Promise<PrepareOutcome> {
    if (this.pool === undefined || this.inline(task)) return preparePush(task);
    const { buffer, byteOffset, byteLength } = task.body;
    // Only a buffer the body owns whole can be transferred; a view of a shared one is copied.
    const whole =
      buffer instanceof ArrayBuffer && byteOffset === 0 && byteLength === buffer.byteLength;
    try {
      return await this.pool.run(task, whole ? { transferList: [buffer] } : {});
    } catch (error) {
      if ((error as { code?: string }).code === "ERR_WORKER_OUT_OF_MEMORY") {
        return {
          ok: false,
          refusal: {
            status: 413,
            message: `push too large to decode within ${this.options.heapMb} MiB of memory`,
          },
        };
      }
      throw error;
    }
  }

  private inline(task: PrepareTask): boolean {
    if (task.encoding !== "identity") return false;
    const size = task.format === "json" ? task.body.length : snappyDeclaredLength(task.body);
    return size >= 0 && size <= this.options.inlineMaxBytes;
  }

  /** Stops the workers (in-flight tasks finish first). */
  async close(): Promise<void> {
    await this.pool?.close();
  }
}
