import { deadlineSignal } from "@sieve/kit";
import {
  ProtoError,
  decodeQueryResponse,
  decodeSampleResponse,
  decodeSeriesResponse,
  encodeQueryRequest,
  encodeSampleRequest,
  encodeSeriesRequest,
  encodeTailRequest,
  decodeVolumeResponse,
  encodeVolumeRequest,
  decodeStatsResponse,
  encodeStatsRequest,
  decodePatternsResponse,
  encodePatternsRequest,
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
  IngesterTail,
  IngesterTailer,
  IngesterTailRequest,
  IngesterTailSink,
  IngesterVolume,
  IngesterVolumeRequest,
  IngesterStats,
  IngesterStatsRequest,
  IngesterPatternsRequest,
  PatternSeries,
} from "@sieve/proto";
import { IngesterError } from "./errors.js";
import type { IngesterErrorCode } from "./errors.js";
import { PROTOBUF_TYPE, TIMEOUT_HEADER } from "./http.js";
import { mergePatterns } from "./patterns.js";
import { sumStats } from "./volume.js";
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
export class IngesterHttpClient implements IngesterQuerier, IngesterTailer {
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

  /** Posts one request to every ingester: their answers, in `urls` order. */
  private everyIngester<T>(
    path: string,
    tenant: string,
    body: Uint8Array,
    decode: (bytes: Uint8Array) => T,
    options: IngesterCallOptions,
  ): Promise<T[]> {
    return Promise.all(this.urls.map((url) => this.post(url, path, tenant, body, decode, options)));
  }

  async query(
    req: IngesterQueryRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterStream[]> {
    const answers = await this.everyIngester(
      "/ingester/v1/query",
      req.tenant,
      encodeQueryRequest(req),
      decodeQueryResponse,
      options,
    );
    return answers.flat();
  }

  async series(
    req: IngesterSeriesRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterSeries[]> {
    const answers = await this.everyIngester(
      "/ingester/v1/series",
      req.tenant,
      encodeSeriesRequest(req),
      decodeSeriesResponse,
      options,
    );
    return answers.flat();
  }

  /**
   * Holds a tail on every ingester (`POST /ingester/v1/tail`, a streamed answer of
   * length-prefixed frames): `held` resolves once each answered its first, empty frame.
   * One ingester's tail failing or ending ends the whole tail (`sink.ended`, once): its
   * entries cannot come from anywhere else.
   */
  tail(req: IngesterTailRequest, sink: IngesterTailSink): IngesterTail {
    const abort = new AbortController();
    const body = encodeTailRequest(req);
    let closed = false;
    const end = (error: Error): void => {
      if (closed) return;
      closed = true;
      abort.abort();
      sink.ended(error);
    };
    const each = this.urls.map(
      (url) =>
        new Promise<void>((resolve, reject) => {
          readTail(url, req.tenant, body, abort.signal, sink, resolve).then(
            () => {
              reject(new IngesterError("upstream", `${url}: the tail ended`));
              end(new IngesterError("upstream", `${url}: the tail ended`));
            },
            (error: unknown) => {
              const e = closed ? new IngesterError("canceled") : (error as Error);
              reject(e);
              end(e);
            },
          );
        }),
    );
    const held = Promise.all(each).then(() => undefined);
    held.catch(() => undefined); // the caller awaits it; never an unhandled rejection
    return {
      held,
      close: () => {
        closed = true;
        abort.abort();
      },
    };
  }

  /** Every ingester's volumes, concatenated: the querier sums them by name and bucket. */
  async volume(
    req: IngesterVolumeRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterVolume[]> {
    const answers = await this.everyIngester(
      "/ingester/v1/volume",
      req.tenant,
      encodeVolumeRequest(req),
      decodeVolumeResponse,
      options,
    );
    return answers.flat();
  }

  /** Every ingester's stats, summed (each owns different partitions, so different streams). */
  async stats(
    req: IngesterStatsRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterStats> {
    const answers = await this.everyIngester(
      "/ingester/v1/stats",
      req.tenant,
      encodeStatsRequest(req),
      decodeStatsResponse,
      options,
    );
    return sumStats(answers);
  }

  async patterns(
    req: IngesterPatternsRequest,
    options: IngesterCallOptions = {},
  ): Promise<PatternSeries[]> {
    const answers = await this.everyIngester(
      "/ingester/v1/patterns",
      req.tenant,
      encodePatternsRequest(req),
      decodePatternsResponse,
      options,
    );
    return mergePatterns(answers);
  }

  async querySample(
    req: IngesterSampleRequest,
    options: IngesterCallOptions = {},
  ): Promise<IngesterSamplePart[]> {
    const answers = await this.everyIngester(
      "/ingester/v1/sample",
      req.tenant,
      encodeSampleRequest(req),
      decodeSampleResponse,
      options,
    );
    return answers.flat();
  }
}

/**
 * Reads one ingester's tail: calls `held` at its first (empty) frame, then hands each
 * frame's streams to `sink`. Resolves when the ingester ends the answer; rejects on a
 * refusal (the ingester's code, as {@link IngesterHttpClient.query} reads it) or an error.
 */
async function readTail(
  url: string,
  tenant: string,
  body: Uint8Array,
  signal: AbortSignal,
  sink: IngesterTailSink,
  held: () => void,
): Promise<void> {
  let response: Response;
  try {
    response = await fetch(`${url}/ingester/v1/tail`, {
      method: "POST",
      headers: { "content-type": PROTOBUF_TYPE, "x-scope-orgid": tenant },
      body,
      signal,
    });
  } catch (error) {
    throw new IngesterError("upstream", `${url}: ${(error as Error).message}`, { cause: error });
  }
  if (!response.ok || response.body === null) {
    const text = await response.text().catch(() => "");
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
  let buffered = new Uint8Array(0);
  let first = true;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      const joined = new Uint8Array(buffered.length + chunk.length);
      joined.set(buffered);
      joined.set(chunk, buffered.length);
      let at = 0;
      while (joined.length - at >= 4) {
        const length = new DataView(joined.buffer, joined.byteOffset + at, 4).getUint32(0);
        if (joined.length - at - 4 < length) break;
        const frame = joined.subarray(at + 4, at + 4 + length);
        at += 4 + length;
        if (first) {
          first = false;
          held();
        }
        if (length === 0) continue; // held, or a keepalive
        let streams: IngesterStream[];
        try {
          streams = decodeQueryResponse(frame);
        } catch (error) {
          throw new IngesterError("upstream", `${url}: ${(error as Error).message}`, {
            cause: error,
          });
        }
        for (const stream of streams) sink.entries(stream);
      }
      buffered = joined.slice(at);
    }
  } catch (error) {
    if (error instanceof IngesterError) throw error;
    throw new IngesterError("upstream", `${url}: ${(error as Error).message}`, { cause: error });
  }
}
