/**
 * A pushed stream's label set, read: parsed, given its discovered `service_name`, printed
 * in canonical form and fingerprinted, or why it cannot be. The tenant's limits are not
 * applied here: the caller applies each push's to `pushed`, so that a set read once serves
 * every push that sends it (see {@link LabelSetCache}).
 */
import {
  LabelsError,
  MAX_LABELS_STRING,
  fingerprint,
  isValidLabelName,
  labelsString,
  parseLabels,
} from "@sieve/labels";
import type { Label } from "@sieve/labels";
import { LRUCache } from "lru-cache";
import { UNKNOWN_SERVICE } from "./otlp.js";
import { messages } from "./validation.js";

/** A label set as read, or the `invalid_labels` message that refuses its stream. */
export type LabelSet =
  | { readonly error: string }
  | {
      /** As pushed, parsed and sorted: what the limits apply to. */
      readonly pushed: readonly Label[];
      /** With `service_name` discovered. */
      readonly labels: readonly Label[];
      readonly canonical: string;
      /** Why the canonical string would not read back (see `unreadableError`). */
      readonly unreadable: string | undefined;
      readonly fingerprint: bigint;
    };

/** A label set sent as text (protobuf's `labels`, `{a="b"}`). */
export function readLabelText(text: string, discover: readonly string[]): LabelSet {
  let pushed: readonly Label[];
  try {
    pushed = parseLabels(text);
  } catch (error) {
    if (!(error instanceof LabelsError)) throw error;
    return { error: messages.invalidLabels(text, error.message) };
  }
  return described(pushed, discover);
}

/** A label set sent as pairs (JSON, OTLP), sorted; `text` is it printed, for messages. */
export function readLabelPairs(
  pushed: readonly Label[],
  text: string,
  discover: readonly string[],
): LabelSet {
  for (const l of pushed) {
    if (!isValidLabelName(l.name)) {
      const error = new LabelsError("invalid_label_name", JSON.stringify(l.name));
      return { error: messages.invalidLabels(text, error.message) };
    }
  }
  return described(pushed, discover);
}

function described(pushed: readonly Label[], discover: readonly string[]): LabelSet {
  const labels = withServiceName(pushed, discover);
  const canonical = labelsString(labels);
  return {
    pushed,
    labels,
    canonical,
    unreadable: unreadableError(canonical, labels),
    fingerprint: fingerprint(canonical),
  };
}

/**
 * Label sets sent as text, read, by their text: a client sends the same few thousand
 * streams push after push, and parsing each twice (as sent, then its canonical string) and
 * fingerprinting it took 3 of the 10 ms a push worker spent on a body of 500 streams.
 * Least recently used sets go past `maxSets` sets or `maxChars` characters of text; a set
 * longer than a 256th of `maxChars` is read every time; a change of the service name rule
 * empties it.
 */
export class LabelSetCache {
  private readonly sets: LRUCache<string, LabelSet>;
  private discoverKey = "";

  constructor(maxSets = 16_384, maxChars = 4 << 20) {
    this.sets = new LRUCache<string, LabelSet>({
      max: maxSets,
      maxSize: maxChars,
      maxEntrySize: Math.floor(maxChars / 256),
      sizeCalculation: (_set, text) => Math.max(1, text.length),
    });
  }

  /** Sets held. */
  get size(): number {
    return this.sets.size;
  }

  /** Characters of label text held (the sets' own copies are a few times that in bytes). */
  get chars(): number {
    return this.sets.calculatedSize;
  }

  /** `text` read with `discover` (`discoverKey` names that list: JSON of it). */
  read(text: string, discover: readonly string[], discoverKey: string): LabelSet {
    if (discoverKey !== this.discoverKey) {
      this.sets.clear();
      this.discoverKey = discoverKey;
    }
    let set = this.sets.get(text);
    if (set === undefined) {
      set = readLabelText(text, discover);
      this.sets.set(text, set);
    }
    return set;
  }
}

/**
 * Loki's service name discovery (`discover_service_name`): a stream without `service_name`
 * gets the value of the first label of `discover` it has, or `unknown_service`; an empty
 * list turns it off. Grafana's Logs Drilldown lists services by this label.
 */
export function withServiceName(
  labels: readonly Label[],
  discover: readonly string[],
): readonly Label[] {
  if (discover.length === 0) return labels;
  // Loki leaves its own aggregated-metric streams (pattern ingester) as they are.
  if (labels.some((l) => l.name === "service_name" || l.name === "__aggregated_metric__")) {
    return labels;
  }
  let value = UNKNOWN_SERVICE;
  for (const name of discover) {
    const found = labels.find((l) => l.name === name && l.value !== "");
    if (found !== undefined) {
      value = found.value;
      break;
    }
  }
  const out = [...labels, { name: "service_name", value }];
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Why the read side could not parse `canonical` back to `labels`, or undefined. Readers
 * (the ingester, the querier, index segments) parse the canonical string again, so a
 * label set that does not round-trip would fail every read of the tenant: it is refused
 * here instead. Decoded strings are well-formed UTF-16 (see decode.ts), which makes this
 * hold by construction; the check keeps it so whatever a decoder lets through.
 */
function unreadableError(canonical: string, labels: readonly Label[]): string | undefined {
  if (canonical.length > MAX_LABELS_STRING) {
    return `parse error: label set longer than ${MAX_LABELS_STRING}`;
  }
  let back: Label[];
  try {
    back = parseLabels(canonical);
  } catch (error) {
    if (error instanceof LabelsError) return error.message;
    throw error;
  }
  if (back.length !== labels.length) return "parse error: labels do not read back";
  for (let i = 0; i < back.length; i++) {
    if (back[i]!.name !== labels[i]!.name || back[i]!.value !== labels[i]!.value) {
      return "parse error: labels do not read back";
    }
  }
  return undefined;
}
