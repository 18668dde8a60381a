import { SieveError, defineErrors, errorMessage } from "@sieve/kit";

/**
 * Every way the ingester refuses a request, with its HTTP status: a new code cannot
 * compile without its status (`@sieve/kit`'s `defineErrors`). Only `store_unavailable` is
 * retriable: the object store was down or slow; every other code is final.
 */
export const INGESTER_ERRORS = defineErrors({
  invalid_request: { status: 400, message: "invalid request" },
  invalid_selector: { status: 400, message: "invalid stream selector" },
  tenant_mismatch: { status: 400, message: "X-Scope-OrgID must equal the request's tenant" },
  too_many_entries: { status: 422, message: "query would return too many entries" },
  too_many_series: { status: 422, message: "query would return too many series" },
  // The querier's memory budget for the answer (`maxBytes`), in words close to Loki's
  // `max_query_bytes_read` refusal.
  answer_too_large: { status: 422, message: "the query would hold too many bytes" },
  // Loki's text for a query past its deadline (pkg/util/server/error.go, ErrDeadlineExceeded).
  timeout: {
    status: 504,
    message:
      "request timed out, decrease the duration of the request or add more label matchers to the query",
  },
  // nginx's and Loki's status for a request its client gave up on.
  canceled: { status: 499, message: "the request was cancelled by the client" },
  not_ready: { status: 503, message: "ingester is not running" },
  // A flush asked while the queue is further ahead than `flushAllWaitMs` lets it catch up.
  flush_behind: { status: 503, message: "the ingester has not consumed what was pushed yet" },
  store_unavailable: { status: 503, message: "object store unavailable", retriable: true },
  store_refused: { status: 500, message: "object store refused a request" },
  unknown_partition: { status: 500, message: "batch of a partition this ingester does not own" },
  upstream: { status: 502, message: "an ingester answered with an error" },
  corrupt_manifest: { status: 500, message: "flush manifest is damaged" },
  // A flush refused by the partition's ownership record (ownership.ts): another ingester
  // claimed the partition since this one did.
  fenced: { status: 409, message: "another ingester owns the partition now" },
});

/** A code of {@link INGESTER_ERRORS}. */
export type IngesterErrorCode = keyof typeof INGESTER_ERRORS;

/**
 * An ingester error with its code, HTTP status and whether the same call may succeed later
 * (`retriable`, read by the queue consumers' retry).
 */
export class IngesterError extends SieveError<IngesterErrorCode> {
  override readonly name = "IngesterError";

  constructor(code: IngesterErrorCode, detail?: string, options?: { cause?: unknown }) {
    const spec: { readonly status: number; readonly retriable?: boolean } = INGESTER_ERRORS[code];
    super(code, spec.status, errorMessage(INGESTER_ERRORS, code, detail), {
      cause: options?.cause,
      retriable: spec.retriable ?? false,
    });
  }
}
