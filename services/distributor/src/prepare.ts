/**
 * The stateless half of a push: decompress, decode, validate every stream and entry with
 * the tenant's limits, and encode each accepted stream as its queue record. It needs no
 * state but the limits and the clock, so it runs on a worker thread (see workers.ts) and
 * hands back what the main thread can take without per-entry work: the records back to
 * back in one transferable buffer, one small summary per stream, and the refusals.
 */
import { gunzipSync, inflateRawSync, inflateSync } from "node:zlib";
import type { Label } from "@sieve/labels";
import {
  encodeQueueRecord,
  encodeQueueRecordRaw,
  rawLineBytes,
  rawMetadataBytes,
  rawPairCount,
} from "@sieve/proto";
import type { RawPush } from "@sieve/proto";
import { DecodeError, decodeJsonPush, decodeOtlpPush, decodeProtobufPush } from "./decode.js";
import {
  LEVEL_LABEL,
  LEVEL_METADATA,
  labelLevel,
  leadingLevel,
  levelMetadataName,
  sourceLevel,
} from "./level.js";
import { LabelSetCache, readLabelPairs } from "./label-sets.js";
import { otlpStreams } from "./otlp.js";
import type { IncomingStream } from "./decode.js";
import type { TenantLimits } from "./limits.js";
import {
  messages,
  structuredMetadataBytes,
  timeBounds,
  utf8Bytes,
  validateEntry,
  validateLabels,
} from "./validation.js";
import type { Reason, Rejection } from "./validation.js";

/** The body encodings the push route accepts (Content-Encoding). */
export type BodyEncoding = "identity" | "gzip" | "deflate";

/** One push as received, with what validating it needs. Plain data: it crosses threads. */
export interface PrepareTask {
  readonly tenant: string;
  /** The body as received: compressed when `encoding` says so. */
  readonly body: Uint8Array;
  /**
   * JSON, or protobuf compressed with raw snappy (Loki's rule for any other type), or an
   * OTLP export request in either of its encodings (uncompressed unless `encoding` says).
   */
  readonly format: "json" | "protobuf" | "otlp-protobuf" | "otlp-json";
  readonly encoding: BodyEncoding;
  readonly maxDecompressedBytes: number;
  readonly limits: TenantLimits;
  /** The distributor's clock when the push arrived, for the timestamp bounds. */
  readonly nowMs: number;
}

/** An accepted stream, summarised: the main thread applies the stateful limits to it. */
export interface PreparedStream {
  /** Canonical label string. */
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly lines: number;
  /** Raw line bytes, for `bytes_received`. */
  readonly lineBytes: number;
  /** Line plus structured metadata bytes: what rate limits count, as Loki. */
  readonly bytes: number;
  /** Where its queue record ends in {@link PreparedPush.records} (it starts at the previous end). */
  readonly recordEnd: number;
}

/** Lines and bytes refused for one reason. */
export interface Discarded {
  readonly reason: Reason;
  lines: number;
  bytes: number;
}

/** A validated push, ready for the tenant limits and the queue. */
export interface PreparedPush {
  /** Entries the body held (an OTLP partial success counts refusals against it). */
  readonly entries: number;
  readonly streams: PreparedStream[];
  /** The accepted streams' queue records, back to back, in one buffer of its own. */
  readonly records: Uint8Array;
  /** Refusals in request order, with Loki's messages. */
  readonly rejections: Rejection[];
  readonly discarded: Discarded[];
}

/** A body that cannot be read at all: the answer, 400, 413 or 415. */
export interface BodyRefusal {
  readonly status: 400 | 413;
  readonly message: string;
}

/** What preparing a push comes to. */
export type PrepareOutcome =
  | { readonly ok: true; readonly push: PreparedPush }
  | { readonly ok: false; readonly refusal: BodyRefusal };

/** Decodes, validates and encodes one push. Never throws for bad input. */
export function preparePush(task: PrepareTask): PrepareOutcome {
  let streams: StreamSource[];
  try {
    const body = decompress(task.body, task.encoding, task.maxDecompressedBytes);
    switch (task.format) {
      case "json":
        streams = decodeJsonPush(body).map(incomingSource);
        break;
      case "protobuf":
        streams = rawSources(decodeProtobufPush(body, task.maxDecompressedBytes));
        break;
      case "otlp-protobuf":
      case "otlp-json": {
        const logs = decodeOtlpPush(body, task.format, task.maxDecompressedBytes);
        const nowNs = BigInt(task.nowMs) * 1_000_000n;
        streams = otlpStreams(logs, task.limits, nowNs).map(incomingSource);
        break;
      }
    }
  } catch (error) {
    if (error instanceof BodyError) return { ok: false, refusal: error.refusal };
    if (!(error instanceof DecodeError)) throw error;
    if (error.code === "body_too_large") {
      return refuse(413, messages.bodyTooLarge(error.bytes, task.maxDecompressedBytes));
    }
    return refuse(error.code === "too_many_messages" ? 413 : 400, error.message);
  }
  return { ok: true, push: prepareSources(task.tenant, streams, task.limits, task.nowMs) };
}

/**
 * A pushed stream as validation reads it, whatever the body's format: its labels, and per
 * entry the timestamp and byte sizes (never the text), and a way to write the queue record
 * of the entries kept.
 */
interface StreamSource {
  /** The label set as text: as sent (protobuf) or printed from the JSON object. */
  readonly labelsText: string;
  /** Sorted labels, when the format carries pairs; undefined means parse `labelsText`. */
  readonly labels?: readonly Label[];
  readonly count: number;
  timestampNs(i: number): bigint;
  lineBytes(i: number): number;
  metadataCount(i: number): number;
  metadataBytes(i: number): number;
  /** Entry `i`'s line (decoded only when a level is to be detected). */
  line(i: number): string;
  /** The level the line's first bytes say, read without decoding it (see `leadingLevel`). */
  leadingLevel?(i: number): string | undefined;
  /** Entry `i`'s metadata pairs the level detector reads (`LEVEL_METADATA`), by name. */
  levelMetadata(i: number): ReadonlyMap<string, string> | undefined;
  /**
   * The queue record of entries `kept` (indexes, in order), each given the pair
   * `detected_level` = `levels[k]` when that is set.
   */
  encode(
    tenant: string,
    labels: string,
    fingerprint: bigint,
    kept: readonly number[],
    levels?: readonly (string | undefined)[],
  ): Uint8Array;
}

/** A decoded stream (JSON, or a caller's) as a source. */
function incomingSource(stream: IncomingStream): StreamSource {
  const { entries } = stream;
  return {
    labelsText: stream.labelsText,
    ...(stream.labels !== undefined && { labels: stream.labels }),
    count: entries.length,
    timestampNs: (i) => entries[i]!.timestampNs,
    lineBytes: (i) => utf8Bytes(entries[i]!.line),
    metadataCount: (i) => entries[i]!.structuredMetadata.length,
    metadataBytes: (i) => structuredMetadataBytes(entries[i]!.structuredMetadata),
    line: (i) => entries[i]!.line,
    levelMetadata: (i) => {
      let out: Map<string, string> | undefined;
      for (const { name, value } of entries[i]!.structuredMetadata) {
        if (!LEVEL_METADATA.has(name) || out?.has(name) === true) continue;
        (out ??= new Map()).set(name, value);
      }
      return out;
    },
    encode: (tenant, labels, fingerprint, kept, levels) =>
      encodeQueueRecord({
        tenant,
        labels,
        fingerprint,
        entries: kept.map((i, k) => {
          const e = entries[i]!;
          const level = levels?.[k];
          if (level === undefined) return e;
          const pair = { name: LEVEL_LABEL, value: level };
          return { ...e, structuredMetadata: [...e.structuredMetadata, pair] };
        }),
      }),
  };
}

/** A protobuf push's streams, read as byte ranges, as sources. */
function rawSources(push: RawPush): StreamSource[] {
  return push.streams.map((s) => ({
    labelsText: s.labels,
    count: s.count,
    timestampNs: (i) => s.timestamps[i]!,
    lineBytes: (i) => rawLineBytes(s, i),
    metadataCount: (i) => rawPairCount(s, i),
    metadataBytes: (i) => rawMetadataBytes(s, i),
    line: (i) => push.bytes.toString("utf8", s.entries[i * 4], s.entries[i * 4 + 1]),
    leadingLevel: (i) => leadingLevel(push.bytes, s.entries[i * 4]!, s.entries[i * 4 + 1]!),
    levelMetadata: (i) => {
      let out: Map<string, string> | undefined;
      const { bytes } = push;
      for (let p = s.entries[i * 4 + 2]!; p < s.entries[i * 4 + 3]!; p++) {
        const name = levelMetadataName(bytes, s.pairs[p * 4]!, s.pairs[p * 4 + 1]!);
        if (name === undefined || out?.has(name) === true) continue;
        out ??= new Map();
        out.set(name, bytes.toString("utf8", s.pairs[p * 4 + 2], s.pairs[p * 4 + 3]));
      }
      return out;
    },
    encode: (tenant, labels, fingerprint, kept, levels) =>
      encodeQueueRecordRaw(
        tenant,
        labels,
        fingerprint,
        push,
        s,
        kept,
        levels === undefined ? undefined : { name: LEVEL_LABEL, values: levels },
      ),
  }));
}

function refuse(status: 400 | 413, message: string): PrepareOutcome {
  return { ok: false, refusal: { status, message } };
}

class BodyError extends Error {
  constructor(readonly refusal: BodyRefusal) {
    super(refusal.message);
  }
}

/**
 * Inflates a gzip or deflate body in one synchronous call, stopped by zlib itself once the
 * output passes `maxBytes`: a bomb costs at most `maxBytes` (it runs on a worker, so a
 * synchronous call blocks nobody, and it keeps zlib off libuv's pool, which the WAL's
 * writes and fsyncs share).
 */
function decompress(body: Uint8Array, encoding: BodyEncoding, maxBytes: number): Uint8Array {
  if (encoding === "identity") return body;
  try {
    if (encoding === "gzip") return gunzipSync(body, { maxOutputLength: maxBytes });
    return inflateDeflate(body, maxBytes);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_BUFFER_TOO_LARGE") {
      // zlib stops at the cap without saying how far the body would go: at least one more.
      throw new BodyError({
        status: 413,
        message: `${messages.bodyTooLarge(maxBytes + 1, maxBytes)} (decompressed)`,
      });
    }
    throw new BodyError({
      status: 400,
      message: `${encoding} body does not decompress: ${(error as Error).message}`,
    });
  }
}

/**
 * Inflates a `deflate` body: zlib-wrapped (RFC 9110, what most HTTP clients send) or raw
 * DEFLATE (what Loki reads, and Go's `compress/flate` writes). A zlib header is two bytes with
 * method 8, a window of at most 32 KiB and a check making them a multiple of 31; one raw
 * stream in ~500 starts so too, so a body that fails as zlib is tried raw before refusing.
 */
function inflateDeflate(body: Uint8Array, maxBytes: number): Uint8Array {
  const cmf = body[0] ?? 0;
  const flg = body[1] ?? 0;
  const zlibHeader =
    body.length >= 2 && (cmf & 0x0f) === 8 && cmf >> 4 <= 7 && (cmf * 256 + flg) % 31 === 0;
  if (!zlibHeader) return inflateRawSync(body, { maxOutputLength: maxBytes });
  try {
    return inflateSync(body, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw error;
    try {
      return inflateRawSync(body, { maxOutputLength: maxBytes });
    } catch {
      throw error;
    }
  }
}

/** The label sets this thread has read (each push worker has its own). */
const labelSets = new LabelSetCache();

interface Kept {
  readonly source: StreamSource;
  /** The labels, parsed. */
  readonly parsed: readonly Label[];
  readonly labels: string;
  readonly fingerprint: bigint;
  readonly entries: number[];
  lineBytes: number;
  bytes: number;
}

/**
 * Validates decoded streams with Loki's rules (labels per stream, then each entry: Loki
 * drops single entries) and encodes each accepted stream's queue record. Refusals keep the
 * request's order.
 */
export function prepareStreams(
  tenant: string,
  streams: readonly IncomingStream[],
  limits: TenantLimits,
  nowMs: number,
): PreparedPush {
  return prepareSources(tenant, streams.map(incomingSource), limits, nowMs);
}

function prepareSources(
  tenant: string,
  streams: readonly StreamSource[],
  limits: TenantLimits,
  nowMs: number,
): PreparedPush {
  const bounds = timeBounds(limits, nowMs);
  const rejections: Rejection[] = [];
  const discarded = new Map<Reason, Discarded>();
  const discard = (reason: Reason, lines: number, bytes: number): void => {
    if (lines === 0) return;
    const d = discarded.get(reason);
    if (d === undefined) discarded.set(reason, { reason, lines, bytes });
    else {
      d.lines += lines;
      d.bytes += bytes;
    }
  };
  const refuseStream = (stream: StreamSource, rejection: Rejection): void => {
    rejections.push(rejection);
    let bytes = 0;
    for (let i = 0; i < stream.count; i++) bytes += stream.lineBytes(i) + stream.metadataBytes(i);
    discard(rejection.reason, stream.count, bytes);
  };

  const discover = limits.discoverServiceName;
  const discoverKey = JSON.stringify(discover);
  const kept: Kept[] = [];
  for (const stream of streams) {
    const read =
      stream.labels === undefined
        ? labelSets.read(stream.labelsText, discover, discoverKey)
        : readLabelPairs(stream.labels, stream.labelsText, discover);
    if ("error" in read) {
      refuseStream(stream, { reason: "invalid_labels", message: read.error });
      continue;
    }
    const rejection = validateLabels(read.pushed, stream.labelsText, limits);
    if (rejection !== undefined) {
      refuseStream(stream, rejection);
      continue;
    }
    if (read.unreadable !== undefined) {
      refuseStream(stream, {
        reason: "invalid_labels",
        message: messages.invalidLabels(stream.labelsText, read.unreadable),
      });
      continue;
    }
    const k: Kept = {
      source: stream,
      parsed: read.labels,
      labels: read.canonical,
      fingerprint: read.fingerprint,
      entries: [],
      lineBytes: 0,
      bytes: 0,
    };
    for (let i = 0; i < stream.count; i++) {
      const lineBytes = stream.lineBytes(i);
      const pairs = stream.metadataCount(i);
      const metadataBytes = pairs === 0 ? 0 : stream.metadataBytes(i);
      const error = validateEntry(
        stream.timestampNs(i),
        lineBytes,
        pairs,
        metadataBytes,
        read.canonical,
        limits,
        bounds,
      );
      if (error !== undefined) {
        rejections.push(error);
        discard(error.reason, 1, lineBytes + metadataBytes);
        continue;
      }
      k.entries.push(i);
      k.lineBytes += lineBytes;
      k.bytes += lineBytes + metadataBytes;
    }
    if (k.entries.length > 0) kept.push(k);
  }

  // Loki's level discovery, on the entries kept (its limits do not count the added pair).
  const levels = (k: Kept): (string | undefined)[] | undefined => {
    if (!limits.discoverLogLevels || !limits.allowStructuredMetadata) return undefined;
    const fromLabels = labelLevel(k.parsed);
    return k.entries.map((i) => sourceLevel(fromLabels, k.source, i));
  };
  // Each record is encoded on its own (protobufjs may hand back a slice of a shared pool),
  // then copied into one fresh buffer that can be transferred without copying again.
  const encoded = kept.map((k) =>
    k.source.encode(tenant, k.labels, k.fingerprint, k.entries, levels(k)),
  );
  let total = 0;
  for (const e of encoded) total += e.length;
  const records = new Uint8Array(total);
  const prepared: PreparedStream[] = new Array<PreparedStream>(kept.length);
  let at = 0;
  for (let i = 0; i < kept.length; i++) {
    const k = kept[i]!;
    records.set(encoded[i]!, at);
    at += encoded[i]!.length;
    prepared[i] = {
      labels: k.labels,
      fingerprint: k.fingerprint,
      lines: k.entries.length,
      lineBytes: k.lineBytes,
      bytes: k.bytes,
      recordEnd: at,
    };
  }
  let entries = 0;
  for (const stream of streams) entries += stream.count;
  return { entries, streams: prepared, records, rejections, discarded: [...discarded.values()] };
}
