/**
 * One shape for every error table (fastify's `lib/errors.js`, tRPC's `rpc/codes.ts`): a
 * code maps to its HTTP status and the start of its message, so a code cannot be added
 * without its status, and one base class carries `code`, `status` and `retriable` to the
 * HTTP error mapper ({@link errorHandler}) and to the retry helper ({@link isRetriable}).
 */

/** What a code of an error table says: its HTTP status and its message's first words. */
export interface ErrorSpec {
  readonly status: number;
  readonly message: string;
  /** Whether the same call may succeed later (default false): read by the retry helper. */
  readonly retriable?: boolean;
}

/**
 * Checks and types an error table: `defineErrors({ not_found: { status: 404, message:
 * "object not found" } })`. Answers the table itself, typed with its literal codes.
 */
export function defineErrors<const T extends Record<string, ErrorSpec>>(table: T): T {
  for (const [code, spec] of Object.entries(table)) {
    if (!Number.isInteger(spec.status) || spec.status < 100 || spec.status > 599) {
      throw new RangeError(`error code ${code}: ${spec.status} is not an HTTP status`);
    }
  }
  return table;
}

/** The status of each code of `table`, as a plain `code → status` record. */
export function statusesOf<const T extends Record<string, ErrorSpec>>(
  table: T,
): { readonly [C in keyof T]: T[C]["status"] } {
  const out: Record<string, number> = {};
  for (const [code, spec] of Object.entries(table)) out[code] = spec.status;
  return out as { readonly [C in keyof T]: T[C]["status"] };
}

/** `table[code].message`, then `: detail` when there is one. */
export function errorMessage<T extends Record<string, ErrorSpec>>(
  table: T,
  code: keyof T,
  detail?: string,
): string {
  const base = table[code]!.message;
  return detail === undefined ? base : `${base}: ${detail}`;
}

/**
 * The base of Sieve's errors: a `code` of a table made by {@link defineErrors}, the HTTP
 * `status` it answers with, and whether retrying may help. Each package subclasses it with
 * its own table and `name`.
 */
export class SieveError<Code extends string = string> extends Error {
  /** The HTTP status the error answers with. */
  readonly status: number;
  /** Whether the same call may succeed later (as kafkajs marks its errors). */
  readonly retriable: boolean;

  constructor(
    readonly code: Code,
    status: number,
    message: string,
    options?: { readonly cause?: unknown; readonly retriable?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.retriable = options?.retriable ?? false;
  }
}

/**
 * Whether `error` carries an HTTP answer of its own: a {@link SieveError}, or any error
 * with a string `code` and a numeric `status` (a second copy of this module in a worker
 * bundle has its own class).
 */
export function isHttpError(error: unknown): error is Error & { code: string; status: number } {
  if (error instanceof SieveError) return true;
  if (!(error instanceof Error)) return false;
  const e = error as { code?: unknown; status?: unknown };
  return typeof e.code === "string" && typeof e.status === "number";
}
