/**
 * Log volume (Loki's `index/volume` and `index/volume_range`): the bytes of a tenant's
 * series over a time range, per series or per label, in time buckets. One accumulator
 * serves both sides of a query: the querier adds the index's chunks and merges what each
 * ingester accumulated over its unflushed chunks, so both count alike.
 *
 * As Loki (`pkg/ingester/instance.go` getVolume, `pkg/storage/stores/index/seriesvolume`,
 * `pkg/querier/queryrange/volume.go`):
 * - a chunk counts its bytes in proportion to the part of its time span inside a bucket
 *   (Loki's `GetFactorOfTime`; a chunk of one instant counts whole where it lies);
 * - with target labels, only series holding every target label the query's matchers do
 *   not name count (Loki adds `label=~".+"` for those), and a series is named by its
 *   target labels (`aggregateBy=series`) or adds to each of them (`labels`);
 * - without, `series` names a series by the labels the query's matchers name (all its
 *   labels when they name none), and `labels` adds a series' bytes to each of its labels;
 * - past `maxSeries` names, the query is refused in Loki's words.
 *
 * Buckets follow Loki's `ForInterval`: aligned to multiples of the step since the epoch,
 * the first starting at the query's start, the last ending at its end. Loki's inclusive
 * bucket ends (1 ms before the next bucket) leave gaps at nanosecond resolution, so here
 * buckets are half-open and tile the range (the last includes `end`); a sample's time is
 * Loki's: the bucket's end, 1 ms before the next bucket (the range's end for the last), at
 * millisecond resolution.
 */
import { labelsString } from "@sieve/labels";

/** How volumes are grouped: Loki's `aggregateBy`. */
export type VolumeAggregateBy = "series" | "labels";

/** Loki's default `limit` of a volume query. */
export const DEFAULT_VOLUME_LIMIT = 100;

/** Loki's words when a volume query names too many series (`ErrVolumeMaxSeriesHit`). */
export function volumeMaxSeriesMessage(maxSeries: number): string {
  return `the query hit the max number of series limit (limit: ${maxSeries} series)`;
}

/** Thrown past {@link VolumeSpec.maxSeries}; its message is Loki's. */
export class VolumeLimitError extends Error {
  override readonly name = "VolumeLimitError";
  readonly status = 400;
  constructor(readonly maxSeries: number) {
    super(volumeMaxSeriesMessage(maxSeries));
  }
}

/** What a volume query groups, over which range, in which buckets. */
export interface VolumeSpec {
  /** Unix ns, inclusive. */
  readonly start: bigint;
  /** Unix ns, inclusive. */
  readonly end: bigint;
  /** Bucket width in ns; 0 = one bucket, the whole range (an instant query). */
  readonly step: bigint;
  readonly aggregateBy: VolumeAggregateBy;
  /** Loki's `targetLabels`; empty = none. */
  readonly targetLabels: readonly string[];
  /** Names of the query's matchers (what `series` keeps when there are no target labels). */
  readonly matcherNames: readonly string[];
  /** Most names accumulated before the query is refused (Loki's `volume_max_series`). */
  readonly maxSeries: number;
  /**
   * Most (name, bucket) cells held, the accumulator's memory (about 64 bytes each); past
   * it, `add` throws a {@link VolumeCellsError}. Default: no bound beyond `maxSeries`.
   */
  readonly maxCells?: number;
}

/** Thrown past {@link VolumeSpec.maxCells}. */
export class VolumeCellsError extends Error {
  override readonly name = "VolumeCellsError";
  constructor(readonly maxCells: number) {
    super(`a volume answer of more than ${maxCells} (series, step) values`);
  }
}

/** One bucket: [from, through), the last one [from, through]. */
export interface VolumeBucket {
  readonly from: bigint;
  readonly through: bigint;
  /** The sample's time, Unix seconds (to the millisecond). */
  readonly at: number;
}

/** One name's bytes in one bucket: what an ingester answers and a querier merges. */
export interface VolumeEntry {
  readonly name: string;
  readonly bucket: number;
  readonly bytes: number;
}

const NS_PER_MS = 1_000_000n;
/**
 * Most buckets a spec may make: Loki's 11,000 points per series, and two more for the
 * aligned first and last buckets.
 */
export const MAX_VOLUME_BUCKETS = 11_002;

const floorDiv = (a: bigint, b: bigint): bigint => {
  const q = a / b;
  return q * b > a ? q - 1n : q;
};

/** The buckets of [start, end] with `step` (0: one bucket), as described above. */
export function volumeBuckets(start: bigint, end: bigint, step: bigint): VolumeBucket[] {
  const at = (ns: bigint): number => Number(floorDiv(ns, NS_PER_MS)) / 1000;
  if (step <= 0n || end <= start) return [{ from: start, through: end, at: at(end) }];
  const out: VolumeBucket[] = [];
  let from = start;
  for (let b = floorDiv(start, step) * step; b < end; b += step) {
    const next = b + step;
    if (next >= end) {
      out.push({ from, through: end, at: at(end) });
      break;
    }
    out.push({ from, through: next, at: at(next - NS_PER_MS) });
    from = next;
    if (out.length > MAX_VOLUME_BUCKETS) {
      throw new RangeError(`more than ${MAX_VOLUME_BUCKETS} volume buckets`);
    }
  }
  return out;
}

/**
 * The share of chunk [from, through] (inclusive) inside bucket `b` (half-open, the last
 * inclusive): by time, as Loki's `GetFactorOfTime`; a chunk of one instant is 1 or 0.
 */
export function bucketFactor(
  b: VolumeBucket,
  last: boolean,
  from: bigint,
  through: bigint,
): number {
  if (from === through) {
    return from >= b.from && (from < b.through || (last && from === b.through)) ? 1 : 0;
  }
  const lo = from > b.from ? from : b.from;
  const hi = through < b.through ? through : b.through;
  if (hi <= lo) return 0;
  return Number(hi - lo) / Number(through - from);
}

/** Accumulates bytes by name and bucket; see the file comment. */
export class VolumeAccumulator {
  readonly buckets: readonly VolumeBucket[];
  /** Name → bucket → bytes. */
  private readonly volumes = new Map<string, Map<number, number>>();
  private cellCount = 0;
  private readonly targets: ReadonlySet<string>;
  /** Target labels a series must hold: those the query's matchers do not name. */
  private readonly required: ReadonlySet<string>;
  /** Labels a series is named by (`series`); undefined = all of them. */
  private readonly keep: ReadonlySet<string> | undefined;

  constructor(readonly spec: VolumeSpec) {
    this.buckets = volumeBuckets(spec.start, spec.end, spec.step);
    this.targets = new Set(spec.targetLabels);
    const named = new Set(spec.matcherNames);
    this.required = new Set(spec.targetLabels.filter((t) => !named.has(t)));
    const names = spec.targetLabels.length > 0 ? spec.targetLabels : spec.matcherNames;
    const keep = new Set(names.filter((n) => n !== ""));
    this.keep = keep.size > 0 ? keep : undefined;
  }

  /**
   * The names a series adds to, or undefined when it does not count (it lacks a target
   * label). `labels` must be the series' labels, sorted by name (a canonical label set).
   */
  namesOf(labels: readonly { name: string; value: string }[]): string[] | undefined {
    if (this.required.size > 0) {
      let held = 0;
      for (const l of labels) if (l.value !== "" && this.required.has(l.name)) held++;
      if (held < this.required.size) return undefined;
    }
    if (this.spec.aggregateBy === "labels") {
      return labels
        .filter((l) => this.targets.size === 0 || this.targets.has(l.name))
        .map((l) => l.name);
    }
    const keep = this.keep;
    return [labelsString(keep === undefined ? labels : labels.filter((l) => keep.has(l.name)))];
  }

  /** Adds a chunk of `bytes` over [from, through] to each of `names`, bucket by bucket. */
  addChunk(names: readonly string[], from: bigint, through: bigint, bytes: number): void {
    if (through < this.spec.start || from > this.spec.end) return;
    const n = this.buckets.length;
    // The first bucket the chunk may touch, by binary search: buckets are sorted.
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.buckets[mid]!.through <= from) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < n; i++) {
      const b = this.buckets[i]!;
      if (b.from > through) break;
      const factor = bucketFactor(b, i === n - 1, from, through);
      if (factor <= 0) continue;
      const share = Math.floor(bytes * factor);
      for (const name of names) this.add(name, i, share);
    }
  }

  /** Adds what another accumulator (an ingester's) found. */
  add(name: string, bucket: number, bytes: number): void {
    if (bucket < 0 || bucket >= this.buckets.length) return;
    let byBucket = this.volumes.get(name);
    if (byBucket === undefined) {
      if (this.volumes.size >= this.spec.maxSeries) throw new VolumeLimitError(this.spec.maxSeries);
      byBucket = new Map();
      this.volumes.set(name, byBucket);
    }
    const held = byBucket.get(bucket);
    if (held === undefined) {
      if (++this.cellCount > (this.spec.maxCells ?? Number.POSITIVE_INFINITY)) {
        throw new VolumeCellsError(this.spec.maxCells!);
      }
      byBucket.set(bucket, bytes);
    } else byBucket.set(bucket, held + bytes);
  }

  /** (name, bucket) cells held. */
  get cells(): number {
    return this.cellCount;
  }

  /** Names accumulated. */
  get size(): number {
    return this.volumes.size;
  }

  /** Every (name, bucket, bytes), for an ingester's answer. */
  entries(): VolumeEntry[] {
    const out: VolumeEntry[] = [];
    for (const [name, byBucket] of this.volumes) {
      for (const [bucket, bytes] of byBucket) out.push({ name, bucket, bytes });
    }
    return out;
  }

  /**
   * Each bucket's `limit` largest names (bytes descending, then name ascending: Loki's
   * `MapToVolumeResponse`), as one series per name with its samples in time order.
   */
  top(limit: number): { name: string; samples: { at: number; bytes: number }[] }[] {
    const perBucket: { name: string; bytes: number }[][] = this.buckets.map(() => []);
    for (const [name, byBucket] of this.volumes) {
      for (const [bucket, bytes] of byBucket) perBucket[bucket]!.push({ name, bytes });
    }
    const series = new Map<string, { at: number; bytes: number }[]>();
    perBucket.forEach((list, bucket) => {
      list.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const { name, bytes } of list.slice(0, limit)) {
        let samples = series.get(name);
        if (samples === undefined) series.set(name, (samples = []));
        samples.push({ at: this.buckets[bucket]!.at, bytes });
      }
    });
    return [...series].map(([name, samples]) => ({ name, samples }));
  }
}
