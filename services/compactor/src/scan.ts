/**
 * What a run sees of the store: every object sorted by kind, the segments live flush
 * manifests protect, and the references the index holds.
 */
import { decodeManifest, MANIFESTS_PREFIX } from "@sieve/ingester";
import { IndexError, decodeSegment, type IndexSegment } from "@sieve/index";
import { isNotFound, type ListedObject, type ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";

/** A tenant's index segments of one day. */
export interface DaySegments {
  readonly tenant: string;
  /** `YYYY-MM-DD`, as in the keys. */
  readonly day: string;
  readonly keys: string[];
}

/** The store's objects by kind, from one listing. */
export interface StoreListing {
  /** Segments by `<tenant>/<day>`. */
  readonly days: Map<string, DaySegments>;
  readonly chunks: ListedObject[];
  readonly blooms: ListedObject[];
  /** Every listed object's size, by key. */
  readonly sizes: Map<string, number>;
}

/**
 * Every object of the store, sorted by the shape of its key: `<tenant>/index/<day>/<id>`,
 * `<tenant>/chunks/…`, `<tenant>/blooms/…`; anything else (`_ingester/…`, `_compactor/…`,
 * delete requests) is none of these and is left alone.
 */
export async function listStore(store: ObjectStore): Promise<StoreListing> {
  const days = new Map<string, DaySegments>();
  const chunks: ListedObject[] = [];
  const blooms: ListedObject[] = [];
  const sizes = new Map<string, number>();
  for (const o of await store.listInfo("")) {
    sizes.set(o.key, o.size);
    const parts = o.key.split("/");
    const [tenant, kind] = parts;
    if (tenant === undefined || parts.length < 3) continue;
    if (kind === "index" && parts.length === 4) {
      const day = parts[2]!;
      const id = `${tenant}/${day}`;
      let d = days.get(id);
      if (d === undefined) days.set(id, (d = { tenant, day, keys: [] }));
      d.keys.push(o.key);
    } else if (kind === "chunks" && parts.length === 4) chunks.push(o);
    else if (kind === "blooms" && parts.length === 4) blooms.push(o);
  }
  return { days, chunks, blooms, sizes };
}

/**
 * The segment keys that live flush manifests list. Read after the segments are listed:
 * an ingester writes a flush's manifest before its segments, so a segment seen in the
 * listing has its manifest visible here unless the flush completed and was committed
 * (then the manifest was deleted and the segment is free). The partition's next owner
 * writes a decided flush's segments again from its manifest, so a protected segment is
 * never merged away or rewritten (by compaction or by delete processing). A damaged manifest protects nothing: its
 * segments were never written (the put that wrote it whole came first).
 */
export async function protectedSegments(store: ObjectStore, logger: Logger): Promise<Set<string>> {
  const keys = new Set<string>();
  for (const key of await store.list(MANIFESTS_PREFIX)) {
    let bytes: Uint8Array;
    try {
      bytes = await store.get(key);
    } catch (error) {
      if (isNotFound(error)) continue; // committed and deleted since the listing
      throw error;
    }
    try {
      for (const s of decodeManifest(bytes).segments) keys.add(s);
    } catch (error) {
      logger.warn({ key, err: error }, "damaged flush manifest: it protects no segment");
    }
  }
  return keys;
}

/** Decoded segments by key, for one run (segments never change under their key). */
export class SegmentReader {
  private readonly cache = new Map<string, IndexSegment | null>();

  constructor(
    private readonly store: ObjectStore,
    private readonly logger: Logger,
  ) {}

  /**
   * The segment, or null when it is gone (merged away) or damaged. A damaged segment is
   * logged and left in place: its chunks stay referenced by nobody, but the compactor
   * never deletes what it cannot read, and never merges it away.
   */
  async read(key: string): Promise<IndexSegment | null> {
    const seen = this.cache.get(key);
    if (seen !== undefined) return seen;
    let segment: IndexSegment | null = null;
    try {
      segment = decodeSegment(await this.store.get(key));
    } catch (error) {
      if (!isNotFound(error)) {
        if (!(error instanceof IndexError)) throw error;
        this.logger.warn({ key, err: error }, "damaged index segment: left alone");
        this.damaged.add(key);
      }
    }
    this.cache.set(key, segment);
    return segment;
  }

  /** Keys that did not decode. */
  readonly damaged = new Set<string>();

  /** Forgets a segment deleted by this run. */
  forget(key: string): void {
    this.cache.delete(key);
  }
}
