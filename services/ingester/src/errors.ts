/**
 * Every way the ingester refuses a request, with its HTTP status: a new code cannot
 * compile without its status (tRPC's `rpc/codes.ts` pattern).
 */
export const INGESTER_ERRORS = {
  invalid_request: { status: 400, message: "invalid request" },
  invalid_selector: { status: 400, message: "invalid stream selector" },
  tenant_mismatch: { status: 400, message: "X-Scope-OrgID must equal the request's tenant" },
  too_many_entries: { status: 422, message: "query would return too many entries" },
  too_many_series: { status: 422, message: "query would return too many series" },
  // Loki's text for a query past its deadline (pkg/util/server/error.go, ErrDeadlineExceeded).
  timeout: {
    status: 504,
    message:
      "request timed out, decrease the duration of the request or add more label matchers to the query",
  },
  // nginx's and Loki's status for a request its client gave up on.
  canceled: { status: 499, message: "the request was cancelled by the client" },
  not_ready: { status: 503, message: "ingester is not running" },
  store_unavailable: { status: 503, message: "object store unavailable" },
  store_refused: { status: 500, message: "object store refused a request" },
  unknown_partition: { status: 500, message: "batch of a partition this ingester does not own" },
  upstream: { status: 502, message: "an ingester answered with an error" },
  corrupt_manifest: { status: 500, message: "flush manifest is damaged" },
} as const satisfies Record<string, { status: number; message: string }>;

/** Codes a retry may fix: the object store was down or slow. Every other code is final. */
const RETRIABLE: ReadonlySet<IngesterErrorCode> = new Set(["store_unavailable"]);

/** A code of {@link INGESTER_ERRORS}. */
export type IngesterErrorCode = keyof typeof INGESTER_ERRORS;

/** An ingester error with its code and HTTP status. */
export class IngesterError extends Error {
  override readonly name = "IngesterError";
  readonly status: number;
  /** Whether the same call may succeed later (read by the queue consumers' retry). */
  readonly retriable: boolean;

  constructor(
    readonly code: IngesterErrorCode,
    detail?: string,
    options?: { cause?: unknown },
  ) {
    const base = INGESTER_ERRORS[code].message;
    super(detail === undefined ? base : `${base}: ${detail}`, options);
    this.status = INGESTER_ERRORS[code].status;
    this.retriable = RETRIABLE.has(code);
  }
}
