/**
 * The compactor's lock: a lease in the object store, built on conditional writes (S3's
 * `If-None-Match: *` to create, `If-Match: <etag>` to swap), so that exactly one compactor
 * works per store. Loki keeps one compactor with its ring; Sieve has no ring.
 *
 * The lease is `_compactor/lock`, JSON (docs/formats.md, "Compactor lock"):
 * `{"version":1,"owner":id,"counter":n,"ttlMs":t,"renewedMs":ms,"released":false}`.
 *
 * Expiry does not compare clocks across machines: a waiter calls a lease expired once it
 * has seen the same entity tag for `ttlMs` of its own clock (every renewal bumps `counter`,
 * so the tag changes), or at once when the holder released it. The holder calls itself
 * the holder until `ttlMs` after it *started* its last successful write, minus a margin:
 * a waiter began watching that tag after the write, so its takeover comes later. A holder
 * that dies (SIGKILL) leaves a lease that simply stops changing.
 */
import { isNotFound, isPreconditionFailed, type ObjectStore } from "@sieve/storage";

/** The key of the lock object. */
export const LOCK_KEY = "_compactor/lock";

/** The lock object's body. */
export interface LeaseRecord {
  readonly version: 1;
  readonly owner: string;
  /** Bumped by every write, so the entity tag changes on each renewal. */
  readonly counter: number;
  readonly ttlMs: number;
  /** The writer's clock at the write, for people reading it; never compared across hosts. */
  readonly renewedMs: number;
  /** Released by its owner: free at once. */
  readonly released: boolean;
}

/** Thrown by {@link CompactorLock.check} when this compactor no longer holds the lock. */
export class LockLostError extends Error {
  override readonly name = "LockLostError";
}

/** Options of a {@link CompactorLock}. */
export interface LockOptions {
  readonly owner: string;
  readonly ttlMs: number;
  readonly key?: string;
  /** Monotonic clock, ms (default `performance.now`). */
  readonly now?: () => number;
}

const encoder = new TextEncoder();

/** One compactor's view of the lease. */
export class CompactorLock {
  readonly owner: string;
  readonly ttlMs: number;
  readonly key: string;
  private readonly now: () => number;
  private readonly store: ObjectStore;
  /** Our lease's tag and counter while we hold it. */
  private mine: { etag: string; counter: number; validUntil: number } | undefined;
  /** Another owner's tag, and since when (our clock) we have seen it unchanged. */
  private seen: { etag: string; since: number } | undefined;
  /**
   * Calls on the lease, one at a time: a renewal timer and the loop's acquire must not
   * both swap from the same tag (the loser would think the lease lost).
   */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(store: ObjectStore, options: LockOptions) {
    this.store = store;
    this.owner = options.owner;
    this.ttlMs = options.ttlMs;
    this.key = options.key ?? LOCK_KEY;
    this.now = options.now ?? (() => performance.now());
  }

  /** Whether this compactor holds the lease now (by its own clock, with a margin). */
  get held(): boolean {
    return this.mine !== undefined && this.now() < this.mine.validUntil;
  }

  /** Throws {@link LockLostError} unless the lease is held: call before every deletion. */
  check(): void {
    if (!this.held) throw new LockLostError(`${this.owner} no longer holds ${this.key}`);
  }

  /**
   * Takes the lease when it is free (absent, released, or unchanged for `ttlMs` while we
   * watched), or renews it when held. True when held after the call.
   */
  acquire(): Promise<boolean> {
    return this.serial(() => (this.mine !== undefined ? this.swap() : this.take()));
  }

  /** Extends the lease; false (and not held) when another compactor took it. */
  renew(): Promise<boolean> {
    return this.serial(() => this.swap());
  }

  /** Gives the lease up at once (a graceful stop), if still ours. */
  release(): Promise<void> {
    return this.serial(async () => {
      const mine = this.mine;
      this.mine = undefined;
      if (mine === undefined) return;
      try {
        const body = this.body(mine.counter + 1, true);
        await this.store.putIf(this.key, body, { ifMatch: mine.etag });
      } catch (error) {
        if (!isPreconditionFailed(error)) throw error; // taken already: nothing to give up
      }
    });
  }

  private serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.chain.then(op, op);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async take(): Promise<boolean> {
    let current: { data: Uint8Array; etag: string } | undefined;
    try {
      current = await this.store.getTagged(this.key);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    if (current === undefined) return this.write({ ifNoneMatch: "*" }, 0);
    const record = parseLease(current.data);
    const free =
      record === undefined ||
      record.released ||
      // Our own lease from before a restart with the same id: nobody else holds it.
      record.owner === this.owner ||
      (this.seen?.etag === current.etag && this.now() - this.seen.since >= this.ttlMs);
    if (!free) {
      if (this.seen?.etag !== current.etag) this.seen = { etag: current.etag, since: this.now() };
      return false;
    }
    return this.write({ ifMatch: current.etag }, (record?.counter ?? 0) + 1);
  }

  private async swap(): Promise<boolean> {
    const mine = this.mine;
    if (mine === undefined) return false;
    return this.write({ ifMatch: mine.etag }, mine.counter + 1);
  }

  private async write(
    condition: { ifNoneMatch: "*" } | { ifMatch: string },
    counter: number,
  ): Promise<boolean> {
    const started = this.now();
    try {
      const etag = await this.store.putIf(this.key, this.body(counter, false), condition);
      // A tenth of the lease spare: the store call's own latency is already counted from
      // `started`, the margin covers clock-rate drift between hosts.
      this.mine = { etag, counter, validUntil: started + this.ttlMs * 0.9 };
      this.seen = undefined;
      return true;
    } catch (error) {
      this.mine = undefined;
      if (isPreconditionFailed(error)) return false;
      throw error;
    }
  }

  private body(counter: number, released: boolean): Uint8Array {
    const record: LeaseRecord = {
      version: 1,
      owner: this.owner,
      counter,
      ttlMs: this.ttlMs,
      renewedMs: Date.now(),
      released,
    };
    return encoder.encode(JSON.stringify(record));
  }
}

/** The lease in `data`, or undefined when it is not one (damaged: treated as free). */
export function parseLease(data: Uint8Array): LeaseRecord | undefined {
  try {
    const r = JSON.parse(new TextDecoder().decode(data)) as Partial<LeaseRecord>;
    if (
      r.version !== 1 ||
      typeof r.owner !== "string" ||
      typeof r.counter !== "number" ||
      typeof r.released !== "boolean"
    ) {
      return undefined;
    }
    return r as LeaseRecord;
  } catch {
    return undefined;
  }
}
