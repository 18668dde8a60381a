/*
 * Delete request, version 1: one object per request of one tenant, under
 * `<tenant>/deletes/<request id>.json` (docs/formats.md, "Delete requests"). Loki keeps its
 * delete requests in a database under the index prefix (`index/delete_requests/`); here
 * they are objects beside the tenant's index, so queriers list them by prefix and every
 * change is a conditional write (created with If-None-Match, updated with If-Match).
 *
 * Body: UTF-8 JSON
 *   { "version": 1, "request_id": "<8 hex>", "user_id": tenant, "query": LogQL,
 *     "start_time": ms, "end_time": ms, "created_at": ms,
 *     "status": "received" | "processing" | "processed",
 *     "processed_at"?: ms,
 *     "pending_chunks"?: [chunk keys whose index entries were replaced, to be deleted],
 *     "swapped_at"?: ms (when every affected index segment was replaced) }
 * Times are Unix milliseconds, as Loki's `model.Time`; start and end are both inclusive.
 *
 * JSON, not a binary layout: a request is small, read by prefix listing, and an operator
 * answering an erasure request wants to read it by hand.
 */
import { IndexError } from "./errors.js";

/** Where a request is in its life, as Loki's statuses (plus `processing`, between them). */
export type DeleteRequestStatus = "received" | "processing" | "processed";

const STATUSES: readonly DeleteRequestStatus[] = ["received", "processing", "processed"];

/** One delete request as stored. */
export interface DeleteRequestRecord {
  readonly requestId: string;
  readonly tenant: string;
  readonly query: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly createdMs: number;
  readonly status: DeleteRequestStatus;
  readonly processedMs?: number;
  /** Old chunk objects the processing replaced in the index, deleted after a grace period. */
  readonly pendingChunks?: readonly string[];
  /** When every affected index segment had been replaced. */
  readonly swappedMs?: number;
}

/** The version this code writes and reads. */
const DELETE_REQUEST_VERSION = 1;
/** A request id: 8 lower-case hex digits, as Loki's (a 32-bit hash, hex). */
export const DELETE_REQUEST_ID = /^[0-9a-f]{8}$/;

/** The prefix of a tenant's requests: `<tenant>/deletes/`. */
export function deleteRequestsPrefix(tenant: string): string {
  if (tenant === "" || tenant.includes("/"))
    throw new IndexError("invalid_argument", `tenant ${JSON.stringify(tenant)}`);
  return `${tenant}/deletes/`;
}

/** The key of a request: `<tenant>/deletes/<id>.json`. */
export function deleteRequestKey(tenant: string, requestId: string): string {
  if (!DELETE_REQUEST_ID.test(requestId))
    throw new IndexError("invalid_argument", `request id ${JSON.stringify(requestId)}`);
  return `${deleteRequestsPrefix(tenant)}${requestId}.json`;
}

/** The request id of a key under a tenant's prefix, or undefined for another key. */
export function deleteRequestIdOf(tenant: string, key: string): string | undefined {
  const prefix = deleteRequestsPrefix(tenant);
  if (!key.startsWith(prefix) || !key.endsWith(".json")) return undefined;
  const id = key.slice(prefix.length, -5);
  return DELETE_REQUEST_ID.test(id) ? id : undefined;
}

/** Encodes a request. */
export function encodeDeleteRequest(r: DeleteRequestRecord): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({
      version: DELETE_REQUEST_VERSION,
      request_id: r.requestId,
      user_id: r.tenant,
      query: r.query,
      start_time: r.startMs,
      end_time: r.endMs,
      created_at: r.createdMs,
      status: r.status,
      ...(r.processedMs !== undefined && { processed_at: r.processedMs }),
      ...(r.pendingChunks !== undefined && { pending_chunks: r.pendingChunks }),
      ...(r.swappedMs !== undefined && { swapped_at: r.swappedMs }),
    }),
  );
}

const isMs = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v);

/** Decodes and checks a request; damage throws an {@link IndexError} `corrupt`. */
export function decodeDeleteRequest(bytes: Uint8Array): DeleteRequestRecord {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw new IndexError("corrupt", `delete request: ${(error as Error).message}`);
  }
  const d = doc as Record<string, unknown> | null;
  const bad = (what: string): never => {
    throw new IndexError("corrupt", `delete request: ${what}`);
  };
  if (typeof d !== "object" || d === null) return bad("not an object");
  if (d.version !== DELETE_REQUEST_VERSION) bad(`version ${String(d.version)}`);
  if (typeof d.request_id !== "string" || !DELETE_REQUEST_ID.test(d.request_id)) bad("request_id");
  if (typeof d.user_id !== "string" || d.user_id === "") bad("user_id");
  if (typeof d.query !== "string" || d.query === "") bad("query");
  if (!isMs(d.start_time) || !isMs(d.end_time) || !isMs(d.created_at)) bad("times");
  if (!STATUSES.includes(d.status as DeleteRequestStatus)) bad(`status ${String(d.status)}`);
  if (d.processed_at !== undefined && !isMs(d.processed_at)) bad("processed_at");
  if (d.swapped_at !== undefined && !isMs(d.swapped_at)) bad("swapped_at");
  const pending = d.pending_chunks;
  if (
    pending !== undefined &&
    !(Array.isArray(pending) && pending.every((k) => typeof k === "string" && k !== ""))
  )
    bad("pending_chunks");
  return {
    requestId: d.request_id as string,
    tenant: d.user_id as string,
    query: d.query as string,
    startMs: d.start_time as number,
    endMs: d.end_time as number,
    createdMs: d.created_at as number,
    status: d.status as DeleteRequestStatus,
    ...(d.processed_at !== undefined && { processedMs: d.processed_at as number }),
    ...(pending !== undefined && { pendingChunks: pending as string[] }),
    ...(d.swapped_at !== undefined && { swappedMs: d.swapped_at as number }),
  };
}

/** A request's range in ns, both ends inclusive, as query-time filtering takes it. */
export function deleteRequestRange(r: DeleteRequestRecord): { start: bigint; end: bigint } {
  return { start: BigInt(r.startMs) * 1_000_000n, end: BigInt(r.endMs) * 1_000_000n };
}

/**
 * How long a processed request still filters queries: a querier that listed a day's
 * segments just before the swap may still read an old chunk for a moment (Loki keeps
 * filtering for its index update propagation delay likewise).
 */
export const PROCESSED_FILTER_MS = 10 * 60_000;

/** Whether queries must still drop the request's lines at `nowMs`. */
export function filtersQueries(r: DeleteRequestRecord, nowMs: number): boolean {
  return r.status !== "processed" || nowMs < (r.processedMs ?? 0) + PROCESSED_FILTER_MS;
}

/** What reading a tenant's requests needs of an object store. */
export interface DeleteRequestStore {
  list(prefix: string): Promise<readonly string[]>;
  get(key: string): Promise<Uint8Array>;
}

/**
 * Every request of a tenant, oldest first. A request cancelled between the listing and
 * the read is left out; a damaged one throws (a query must not show what it would hide).
 */
export async function readDeleteRequests(
  store: DeleteRequestStore,
  tenant: string,
): Promise<DeleteRequestRecord[]> {
  const out: DeleteRequestRecord[] = [];
  for (const key of await store.list(deleteRequestsPrefix(tenant))) {
    if (deleteRequestIdOf(tenant, key) === undefined) continue;
    let bytes: Uint8Array;
    try {
      bytes = await store.get(key);
    } catch (error) {
      if ((error as { code?: unknown }).code === "not_found") continue;
      throw error;
    }
    const r = decodeDeleteRequest(bytes);
    if (r.tenant !== tenant) throw new IndexError("corrupt", `${key}: of tenant ${r.tenant}`);
    out.push(r);
  }
  return out.sort((a, b) => a.createdMs - b.createdMs || (a.requestId < b.requestId ? -1 : 1));
}
