/**
 * Label records: parsed from the series' canonical strings (cached), built from an entry's
 * structured metadata, and keyed canonically for ordering and deduplication.
 */
import type { MetadataPair } from "@sieve/chunk";
import { parseLabels } from "@sieve/labels";
import { LRUCache } from "lru-cache";

/** The shared empty record (metadata of an entry that has none). */
export const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

/** The record of an entry's structured metadata ({@link EMPTY} when it has none). */
export function metadataRecord(pairs: readonly MetadataPair[]): Readonly<Record<string, string>> {
  if (pairs.length === 0) return EMPTY;
  const out: Record<string, string> = {};
  for (const p of pairs) out[p.name] = p.value;
  return out;
}

const labelKeys = new WeakMap<object, string>();

/** A canonical key of a label set (sorted names), memoised per object. */
export function labelsKey(labels: Readonly<Record<string, string>>): string {
  let key = labelKeys.get(labels);
  if (key === undefined) {
    const names = Object.keys(labels).sort();
    key = JSON.stringify(names.map((n) => [n, labels[n]]));
    labelKeys.set(labels, key);
  }
  return key;
}

/** Label records of canonical label strings (`{a="b"}`), parsed once into a bounded LRU. */
export class ParsedLabels {
  private readonly parsed = new LRUCache<string, Readonly<Record<string, string>>>({
    max: 100_000,
  });

  /** The record of `canonical`. Treat it as read-only: it is shared. */
  of(canonical: string): Readonly<Record<string, string>> {
    let labels = this.parsed.get(canonical);
    if (labels === undefined) {
      const out: Record<string, string> = {};
      for (const l of parseLabels(canonical)) out[l.name] = l.value;
      labels = out;
      this.parsed.set(canonical, labels);
    }
    return labels;
  }
}
