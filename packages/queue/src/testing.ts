/**
 * Helpers for tests that run against the real Kafka broker started by
 * `sh scripts/kafka.sh start` (scripts/test.sh starts it and exports KAFKA_BROKERS).
 * Exported as `@sieve/queue/testing` for other packages' tests.
 */
import { randomBytes } from "node:crypto";
import { QueueError } from "./errors.js";

/**
 * The brokers of the test Kafka, from KAFKA_BROKERS (comma-separated `host:port`).
 * Throws a `kafka_brokers_unset` error saying how to start Kafka when it is unset:
 * Kafka tests fail loudly rather than skip.
 */
export function kafkaBrokers(): string[] {
  const value = process.env.KAFKA_BROKERS?.trim();
  if (value === undefined || value === "") throw new QueueError("kafka_brokers_unset");
  return value
    .split(",")
    .map((b) => b.trim())
    .filter((b) => b !== "");
}

/** A topic (or group) name no other test uses: `prefix-<random hex>`. */
export function uniqueName(prefix = "sieve-test"): string {
  return `${prefix}-${randomBytes(6).toString("hex")}`;
}

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this long. Default 30000. */
  readonly timeoutMs?: number;
  /** Check this often. Default 50. */
  readonly intervalMs?: number;
  /** Said in the timeout error. */
  readonly what?: string;
}

/**
 * Resolves with the first value other than undefined, null or false that `condition`
 * returns, checking it every
 * `intervalMs`; rejects when `timeoutMs` passes first. For conditions nothing signals
 * (a broker's group state, another process's output), as kafkajs' own test helpers do.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${options.what ?? "condition"}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
