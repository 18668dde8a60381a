import { xxhash64 } from "@sieve/bloom";
import type { Logger } from "pino";
import type { SegmentChunk } from "@sieve/index";
import { decodeFilterResponse, encodeFilterRequest } from "@sieve/proto";
import type {
  ChunkFilter,
  FilterRequest,
  FilterResponse,
  FilterSeries,
  FilterStats,
} from "@sieve/proto";
import { Verdicts } from "./explain.js";
import { addStats, emptyStats, failOpen } from "./gateway.js";
import { FILTER_PATH, PROTOBUF_TYPE } from "./http.js";
import { jumpHash } from "./jump.js";
import type { FailOpenReason } from "./reasons.js";

/** Options of a {@link BloomGatewayClient}. */
export interface BloomGatewayClientOptions {
  /** Base URLs of the gateways, e.g. `http://10.0.0.5:3100`; every client must list them in the same order. */
  readonly urls: readonly string[];
  /** Longest wait for one gateway's answer, ms (default 10,000: twice the gateway's read timeout). */
  readonly timeoutMs?: number;
  /** Where a gateway that fails (and so keeps its refs untested) is logged; default: nowhere. */
  readonly logger?: Logger;
}

/** The client's default timeout, ms. */
const DEFAULT_CLIENT_TIMEOUT_MS = 10_000;

class GatewayCallError extends Error {
  constructor(
    readonly reason: FailOpenReason,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Asks remote gateways to filter (the distributed path). Series are grouped by their
 * bloom block's key and each block is routed by jump consistent hash of the key's
 * xxhash64 over `urls`, so one block is always read and cached by the same gateway; one
 * request goes to each gateway concerned, all at once. Series without a bloom are kept
 * here without a call. A gateway that fails, answers garbage or times out has all its
 * series' refs kept (`gateway_error` or `timeout` in `failedOpen`). The gateways' verdicts
 * are passed on, with the client's own for the chunks it kept untested.
 */
export class BloomGatewayClient implements ChunkFilter {
  private readonly urls: readonly string[];
  private readonly timeoutMs: number;
  private readonly logger: Logger | undefined;

  constructor(opts: BloomGatewayClientOptions) {
    if (opts.urls.length === 0) throw new TypeError("BloomGatewayClient needs at least one URL");
    for (const url of opts.urls) {
      if (!URL.canParse(url)) throw new TypeError(`not a URL: ${JSON.stringify(url)}`);
    }
    this.urls = opts.urls.map((u) => u.replace(/\/+$/, ""));
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_CLIENT_TIMEOUT_MS;
    this.logger = opts.logger;
    if (!(Number.isSafeInteger(this.timeoutMs) && this.timeoutMs > 0)) {
      throw new TypeError(`timeoutMs must be a positive integer, got ${this.timeoutMs}`);
    }
  }

  /** The index in `urls` of the gateway that owns the bloom block `key`. */
  gatewayFor(key: string): number {
    return jumpHash(xxhash64(key), this.urls.length);
  }

  /** Filters `req` on the gateways that own its blocks; see the class comment. */
  async filterChunkRefs(req: FilterRequest): Promise<FilterResponse> {
    const stats = emptyStats();
    const verdicts = new Verdicts(req.explain === true);
    const kept = new Array<readonly SegmentChunk[] | undefined>(req.series.length);
    const byGateway = new Map<number, number[]>();
    req.series.forEach((s, i) => {
      if (req.test.kind === "all" || s.chunks.length === 0) {
        kept[i] = s.chunks;
        return;
      }
      if (s.bloom.kind === "missing") {
        kept[i] = failOpen(s, "missing_bloom", stats, verdicts);
        return;
      }
      const g = this.gatewayFor(s.bloom.key);
      const list = byGateway.get(g);
      if (list === undefined) byGateway.set(g, [i]);
      else list.push(i);
    });
    // Series answered here are counted here; the gateways count theirs.
    for (let i = 0; i < req.series.length; i++) {
      if (kept[i] === undefined) continue;
      stats.series++;
      stats.chunks += req.series[i]!.chunks.length;
    }
    await Promise.all(
      [...byGateway].map(async ([g, indices]) => {
        const sub: FilterSeries[] = indices.map((i) => req.series[i]!);
        try {
          const res = await this.call(this.urls[g]!, { ...req, series: sub });
          const assigned = assign(sub, res.series);
          indices.forEach((i, j) => (kept[i] = assigned[j]!));
          addStats(stats, res.stats);
          verdicts.add(res.verdicts);
        } catch (error) {
          const reason = error instanceof GatewayCallError ? error.reason : "gateway_error";
          const failed = emptyStats();
          indices.forEach((i) => {
            const s = req.series[i]!;
            failed.series++;
            failed.chunks += s.chunks.length;
            kept[i] = failOpen(s, reason, failed, verdicts);
          });
          addStats(stats, failed);
          this.logger?.warn(
            {
              err: error,
              gateway: this.urls[g],
              reason,
              chunks: failed.chunks,
              tenant: req.tenant,
            },
            "bloom gateway failed: kept its chunk refs untested",
          );
        }
      }),
    );
    const series: FilterResponse["series"] = [];
    req.series.forEach((s, i) => {
      const chunks = kept[i]!;
      if (chunks.length > 0) series.push({ fingerprint: s.fingerprint, chunks: [...chunks] });
    });
    stats.chunksPruned = stats.chunks - series.reduce((n, s) => n + s.chunks.length, 0);
    return { series, stats, ...verdicts.field() };
  }

  private async call(
    url: string,
    req: FilterRequest,
  ): Promise<Omit<FilterResponse, "stats"> & { stats: FilterStats }> {
    let response: Response;
    try {
      response = await fetch(url + FILTER_PATH, {
        method: "POST",
        headers: { "content-type": PROTOBUF_TYPE, "x-scope-orgid": req.tenant },
        body: encodeFilterRequest(req),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (response.status !== 200) {
        const text = (await response.text()).trim().slice(0, 500);
        throw new GatewayCallError("gateway_error", `${url}: ${response.status} ${text}`);
      }
      const body = new Uint8Array(await response.arrayBuffer());
      const decoded = decodeFilterResponse(body);
      return {
        series: decoded.series.map((s) => ({ fingerprint: s.fingerprint, chunks: [...s.chunks] })),
        stats: decoded.stats,
        ...(decoded.verdicts !== undefined && { verdicts: decoded.verdicts }),
      };
    } catch (error) {
      if (error instanceof GatewayCallError) throw error;
      const name = (error as Error).name;
      throw new GatewayCallError(
        name === "TimeoutError" ? "timeout" : "gateway_error",
        `${url}: ${(error as Error).message}`,
      );
    }
  }
}

/**
 * Matches a gateway's answer (the series with kept chunks, in request order) back to the
 * series asked: each answered series is the next asked one with its fingerprint. An answer
 * that does not fit is a gateway error.
 */
function assign(
  asked: readonly FilterSeries[],
  answered: FilterResponse["series"],
): SegmentChunk[][] {
  const out: SegmentChunk[][] = asked.map(() => []);
  let p = 0;
  for (const a of answered) {
    while (p < asked.length && asked[p]!.fingerprint !== a.fingerprint) p++;
    if (p === asked.length) {
      throw new GatewayCallError(
        "gateway_error",
        `answer lists series ${a.fingerprint} out of order`,
      );
    }
    out[p++] = a.chunks;
  }
  return out;
}
