/**
 * Labels of one entry while it moves through a pipeline: stream labels, then structured
 * metadata, then labels set by stages (parsers, formatters, errors), looked up in reverse
 * order of precedence as Loki's `LabelsBuilder` does. Overrides live in two parallel arrays
 * reused across entries, so that a pipeline allocates nothing for an entry it drops.
 */

/** A label lookup that tolerates plain objects (prototype keys are not labels). */
export function own(rec: Readonly<Record<string, string>>, name: string): string | undefined {
  const v = rec[name];
  return typeof v === "string" ? v : undefined;
}

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});
/** Overrides per entry above which {@link LabelsBuilder} indexes them by name. */
const INDEX_FROM = 32;

/** Loki's error label and its details. */
export const ERROR_LABEL = "__error__";
export const ERROR_DETAILS_LABEL = "__error_details__";

/** The mutable label state of one entry. */
export class LabelsBuilder {
  stream: Readonly<Record<string, string>> = EMPTY;
  metadata: Readonly<Record<string, string>> = EMPTY;
  private names: string[] = [];
  private values: (string | null)[] = [];
  private n = 0;
  /**
   * Position of each override by name, built once an entry has more than
   * {@link INDEX_FROM}: a linear scan per `set` made `| json` quadratic in the keys of a
   * line (30,000 keys: 9.4 s for one line); typical lines stay on the faster scan.
   */
  private index: Map<string, number> | undefined;

  /** Starts a new entry. */
  reset(
    stream: Readonly<Record<string, string>>,
    metadata: Readonly<Record<string, string>>,
  ): void {
    this.stream = stream;
    this.metadata = metadata;
    this.n = 0;
    this.index = undefined;
  }

  /** The slot of an override, or -1. Names are unique among the first `n` slots. */
  private find(name: string): number {
    if (this.index !== undefined) return this.index.get(name) ?? -1;
    for (let i = this.n - 1; i >= 0; i--) if (this.names[i] === name) return i;
    return -1;
  }

  private append(name: string, value: string | null): void {
    this.names[this.n] = name;
    this.values[this.n] = value;
    if (this.index !== undefined) this.index.set(name, this.n);
    else if (this.n === INDEX_FROM) {
      this.index = new Map();
      for (let i = 0; i <= this.n; i++) this.index.set(this.names[i]!, i);
    }
    this.n++;
  }

  /** The current value of a label, or undefined when it is absent. */
  get(name: string): string | undefined {
    const i = this.find(name);
    if (i >= 0) return this.values[i] ?? undefined;
    return own(this.metadata, name) ?? own(this.stream, name);
  }

  /** Sets a label (parsed or formatted). */
  set(name: string, value: string): void {
    const i = this.find(name);
    if (i >= 0) this.values[i] = value;
    else this.append(name, value);
  }

  /** Removes a label, whatever its origin. */
  delete(name: string): void {
    if (this.get(name) === undefined) return;
    const i = this.find(name);
    if (i >= 0) this.values[i] = null;
    else this.append(name, null);
  }

  /** True when a stage has set `__error__`. */
  hasError(): boolean {
    const e = this.get(ERROR_LABEL);
    return e !== undefined && e !== "";
  }

  /** Sets `__error__` and `__error_details__`, keeping the first error as Loki does. */
  setError(kind: string, details: string): void {
    if (this.hasError()) return;
    this.set(ERROR_LABEL, kind);
    this.set(ERROR_DETAILS_LABEL, details);
  }

  /** True when `name` is a stream label (parsers then write `name_extracted`). */
  isStreamLabel(name: string): boolean {
    return own(this.stream, name) !== undefined;
  }

  /** Every label name currently present. */
  names_(): string[] {
    const out = new Set<string>([...Object.keys(this.stream), ...Object.keys(this.metadata)]);
    for (let i = 0; i < this.n; i++) out.add(this.names[i]!);
    return [...out].filter((k) => this.get(k) !== undefined);
  }

  /**
   * The output label set. With no overrides and no metadata this is the stream's own
   * object, shared: callers must not mutate what a pipeline returns.
   */
  labels(): Readonly<Record<string, string>> {
    if (this.n === 0 && Object.keys(this.metadata).length === 0) return this.stream;
    const out: Record<string, string> = { ...this.stream, ...this.metadata };
    for (let i = 0; i < this.n; i++) {
      const v = this.values[i];
      if (v === null || v === undefined) Reflect.deleteProperty(out, this.names[i]!);
      else out[this.names[i]!] = v;
    }
    return out;
  }
}

/** Loki's `sanitizeLabelKey`: characters outside `[A-Za-z0-9_]` become `_`; a leading digit gets `_`. */
export function sanitizeLabelName(key: string): string {
  let out = SANITIZED.get(key);
  if (out !== undefined) return out;
  out = key;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
    out = key.replace(/[^A-Za-z0-9_]/g, "_");
    if (/^[0-9]/.test(out)) out = "_" + out;
  }
  // Keys repeat from line to line; the cache is bounded so that hostile keys cannot grow it.
  if (SANITIZED.size < 10_000) SANITIZED.set(key, out);
  return out;
}

const SANITIZED = new Map<string, string>();
