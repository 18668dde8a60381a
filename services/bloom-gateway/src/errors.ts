import { SieveError, defineErrors, errorMessage } from "@sieve/kit";

/**
 * Every way the gateway refuses a request, with its HTTP status: a code cannot be added
 * without its status. (Failures while testing are not errors: the refs fail open.)
 */
export const GATEWAY_ERRORS = defineErrors({
  invalid_request: { status: 400, message: "invalid filter request" },
  too_many_series: { status: 400, message: "too many series in one filter request" },
  body_too_large: { status: 413, message: "filter request body too large" },
  unsupported_media_type: { status: 415, message: "filter requests are application/x-protobuf" },
  tenant_mismatch: { status: 400, message: "X-Scope-OrgID does not match the request's tenant" },
});

/** A code of {@link GATEWAY_ERRORS}. */
export type GatewayErrorCode = keyof typeof GATEWAY_ERRORS;

/** A refused request, with the HTTP status its code maps to. */
export class GatewayError extends SieveError<GatewayErrorCode> {
  override readonly name = "GatewayError";

  constructor(code: GatewayErrorCode, detail?: string) {
    super(code, GATEWAY_ERRORS[code].status, errorMessage(GATEWAY_ERRORS, code, detail));
  }
}
