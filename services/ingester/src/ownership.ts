/**
 * Who owns a queue partition's flushes, kept in the object store: the ownership record
 * `_ingester/owners/<partition>` (docs/formats.md, "Flush manifests and exactly-once
 * ingestion"). Kafka says which member consumes a partition, but a member that is paused
 * or slow past its revocation (SIGSTOP, a GC pause, a slow store) does not know it lost
 * the partition and can still flush it after the new owner replayed the same records. The
 * record fences it, as a fencing token guards a lock (Kleppmann, "How to do distributed
 * locking", 2016), with the store itself checking the token:
 *
 * - an ingester that is assigned the partition **claims** it: epoch + 1, written with a
 *   conditional write on the record's entity tag (S3 `If-Match`, or `If-None-Match: *`
 *   for the first claim), so every later write of the previous owner fails;
 * - every flush is **decided** by one conditional write of the record, on the tag of this
 *   owner's last write, that adds the flush to the record's list, after the flush's
 *   manifest and before its index segments (which make its chunks visible). A refused write
 *   means another ingester claimed the partition: the flush is fenced and never visible.
 *
 * The record's list of decided flushes is what the next owner trusts: their manifests are
 * read for the offsets to skip on replay, the newest one's index segments are written
 * again (rolled forward, from the bytes in its manifest), and every other manifest is an
 * undecided flush and is deleted. A stale owner paused between its decision and its
 * segments therefore writes segments the next owner has already written, with the same
 * bytes: harmless.
 */
import { isNotFound, isPreconditionFailed } from "@sieve/storage";
import type { ObjectStore } from "@sieve/storage";
import type { Logger } from "pino";
import { IngesterError } from "./errors.js";

/** What the ownership record needs of an object store. */
export type OwnershipStore = Pick<ObjectStore, "getTagged" | "putIf">;

/** A decided flush of the partition: its manifest is `manifestKey(partition, epoch, seq)`. */
export interface FlushRef {
  readonly epoch: number;
  readonly seq: number;
  /** Highest queue offset whose entries are in the flush: once committed past, it can go. */
  readonly maxOffset: number;
}

/** The ownership record of a partition (see the top of this file). */
export interface OwnerRecord {
  readonly partition: number;
  readonly epoch: number;
  /** The claiming ingester's writer id (its instanceId, or instanceId.w<n> on workers). */
  readonly owner: string;
  readonly claimedMs: number;
  /** Decided flushes whose manifests are kept, oldest first. */
  readonly flushes: readonly FlushRef[];
}

/** The version of the record's JSON this code writes and reads. */
const RECORD_VERSION = 1;
/** Claims retried when other ingesters' claims race this one's. */
const CLAIM_ATTEMPTS = 8;

/** The key of partition `p`'s ownership record: `_ingester/owners/<p>`. */
export function ownerKey(partition: number): string {
  return `_ingester/owners/${partition}`;
}

/** Encodes a record: UTF-8 JSON, small and read by hand during an incident. */
export function encodeOwnerRecord(r: OwnerRecord): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({
      version: RECORD_VERSION,
      partition: r.partition,
      epoch: r.epoch,
      owner: r.owner,
      claimedMs: r.claimedMs,
      flushes: r.flushes.map((f) => ({ epoch: f.epoch, seq: f.seq, maxOffset: f.maxOffset })),
    }),
  );
}

const isInt = (v: unknown, min: number): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= min;

/** Decodes and checks a record; damage throws `corrupt_manifest`. */
export function decodeOwnerRecord(bytes: Uint8Array): OwnerRecord {
  const corrupt = (detail: string): IngesterError =>
    new IngesterError("corrupt_manifest", `ownership record: ${detail}`);
  let d: Record<string, unknown> | null;
  try {
    d = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)) as Record<
      string,
      unknown
    > | null;
  } catch (error) {
    throw corrupt((error as Error).message);
  }
  if (typeof d !== "object" || d === null) throw corrupt("not an object");
  if (d.version !== RECORD_VERSION) throw corrupt(`unsupported version ${String(d.version)}`);
  if (!isInt(d.partition, 0) || !isInt(d.epoch, 0) || !isInt(d.claimedMs, 0))
    throw corrupt("partition, epoch or claimedMs");
  if (typeof d.owner !== "string") throw corrupt("owner");
  if (!Array.isArray(d.flushes)) throw corrupt("flushes");
  const flushes: FlushRef[] = [];
  for (const f of d.flushes as unknown[]) {
    const o = f as Record<string, unknown> | null;
    if (
      typeof o !== "object" ||
      o === null ||
      !isInt(o.epoch, 0) ||
      !isInt(o.seq, 0) ||
      !isInt(o.maxOffset, 0)
    )
      throw corrupt("a flush entry");
    flushes.push({ epoch: o.epoch, seq: o.seq, maxOffset: o.maxOffset });
  }
  return {
    partition: d.partition,
    epoch: d.epoch,
    owner: d.owner,
    claimedMs: d.claimedMs,
    flushes,
  };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * This ingester's ownership of one partition, from its claim on: decides its flushes
 * ({@link decide}) until another ingester claims the partition, after which every
 * decision fails with `fenced`. One decision at a time (a partition's flushes run one
 * after the other).
 */
export class PartitionOwner {
  /** The flushes decided and kept (the record's list as this owner last wrote it). */
  private listed: FlushRef[];
  /** The tag of this owner's last write of the record. */
  private etag: string;
  /** A decision whose write failed without an answer: retried with the same bytes. */
  private pending: { readonly ref: FlushRef; readonly bytes: Uint8Array } | undefined;
  private nextSeqValue = 0;
  /** Set once a decision was refused: every later one is refused without asking. */
  fenced = false;

  constructor(
    private readonly store: OwnershipStore,
    readonly record: OwnerRecord,
    etag: string,
  ) {
    this.listed = [...record.flushes];
    this.etag = etag;
  }

  get partition(): number {
    return this.record.partition;
  }

  get epoch(): number {
    return this.record.epoch;
  }

  get owner(): string {
    return this.record.owner;
  }

  /** The decided flushes kept now, oldest first. */
  get flushes(): readonly FlushRef[] {
    return this.listed;
  }

  /** The seq of this owner's next flush (seqs count from 0 in each epoch). */
  takeSeq(): number {
    return this.nextSeqValue++;
  }

  /**
   * Decides a flush: one conditional write of the record adding `ref` and dropping the
   * flushes wholly below `committed` (their records are never replayed again). Answers the
   * dropped ones, whose manifests the caller deletes. Throws `fenced` (final) when another
   * ingester has claimed the partition; a store failure is thrown as is, and the same call
   * again retries the same write (a write that failed without an answer may have been
   * applied: the record is then read back and compared).
   */
  async decide(ref: FlushRef, committed: number): Promise<FlushRef[]> {
    if (this.fenced) throw this.fencedError();
    if (this.listed.some((f) => f.epoch === ref.epoch && f.seq === ref.seq)) return [];
    let pending = this.pending;
    if (pending === undefined || pending.ref.epoch !== ref.epoch || pending.ref.seq !== ref.seq) {
      const next = this.listed.filter((f) => f.maxOffset >= committed);
      next.push(ref);
      pending = { ref, bytes: encodeOwnerRecord({ ...this.record, flushes: next }) };
      this.pending = pending;
    }
    const key = ownerKey(this.partition);
    try {
      this.etag = await this.store.putIf(key, pending.bytes, { ifMatch: this.etag });
    } catch (error) {
      if (!isPreconditionFailed(error)) throw error;
      // Our own earlier attempt may have landed (it timed out); anything else is a claim.
      const now = await this.store.getTagged(key);
      if (!sameBytes(now.data, pending.bytes)) {
        this.fenced = true;
        this.pending = undefined;
        throw this.fencedError(now.data);
      }
      this.etag = now.etag;
    }
    const kept = decodeOwnerRecord(pending.bytes).flushes;
    const dropped = this.listed.filter(
      (f) => !kept.some((k) => k.epoch === f.epoch && k.seq === f.seq),
    );
    this.listed = [...kept];
    this.pending = undefined;
    return dropped;
  }

  /**
   * Drops the flushes wholly below `committed` from the record without deciding a new one
   * (one conditional write, none when nothing is below), so that a partition gone quiet
   * does not keep its last flush listed, and that flush's manifest with it, until its next
   * flush: a listed manifest keeps its segments from the compactor (docs/formats.md).
   * Answers the dropped flushes, whose manifests the caller deletes; throws `fenced` as
   * {@link decide} does.
   */
  async tidy(committed: number): Promise<FlushRef[]> {
    if (this.fenced) throw this.fencedError();
    // A decision in doubt (its write failed without an answer) is settled by its retry.
    if (this.pending !== undefined) return [];
    const kept = this.listed.filter((f) => f.maxOffset >= committed);
    if (kept.length === this.listed.length) return [];
    const bytes = encodeOwnerRecord({ ...this.record, flushes: kept });
    const key = ownerKey(this.partition);
    try {
      this.etag = await this.store.putIf(key, bytes, { ifMatch: this.etag });
    } catch (error) {
      if (!isPreconditionFailed(error)) throw error;
      const now = await this.store.getTagged(key);
      if (!sameBytes(now.data, bytes)) {
        this.fenced = true;
        throw this.fencedError(now.data);
      }
      this.etag = now.etag;
    }
    const dropped = this.listed.filter((f) => f.maxOffset < committed);
    this.listed = kept;
    return dropped;
  }

  /**
   * Whether this owner still holds the partition (one read of the record): asked before a
   * commit made while the partition is being revoked, so that an owner that lost it does
   * not move the queue's offset under the new owner.
   */
  async stillOwner(): Promise<boolean> {
    if (this.fenced) return false;
    try {
      const now = await this.store.getTagged(ownerKey(this.partition));
      if (now.etag === this.etag) return true;
      const r = decodeOwnerRecord(now.data);
      return r.epoch === this.epoch && r.owner === this.owner;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private fencedError(current?: Uint8Array): IngesterError {
    let by = "";
    if (current !== undefined) {
      try {
        const r = decodeOwnerRecord(current);
        by = `: claimed by ${r.owner} at epoch ${r.epoch}`;
      } catch {
        by = ": the ownership record was replaced";
      }
    }
    return new IngesterError(
      "fenced",
      `partition ${this.partition}, epoch ${this.epoch} of ${this.owner}${by}`,
    );
  }
}

/**
 * Claims partition `partition` for `owner`: reads the record and writes it back with the
 * next epoch, conditionally on the tag read, retrying when another claim came between
 * (a claim that found no record creates it with `If-None-Match: *`, epoch 1). A damaged
 * record is claimed over with no flushes listed: the next owner then replays what the lost
 * list covered (at least once, never lost). From the moment this resolves, no flush of an
 * earlier owner can be decided.
 */
export async function claimPartition(
  store: OwnershipStore,
  partition: number,
  owner: string,
  logger: Logger,
  now: () => number = Date.now,
): Promise<PartitionOwner> {
  const key = ownerKey(partition);
  for (let attempt = 1; ; attempt++) {
    let previous: OwnerRecord | undefined;
    let etag: string | undefined;
    try {
      const tagged = await store.getTagged(key);
      etag = tagged.etag;
      try {
        previous = decodeOwnerRecord(tagged.data);
      } catch (error) {
        logger.error(
          { partition, err: error },
          "damaged ownership record: claimed over; the flushes it listed will be replayed",
        );
      }
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    const record: OwnerRecord = {
      partition,
      epoch: (previous?.epoch ?? 0) + 1,
      owner,
      claimedMs: now(),
      flushes: previous?.flushes ?? [],
    };
    const bytes = encodeOwnerRecord(record);
    try {
      const tag = await store.putIf(
        key,
        bytes,
        etag === undefined ? { ifNoneMatch: "*" } : { ifMatch: etag },
      );
      return new PartitionOwner(store, record, tag);
    } catch (error) {
      if (!isPreconditionFailed(error)) throw error;
      const current = await store.getTagged(key).catch(() => undefined);
      if (current !== undefined && sameBytes(current.data, bytes)) {
        return new PartitionOwner(store, record, current.etag);
      }
      if (attempt >= CLAIM_ATTEMPTS) {
        throw new IngesterError(
          "store_unavailable",
          `partition ${partition}: ${attempt} claims of its ownership record lost to other ingesters`,
          { cause: error },
        );
      }
    }
  }
}
