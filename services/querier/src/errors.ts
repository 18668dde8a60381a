import { SieveError, defineErrors, statusesOf } from "@sieve/kit";

/**
 * Every way the querier refuses a query, with its HTTP status (a new code cannot compile
 * without one) and Loki's wording where Loki has one (`pkg/util/validation/errors.go`,
 * `pkg/util/server/error.go`). A {@link QueryError} carries its own full message (Loki's
 * words with the query's figures); the table's are the codes' one-line meanings.
 */
const QUERY_ERRORS = defineErrors({
  /** A bad parameter or query (parse errors keep LogQL's own text). */
  bad_request: { status: 400, message: "bad request" },
  query_too_long: { status: 400, message: "the query time range exceeds the limit" },
  max_entries_limit: { status: 400, message: "max entries limit per query exceeded" },
  max_chunks: { status: 400, message: "the query hit the max number of chunks limit" },
  max_metric_entries: { status: 400, message: "the query would return too many entries" },
  /** The query would hold more than the tenant's `maxQueryMemoryBytes`. */
  query_memory: { status: 400, message: "the query would hold too much memory" },
  /** The query's worker thread ran out of heap (the pool's `heapMb`). */
  worker_heap: { status: 400, message: "the query ran out of memory on its worker" },
  /** The query ran past the tenant's `queryTimeoutMs`. */
  timeout: { status: 504, message: "request timed out" },
  /** The object store is down or did not answer by its deadline (Sieve's, not the user's). */
  store_unavailable: { status: 503, message: "object store unavailable" },
  /** Auth is on and X-Scope-OrgID is missing. */
  no_org_id: { status: 401, message: "no org id" },
  /** A feature off for the tenant: Loki's 404 `not found` (`volumeEnabled` off). */
  not_found: { status: 404, message: "not found" },
  /** A volume query grouping by more names than the tenant's `volumeMaxSeries`. */
  volume_max_series: { status: 400, message: "the query hit the max number of series limit" },
});

/** The HTTP status of each code of the querier's errors. */
const QUERY_ERROR_STATUS = statusesOf(QUERY_ERRORS);

/** A code of {@link QUERY_ERROR_STATUS}. */
export type QueryErrorCode = keyof typeof QUERY_ERROR_STATUS;

/** A refused query: `message` is what the client reads. */
export class QueryError extends SieveError<QueryErrorCode> {
  override readonly name = "QueryError";

  constructor(code: QueryErrorCode, message: string) {
    super(code, QUERY_ERROR_STATUS[code], message);
  }
}

/** Loki's `ErrDeadlineExceeded`, answered with 504. */
export const ERR_DEADLINE_EXCEEDED =
  "request timed out, decrease the duration of the request or add more label matchers (prefer exact match over regex match) to reduce the amount of data processed";

/** Loki's `ErrQueryTooLong`. */
export function queryTooLong(lengthNs: bigint, limitMs: number): QueryError {
  return new QueryError(
    "query_too_long",
    `the query time range exceeds the limit (query length: ${goDuration(lengthNs)}, limit: ${promDuration(limitMs)})`,
  );
}

/** Loki's `ErrMaxEntriesLimit`. */
export function maxEntriesLimit(limit: number, max: number): QueryError {
  return new QueryError(
    "max_entries_limit",
    `max entries limit per query exceeded, limit > max_entries_limit_per_query (${limit} > ${max})`,
  );
}

/** Loki's `ErrMaxChunksPerQuery`. */
export function maxChunks(limit: number, matched: number): QueryError {
  return new QueryError(
    "max_chunks",
    `the query hit the max number of chunks limit (limit: ${limit} chunks, matched: ${matched} chunks); consider adding more specific stream selectors or reducing the query time range`,
  );
}

/**
 * Past the tenant's `maxQueryMemoryBytes`, worded after Loki's limit errors: what was hit,
 * the limit and its option, and what to do.
 */
export function queryMemory(limitBytes: number): QueryError {
  return new QueryError(
    "query_memory",
    `the query would hold more than ${limitBytes} bytes in memory (limit: ${limitBytes} bytes, maxQueryMemoryBytes); consider adding more specific stream selectors, reducing the time range or the limit, or dropping line_format stages that grow lines`,
  );
}

/** A query that built a value past the engine's size limits (`Invalid string length`). */
export function tooLarge(reason: string): QueryError {
  return new QueryError(
    "query_memory",
    `the query would build a value larger than the engine allows (${reason}); consider dropping line_format or label_format stages that grow lines`,
  );
}

/** A query whose worker ran out of heap (`heapMb`): the query's fault, not Sieve's. */
export function workerHeap(heapMb: number): QueryError {
  return new QueryError(
    "worker_heap",
    `the query ran out of memory on its worker (limit: ${heapMb} MiB of heap, heapMb); consider adding more specific stream selectors, reducing the time range or the limit`,
  );
}

/** Go's `time.Duration.String()`: `2h0m0s`, `1m30s`, `1.5s`, `500ms`, `0s`. */
export function goDuration(ns: bigint): string {
  if (ns === 0n) return "0s";
  const neg = ns < 0n;
  let u = neg ? -ns : ns;
  const sign = neg ? "-" : "";
  if (u < 1_000_000_000n) {
    const [unit, size] =
      u < 1000n ? ["ns", 1n] : u < 1_000_000n ? ["µs", 1000n] : ["ms", 1_000_000n];
    return sign + fraction(u, size) + unit;
  }
  let out = "";
  const h = u / 3_600_000_000_000n;
  u %= 3_600_000_000_000n;
  const m = u / 60_000_000_000n;
  u %= 60_000_000_000n;
  if (h > 0n) out += `${h}h`;
  if (h > 0n || m > 0n) out += `${m}m`;
  return sign + out + fraction(u, 1_000_000_000n) + "s";
}

function fraction(n: bigint, size: bigint): string {
  const whole = n / size;
  const rest = n % size;
  if (rest === 0n) return String(whole);
  const digits = String(size).length - 1;
  return `${whole}.${String(rest).padStart(digits, "0").replace(/0+$/, "")}`;
}

/** Prometheus' `model.Duration.String()` of milliseconds: `30d1h`, `1w`, `1h`, `0s`. */
export function promDuration(ms: number): string {
  let rest = Math.trunc(ms);
  if (rest === 0) return "0s";
  let out = "";
  const units: [string, number, boolean][] = [
    ["y", 365 * 86_400_000, true],
    ["w", 7 * 86_400_000, true],
    ["d", 86_400_000, false],
    ["h", 3_600_000, false],
    ["m", 60_000, false],
    ["s", 1000, false],
    ["ms", 1, false],
  ];
  for (const [name, mult, exact] of units) {
    if (exact && rest % mult !== 0) continue;
    const v = Math.floor(rest / mult);
    if (v > 0) {
      out += `${v}${name}`;
      rest -= v * mult;
    }
  }
  return out;
}
