/**
 * One way to answer an error over HTTP, for every service: the status comes from the error
 * (a {@link SieveError}'s `status`, fastify's own `statusCode` for a body too large, a bad
 * content type or JSON, else 500), the body is Loki's: the message as `text/plain` plus a
 * newline (`pkg/util/server/error.go` writes `http.Error(w, msg, status)`), or `{code,
 * message}` JSON for the internal routes that answer JSON; 5xx answers are logged.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { isHttpError } from "./errors.js";

/** The content type of Loki's plain-text error bodies. */
export const TEXT_ERROR_TYPE = "text/plain; charset=utf-8";

/** The HTTP status an error answers with: its own, fastify's, or 500. */
export function errorStatus(error: unknown): number {
  if (isHttpError(error)) return error.status;
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === "number" && code >= 400 && code <= 599 ? code : 500;
}

/** Loki's plain-text error body: the message and a newline. */
export function textErrorBody(message: string): string {
  return message + "\n";
}

/** Options of {@link errorHandler}. */
export interface ErrorHandlerOptions {
  /**
   * The body: `text` (default) is Loki's plain text; `json` is `{"code","message"}` with
   * `application/json` for the service's own errors (the ingester's internal query API).
   */
  readonly body?: "text" | "json";
  /**
   * `default` leaves errors that are not the service's own (not {@link isHttpError}) to the
   * enclosing error handler (fastify's JSON, as a route that rethrows them today); `map`
   * (default) answers them too.
   */
  readonly foreign?: "map" | "default";
  /** The message to answer instead of the error's own, per error (e.g. a limit in a 413). */
  readonly message?: (error: FastifyError, status: number) => string | undefined;
  /** Told of every answered error (request metrics). */
  readonly onError?: (status: number, error: FastifyError, reply: FastifyReply) => void;
  /** The log line of a 5xx (logged at error with the error); default "request failed". */
  readonly logMessage?: string;
}

/**
 * A fastify error handler (`app.setErrorHandler(errorHandler(options))`) answering as the
 * file comment says. Routes throw their errors; this is the one place that writes them.
 */
export function errorHandler(
  options: ErrorHandlerOptions = {},
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  const json = options.body === "json";
  const passForeign = options.foreign === "default";
  const logMessage = options.logMessage ?? "request failed";
  return (error, request, reply) => {
    const own = isHttpError(error);
    // Rethrown from an error handler, fastify hands the error to the parent handler.
    if (!own && passForeign) throw error;
    const status = errorStatus(error);
    if (status >= 500) request.log.error({ err: error }, logMessage);
    options.onError?.(status, error, reply);
    const message = options.message?.(error, status) ?? error.message;
    if (json) {
      return reply
        .code(status)
        .type("application/json")
        .send(JSON.stringify({ code: error.code, message }));
    }
    return reply.code(status).type(TEXT_ERROR_TYPE).send(textErrorBody(message));
  };
}

/** Go's `http.NotFound` body, which Loki answers for a path it does not serve. */
export const NOT_FOUND_BODY = "404 page not found\n";

/**
 * A fastify not-found handler answering as Loki (Go's `http.NotFound`): 404, `text/plain;
 * charset=utf-8`, `X-Content-Type-Options: nosniff`, `404 page not found`. Set it on every
 * server (`app.setNotFoundHandler(notFoundHandler)`) instead of fastify's JSON default.
 */
export function notFoundHandler(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply
    .code(404)
    .type(TEXT_ERROR_TYPE)
    .header("x-content-type-options", "nosniff")
    .send(NOT_FOUND_BODY);
}
