import { SieveError, defineErrors } from "@sieve/kit";

/**
 * Every way the push route refuses a request before reading it, with its HTTP status
 * (`@sieve/kit`'s `defineErrors`: a code cannot compile without its status). Refusals of
 * the data itself are Loki's validation reasons (`REASONS` in validation.ts), answered as
 * the push's outcome rather than thrown.
 */
export const DISTRIBUTOR_ERRORS = defineErrors({
  no_org_id: { status: 401, message: "no org id" },
  invalid_tenant: { status: 400, message: "invalid tenant ID" },
  body_too_large: { status: 413, message: "request body too large" },
  unsupported_encoding: { status: 415, message: "Content-Encoding not supported" },
});

/** A code of {@link DISTRIBUTOR_ERRORS}. */
export type DistributorErrorCode = keyof typeof DISTRIBUTOR_ERRORS;

/**
 * A refused push, answered by the error mapper with Loki's words (`message`, or the code's
 * when absent). `bodyUnread`: the body was not read to its end, so the answer closes the
 * connection rather than leave the client streaming into a keep-alive connection.
 */
export class DistributorError extends SieveError<DistributorErrorCode> {
  override readonly name = "DistributorError";
  readonly bodyUnread: boolean;

  constructor(code: DistributorErrorCode, message?: string) {
    const spec = DISTRIBUTOR_ERRORS[code];
    super(code, spec.status, message ?? spec.message);
    this.bodyUnread = code === "body_too_large" || code === "unsupported_encoding";
  }
}
