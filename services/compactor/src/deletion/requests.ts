/**
 * The delete request store (Loki's `DeleteRequestsStore`): one object per request under
 * `<tenant>/deletes/<id>.json` (`@sieve/index` deletes.ts has the format). Created with
 * If-None-Match (two requests never share an id), changed with If-Match (a cancel and the
 * processor never overwrite each other's change), read by queriers by prefix.
 */
import { randomBytes } from "node:crypto";
import {
  decodeDeleteRequest,
  deleteRequestKey,
  encodeDeleteRequest,
  readDeleteRequests,
  type DeleteRequestRecord,
} from "@sieve/index";
import { isNotFound, isPreconditionFailed, type ObjectStore } from "@sieve/storage";

/** What the request store needs of an object store. */
export type RequestObjectStore = Pick<
  ObjectStore,
  "get" | "getTagged" | "put" | "putIf" | "list" | "delete"
>;

/** A request read with its entity tag, to change it only if nobody else did. */
export interface TaggedRequest {
  readonly record: DeleteRequestRecord;
  readonly etag: string;
}

/** A new request's fields. Times in Unix ms. */
export interface NewDeleteRequest {
  readonly tenant: string;
  readonly query: string;
  readonly startMs: number;
  readonly endMs: number;
}

/**
 * Where a marker per tenant with requests lives (`_compactor/deletes/<tenant>`, empty):
 * the processor lists these instead of the whole store to find the tenants to visit.
 */
export const TENANTS_PREFIX = "_compactor/deletes/";

/** Tries before giving up on finding a free id (a 32-bit space: a clash is rare already). */
const ID_ATTEMPTS = 8;

/** The requests of every tenant, in the object store. */
export class DeleteRequestsStore {
  constructor(
    private readonly store: RequestObjectStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** Stores a new request (`received`) under a fresh id, as Loki's `AddDeleteRequest`. */
  async add(req: NewDeleteRequest): Promise<DeleteRequestRecord> {
    // The marker first: a stored request is always found by the processor.
    await this.store.put(TENANTS_PREFIX + req.tenant, new Uint8Array(0));
    for (let attempt = 0; ; attempt++) {
      const record: DeleteRequestRecord = {
        requestId: randomBytes(4).toString("hex"),
        tenant: req.tenant,
        query: req.query,
        startMs: req.startMs,
        endMs: req.endMs,
        createdMs: this.now(),
        status: "received",
      };
      try {
        await this.store.putIf(
          deleteRequestKey(req.tenant, record.requestId),
          encodeDeleteRequest(record),
          { ifNoneMatch: "*" },
        );
        return record;
      } catch (error) {
        if (!isPreconditionFailed(error) || attempt + 1 >= ID_ATTEMPTS) throw error;
      }
    }
  }

  /** Every request of `tenant`, oldest first. */
  list(tenant: string): Promise<DeleteRequestRecord[]> {
    return readDeleteRequests(this.store, tenant);
  }

  /** One request with its tag, or undefined when there is none. */
  async get(tenant: string, requestId: string): Promise<TaggedRequest | undefined> {
    try {
      const { data, etag } = await this.store.getTagged(deleteRequestKey(tenant, requestId));
      return { record: decodeDeleteRequest(data), etag };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /**
   * Replaces a request if it is still as read (`etag`); answers the new tag, or undefined
   * when it changed or went meanwhile (cancelled: the caller stops).
   */
  async update(
    tagged: TaggedRequest,
    record: DeleteRequestRecord,
  ): Promise<TaggedRequest | undefined> {
    try {
      const etag = await this.store.putIf(
        deleteRequestKey(record.tenant, record.requestId),
        encodeDeleteRequest(record),
        { ifMatch: tagged.etag },
      );
      return { record, etag };
    } catch (error) {
      if (isPreconditionFailed(error) || isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Removes a request (a cancel). */
  async remove(tenant: string, requestId: string): Promise<void> {
    await this.store.delete(deleteRequestKey(tenant, requestId));
  }

  /** The tenants that ever had a request (their markers), for the processor to visit. */
  async tenants(): Promise<string[]> {
    const out: string[] = [];
    for (const key of await this.store.list(TENANTS_PREFIX)) {
      const tenant = key.slice(TENANTS_PREFIX.length);
      if (tenant !== "" && !tenant.includes("/")) out.push(tenant);
    }
    return out.sort();
  }
}
