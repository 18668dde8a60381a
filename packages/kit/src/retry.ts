/**
 * Retrying what may succeed later, and only that: one classification of errors and one
 * backoff (`p-retry`'s exponential backoff with jitter) shared by the queue consumers and
 * the ingester, so a programming error is reported once instead of retried forever.
 */
import pRetry from "p-retry";

/** Errors of the JavaScript engine: a bug or a malformed value, never fixed by waiting. */
const PROGRAMMING_ERRORS = [TypeError, RangeError, SyntaxError, ReferenceError, EvalError];

/**
 * Whether retrying the call that threw `error` may succeed. An error that says so itself
 * (`retriable`, as QueueError and kafkajs' errors do) decides; engine errors (TypeError,
 * RangeError, …) are bugs or malformed data and are not retriable; anything else (I/O,
 * network, object store) is, as a failure of something outside this process.
 */
export function isRetriable(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const own = (error as { retriable?: unknown }).retriable;
  if (typeof own === "boolean") return own;
  return !PROGRAMMING_ERRORS.some((type) => error instanceof type);
}

/** Options of {@link retryRetriable}. */
export interface RetryOptions {
  /** First pause; each next one doubles, times a random factor in [1, 2) (jitter). */
  readonly minBackoffMs: number;
  /** Longest pause. */
  readonly maxBackoffMs: number;
  /**
   * Stops retrying: the call rejects with the signal's reason (aborted during a pause) or
   * with the failure of the attempt in flight when it aborted.
   */
  readonly signal?: AbortSignal;
  /** Attempts in all, the first included; default unlimited (retry until success or stop). */
  readonly maxAttempts?: number;
  /** Extra condition for another attempt (e.g. "still running"), checked after each failure. */
  readonly shouldRetry?: () => boolean;
  /**
   * Told of every failed attempt, before the pause; `retrying` says whether another
   * attempt follows (false: the call rejects with `error`).
   */
  readonly onFailure?: (error: unknown, attempt: number, retrying: boolean) => void;
}

/**
 * Runs `call` until it resolves, retrying failures that {@link isRetriable} accepts with
 * exponential backoff and jitter, up to `maxAttempts` (default: no limit); rejects with the
 * first non-retriable failure, the last failure once attempts run out, or when
 * `shouldRetry` says stop, or on abort.
 */
export function retryRetriable<T>(
  call: (attempt: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const maxAttempts = options.maxAttempts ?? Number.POSITIVE_INFINITY;
  const more = (error: unknown, attempt: number): boolean =>
    attempt < maxAttempts &&
    isRetriable(error) &&
    (options.shouldRetry?.() ?? true) &&
    options.signal?.aborted !== true;
  return pRetry(call, {
    retries: maxAttempts - 1,
    factor: 2,
    minTimeout: options.minBackoffMs,
    maxTimeout: options.maxBackoffMs,
    randomize: true,
    unref: true,
    ...(options.signal !== undefined && { signal: options.signal }),
    onFailedAttempt: ({ error, attemptNumber }) => {
      // Stopping is not a failure of the call (it may even have succeeded just before).
      if (options.signal?.aborted === true) return;
      options.onFailure?.(error, attemptNumber, more(error, attemptNumber));
    },
    shouldRetry: ({ error, attemptNumber }) => more(error, attemptNumber),
  });
}
