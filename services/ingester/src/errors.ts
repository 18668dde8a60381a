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
  not_ready: { status: 503, message: "ingester is not running" },
  upstream: { status: 502, message: "an ingester answered with an error" },
  corrupt_manifest: { status: 500, message: "flush manifest is damaged" },
} as const satisfies Record<string, { status: number; message: string }>;

/** A code of {@link INGESTER_ERRORS}. */
export type IngesterErrorCode = keyof typeof INGESTER_ERRORS;

/** An ingester error with its code and HTTP status. */
export class IngesterError extends Error {
  override readonly name = "IngesterError";
  readonly status: number;

  constructor(
    readonly code: IngesterErrorCode,
    detail?: string,
    options?: { cause?: unknown },
  ) {
    const base = INGESTER_ERRORS[code].message;
    super(detail === undefined ? base : `${base}: ${detail}`, options);
    this.status = INGESTER_ERRORS[code].status;
  }
}
