import { xxhash64 } from "@sieve/bloom";
import { LabelsError } from "./errors.js";
import type { Label } from "./parse.js";
import { isValidLabelName } from "./parse.js";
import { quoteGo } from "./quote.js";

/**
 * Loki's `labels.String()` of a sorted label set: `{a="b", c="d"}`, values quoted as Go's
 * `strconv.Quote` does, names bare (quoted only if not a legacy name, as Prometheus 3).
 * This string is the stream's identity in Sieve: the queue record carries it and the
 * fingerprint hashes it.
 */
export function labelsString(labels: readonly Label[]): string {
  let out = "{";
  for (let i = 0; i < labels.length; i++) {
    const { name, value } = labels[i]!;
    if (i > 0) out += ", ";
    out += isValidLabelName(name) ? name : quoteGo(name);
    out += "=";
    out += quoteGo(value);
  }
  return out + "}";
}

/**
 * Labels from a JSON push's `stream` object, normalised like {@link parseLabels}: empty
 * values dropped, sorted by name. Names are not checked here; validation does that.
 */
export function labelsFromObject(stream: Readonly<Record<string, unknown>>): Label[] {
  const out: Label[] = [];
  for (const name of Object.keys(stream)) {
    const value = stream[name];
    if (typeof value === "string" && value !== "") out.push({ name, value });
  }
  out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return out;
}

/**
 * A stream's fingerprint: xxhash64 (seed 0) of the UTF-8 bytes of its canonical label string
 * ({@link labelsString}), unsigned. Same labels, same fingerprint, on every process.
 */
export function fingerprint(canonical: string): bigint {
  return xxhash64(canonical);
}

/** The fingerprint as 8 bytes, big-endian: the queue record key (Kafka message key). */
export function fingerprintKey(fp: bigint): Uint8Array {
  if (fp < 0n || fp > 0xffffffffffffffffn) {
    throw new LabelsError("invalid_fingerprint", `${fp} is not an unsigned 64-bit integer`);
  }
  const key = new Uint8Array(8);
  new DataView(key.buffer).setBigUint64(0, fp, false);
  return key;
}

/** Which of `partitions` queue partitions a stream goes to: fingerprint mod partitions. */
export function partitionOf(fp: bigint, partitions: number): number {
  return Number(fp % BigInt(partitions));
}
