import { deadlineSignal } from "@sieve/kit";
import {
  ProtoError,
  decodeQueryResponse,
  decodeSampleResponse,
  decodeSeriesResponse,
  encodeQueryRequest,
  encodeSampleRequest,
  encodeSeriesRequest,
} from "@sieve/proto";
import type {
  IngesterCallOptions,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSamplePart,
  IngesterSampleRequest,
  IngesterSeries,
  IngesterSeriesRequest,
  IngesterStream,
} from "@sieve/proto";
import { IngesterError } from "./errors.js";
import type { IngesterErrorCode } from "./errors.js";
import { PROTOBUF_TYPE, TIMEOUT_HEADER } from "./http.js";
import { abortError } from "./query.js";

/**
 * The ingester's refusals the client rethrows as they are (the query's fault, or its
 * deadline): anything else an ingester answers is `upstream`.
 */
const PASSED_THROUGH: ReadonlySet<string> = new Set<IngesterErrorCode>([
  "invalid_request",
  "invalid_selector",
  "too_many_entries",
  "too_many_series",
  "answer_too_large",
  "timeout",
  "canceled",
]);

/** Options of {@link IngesterHttpClient}. */
export interface IngesterHttpClientOptions {
  /** Base URLs of every ingester, e.g. `http://ingester-0:3100`. */
  readonly urls: readonly string[];
  /** Per-request timeout. Default 30000. */
  readonly timeoutMs?: number;
}

/**
 * The querier's view of the ingesters over HTTP (protobuf, ingester.proto): asks every
 * ingester (each owns different partitions) and concatenates their answers. Any failure fails the call (`upstream`):
 * an ingester's unflushed data cannot be read anywhere else.
 */
export class IngesterHttpClient implements IngesterQuerier {
  private readonly urls: readonly string[];
  private readonly timeoutMs: number;

  constructor(opts: IngesterHttpClientOptions) {
    if (opts.urls.length === 0) throw new IngesterError("invalid_request", "no ingester URLs");
    this.urls = opts.urls.map((u) => u.replace(/\/+$/, ""));
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  private async post<T>(
    url: string,
    path: string,
    tenant: string,
    body: Uint8Array,
    decode: (bytes: Uint8Array) => T,
    options: IngesterCallOptions,
  ): Promise<T> {
    // The ingester stops at the caller's deadline; waiting a little longer lets its 504 arrive.
    const timeoutMs = Math.max(1, Math.min(this.timeoutMs, options.timeoutMs ?? this.timeoutMs));
    const signal = deadlineSignal(timeoutMs + 1000, options.signal);
    let response: Response;
    let bytes: Uint8Array;
    try {
      response = await fetch(`${url}${path}`, {
        method: "POST",
        headers: {
          "content-type": PROTOBUF_TYPE,
          "x-scope-orgid": tenant,
          [TIMEOUT_HEADER]: String(timeoutMs),
        },
        body,
        signal,
      });
      bytes = new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      if (options.signal?.aborted === true) throw abortError(options.signal);
      if (signal.aborted) throw new IngesterError("timeout", url, { cause: error });
      throw new IngesterError("upstream", `${url}: ${(error as Error).message}`, { cause: error });
    }
    if (!response.ok) {
      // Errors come back as JSON: {"code", "message"}.
      const text = new TextDecoder().decode(bytes);
      let code: string | undefined;
      try {
        code = (JSON.parse(text) as { code?: string }).code;
      } catch {
        // not our JSON error
      }
      if (code !== undefined && PASSED_THROUGH.has(code)) {
        throw new IngesterError(code as IngesterErrorCode, `${url}: ${text}`);
      }
      throw new IngesterError("upstream", `${url}: ${response.status} ${text.slice(0, 512)}`);
    }
    try {
      return decode(bytes);
    } catch (error) {
      if (!(error instanceof ProtoError)) throw error;
      throw new IngesterError("upstream", `${url}: ${error.message}`, { cause: error });
    }
  }

  async query(
    req: IngesterQueryRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterStream[]> {
    const body = encodeQueryRequest(req);
    const answers = await Promise.all(
      this.urls.map((url) =>
        this.post(url, "/ingester/v1/query", req.tenant, body, decodeQueryResponse, options),
      ),
    );
    return answers.flat();
  }

  async series(
    req: IngesterSeriesRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterSeries[]> {
    const body = encodeSeriesRequest(req);
    const answers = await Promise.all(
      this.urls.map((url) =>
        this.post(url, "/ingester/v1/series", req.tenant, body, decodeSeriesResponse, options),
      ),
    );
    return answers.flat();
  }

  async querySample(
    req: IngesterSampleRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterSamplePart[]> {
    const body = encodeSampleRequest(req);
    const answers = await Promise.all(
      this.urls.map((url) =>
        this.post(url, "/ingester/v1/sample", req.tenant, body, decodeSampleResponse, options),
      ),
    );
    return answers.flat();
  }
}
