import { IngesterError } from "./errors.js";
import { TIMEOUT_HEADER } from "./http.js";
import type {
  IngesterCallOptions,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeriesRequest,
  IngesterStream,
} from "./query.js";
import { abortError } from "./query.js";
import { parseSeries, parseStreams, queryRequestJson, seriesRequestJson } from "./wire.js";

/** Options of {@link IngesterHttpClient}. */
export interface IngesterHttpClientOptions {
  /** Base URLs of every ingester, e.g. `http://ingester-0:3100`. */
  readonly urls: readonly string[];
  /** Per-request timeout. Default 30000. */
  readonly timeoutMs?: number;
}

/**
 * The querier's view of the ingesters over HTTP: asks every ingester (each owns different
 * partitions) and concatenates their answers. Any failure fails the call (`upstream`):
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

  private async post(
    url: string,
    path: string,
    tenant: string,
    body: string,
    options: IngesterCallOptions,
  ): Promise<unknown> {
    // The ingester stops at the caller's deadline; waiting a little longer lets its 504 arrive.
    const timeoutMs = Math.max(1, Math.min(this.timeoutMs, options.timeoutMs ?? this.timeoutMs));
    const deadline = AbortSignal.timeout(timeoutMs + 1000);
    const signal =
      options.signal === undefined ? deadline : AbortSignal.any([options.signal, deadline]);
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${url}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-scope-orgid": tenant,
          [TIMEOUT_HEADER]: String(timeoutMs),
        },
        body,
        signal,
      });
      text = await response.text();
    } catch (error) {
      if (options.signal?.aborted === true) throw abortError(options.signal);
      if (deadline.aborted) throw new IngesterError("timeout", url, { cause: error });
      throw new IngesterError("upstream", `${url}: ${(error as Error).message}`, { cause: error });
    }
    if (!response.ok) {
      let code: string | undefined;
      try {
        code = (JSON.parse(text) as { code?: string }).code;
      } catch {
        // not our JSON error
      }
      if (
        code === "too_many_entries" ||
        code === "too_many_series" ||
        code === "invalid_selector" ||
        code === "timeout" ||
        code === "canceled"
      ) {
        throw new IngesterError(code, `${url}: ${text}`);
      }
      throw new IngesterError("upstream", `${url}: ${response.status} ${text.slice(0, 512)}`);
    }
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw new IngesterError("upstream", `${url}: invalid JSON`, { cause: error });
    }
  }

  async query(
    req: IngesterQueryRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterStream[]> {
    const body = queryRequestJson(req);
    const answers = await Promise.all(
      this.urls.map(async (url) =>
        parseStreams(await this.post(url, "/ingester/v1/query", req.tenant, body, options)),
      ),
    );
    return answers.flat();
  }

  async series(
    req: IngesterSeriesRequest,
    options: IngesterCallOptions = {},
  ): Promise<{ labels: string; fingerprint: bigint }[]> {
    const body = seriesRequestJson(req);
    const answers = await Promise.all(
      this.urls.map(async (url) =>
        parseSeries(await this.post(url, "/ingester/v1/series", req.tenant, body, options)),
      ),
    );
    return answers.flat();
  }
}
