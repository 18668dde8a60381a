/*
 * The ingester's query API (ingester.proto, package sieve.ingester.v1): the one definition
 * of the contract between queriers and ingesters, in process (the querier calls an
 * `Ingester`, or the main thread's over a MessagePort) and over HTTP (these codecs).
 *
 * A query request carries the log query as text, printed once by the querier; the ingester
 * parses it once and runs its whole pipeline, and answers the kept entries processed (line
 * and labels after the pipeline), so the querier merges them with the store's results
 * without running the pipeline again. Decoding checks what the wire grammar cannot express
 * (non-empty tenant, a bounded selector, end ≥ start, a known direction, byte counts that
 * fit a JavaScript number) and throws a ProtoError `malformed_protobuf` naming the field;
 * whether the selector parses is the ingester's to judge.
 */
import type { Label } from "@sieve/labels";
import type { SeriesPartial } from "@sieve/logql";
import protobuf from "protobufjs";
import type { LongBits } from "./codec.js";
import { ingesterDescriptor } from "./generated/ingester-descriptor.js";
import { decodeWith, malformed, toBigInt, toLong } from "./long.js";

// Reflection, as codec.ts explains for the push messages; a root of its own.
const root = protobuf.Root.fromJSON(ingesterDescriptor);
const QueryRequestType = root.lookupType("sieve.ingester.v1.QueryRequest");
const QueryResponseType = root.lookupType("sieve.ingester.v1.QueryResponse");
const SeriesRequestType = root.lookupType("sieve.ingester.v1.SeriesRequest");
const SeriesResponseType = root.lookupType("sieve.ingester.v1.SeriesResponse");
const VolumeRequestType = root.lookupType("sieve.ingester.v1.VolumeRequest");
const VolumeResponseType = root.lookupType("sieve.ingester.v1.VolumeResponse");
const StatsRequestType = root.lookupType("sieve.ingester.v1.StatsRequest");
const StatsResponseType = root.lookupType("sieve.ingester.v1.StatsResponse");
const PatternsRequestType = root.lookupType("sieve.ingester.v1.PatternsRequest");
const PatternsResponseType = root.lookupType("sieve.ingester.v1.PatternsResponse");
const SampleRequestType = root.lookupType("sieve.ingester.v1.SampleRequest");
const SampleResponseType = root.lookupType("sieve.ingester.v1.SampleResponse");

/** Longest selector (log query) a request may carry, in UTF-16 code units. */
export const MAX_SELECTOR_LENGTH = 65_536;

/** A query of an ingester's unflushed data. Times are Unix ns, [start, end). */
export interface IngesterQueryRequest {
  readonly tenant: string;
  /**
   * The log query: a stream selector, optionally followed by the pipeline the ingester
   * runs, e.g. `{app="api"} |= "x" | json` (Loki's QueryRequest.selector carries the same).
   */
  readonly selector: string;
  readonly start: bigint;
  readonly end: bigint;
  readonly direction: "forward" | "backward";
  /** Most entries per stream in `direction`, after the pipeline; 0 = no limit. */
  readonly limit: number;
  /**
   * Most bytes the kept entries may hold, counted as the querier counts them (2 per UTF-16
   * unit of a line + 96 per entry): the querier's `maxQueryMemoryBytes`. Absent or 0 = no
   * bound (the ingester's `maxEntriesPerQuery` still applies).
   */
  readonly maxBytes?: number;
  /**
   * The tenant's delete requests that overlap the query (query-time filtering): the lines
   * they select are dropped before the pipeline. Absent: none.
   */
  readonly deletes?: readonly IngesterDelete[];
}

/** A delete request as query-time filtering takes it (`@sieve/logql` DeleteSpec). */
export interface IngesterDelete {
  /** A log selector with optional line filters. */
  readonly query: string;
  /** Unix ns, both inclusive. */
  readonly start: bigint;
  readonly end: bigint;
}

/** Most delete requests one query may carry. */
export const MAX_QUERY_DELETES = 10_000;

/** One kept entry, after the query's pipeline. */
export interface IngesterEntry {
  readonly timestamp: bigint;
  /** The line after the pipeline (`line_format` may have rewritten it). */
  readonly line: string;
  /** The entry's structured metadata, as pushed. */
  readonly structuredMetadata: Readonly<Record<string, string>>;
  /**
   * The labels after the pipeline; absent when they are the stream's labels overlaid with
   * `structuredMetadata` (no parser, no `label_format`, no `drop`: the usual case).
   */
  readonly labels?: Readonly<Record<string, string>>;
}

/** One stream's kept entries, sorted in the request's direction. */
export interface IngesterStream {
  /** The canonical label string: the stream's identity. */
  readonly labels: string;
  /** The same labels, parsed: the querier reads them without parsing `labels`. */
  readonly labelMap: Readonly<Record<string, string>>;
  readonly fingerprint: bigint;
  readonly entries: readonly IngesterEntry[];
}

/** A series request: streams with data in [start, end), optionally matching a selector. */
export interface IngesterSeriesRequest {
  readonly tenant: string;
  /** A LogQL stream selector; absent = every stream. */
  readonly selector?: string;
  readonly start: bigint;
  readonly end: bigint;
}

/** One series of an ingester's answer. */
export interface IngesterSeries {
  /** The canonical label string. */
  readonly labels: string;
  readonly fingerprint: bigint;
}

/** How a call may be ended early. */
export interface IngesterCallOptions {
  /** Aborts the call: it rejects with `timeout` (a TimeoutError reason) or `canceled`. */
  readonly signal?: AbortSignal;
  /**
   * What is left of the caller's deadline, in ms: the HTTP client sends it to the
   * ingester, which aborts the query there at that time (in process, use `signal`).
   */
  readonly timeoutMs?: number;
}

/**
 * What a querier asks of the ingesters: `@sieve/ingester`'s `Ingester` in process, its
 * `IngesterHttpClient` over HTTP, or the main thread's ingester over a MessagePort.
 */
export interface IngesterQuerier {
  query(req: IngesterQueryRequest, options?: IngesterCallOptions): Promise<IngesterStream[]>;
  series(req: IngesterSeriesRequest, options?: IngesterCallOptions): Promise<IngesterSeries[]>;
  /** Bytes of the unflushed chunks by name and bucket (Loki's ingester GetVolume). */
  volume(req: IngesterVolumeRequest, options?: IngesterCallOptions): Promise<IngesterVolume[]>;
  /** What the unflushed chunks hold (Loki's ingester GetStats). */
  stats(req: IngesterStatsRequest, options?: IngesterCallOptions): Promise<IngesterStats>;
  /** The patterns learned from the unflushed and recent lines (Loki's pattern ingester). */
  patterns(req: IngesterPatternsRequest, options?: IngesterCallOptions): Promise<PatternSeries[]>;
  /** A metric query pushed down: partial aggregates of the unflushed data, not lines. */
  querySample(
    req: IngesterSampleRequest,
    options?: IngesterCallOptions,
  ): Promise<IngesterSamplePart[]>;
}

/**
 * A volume request (Loki's VolumeRequest to an ingester): the tenant's streams matching
 * `selector` over [start, end] (both inclusive), named and bucketed as `@sieve/index`'s
 * `VolumeAccumulator` does.
 */
export interface IngesterVolumeRequest {
  readonly tenant: string;
  /** A LogQL stream selector; absent = every stream (Loki's `{}`). */
  readonly selector?: string;
  readonly start: bigint;
  readonly end: bigint;
  /** Bucket width, ns; 0 = one bucket. */
  readonly step: bigint;
  readonly targetLabels: readonly string[];
  readonly aggregateBy: "series" | "labels";
  /** Most names before the ingester refuses (the tenant's `volumeMaxSeries`). */
  readonly maxSeries: number;
}

/** One name's bytes in one bucket. */
export interface IngesterVolume {
  readonly name: string;
  readonly bucket: number;
  readonly bytes: number;
}

/** A stats request: the unflushed chunks of matching streams overlapping [start, end]. */
export interface IngesterStatsRequest {
  readonly tenant: string;
  /** A LogQL stream selector; absent = every stream. */
  readonly selector?: string;
  readonly start: bigint;
  readonly end: bigint;
}

/** What the unflushed chunks hold: Loki's IndexStatsResponse, bytes as line bytes. */
export interface IngesterStats {
  readonly streams: number;
  readonly chunks: number;
  readonly bytes: number;
  readonly entries: number;
}

/** A patterns request: the patterns learned from the tenant's streams matching a selector. */
export interface IngesterPatternsRequest {
  readonly tenant: string;
  /** A LogQL stream selector (no pipeline). */
  readonly selector: string;
  /** [start, end), Unix ns. */
  readonly start: bigint;
  readonly end: bigint;
  /** Counts are summed over steps of this many ms, each at a multiple of it since the epoch. */
  readonly stepMs: number;
}

/** One pattern of one level, with its line counts per step: `[unix seconds, count]`, in time order. */
export interface PatternSeries {
  readonly pattern: string;
  readonly level: string;
  readonly samples: readonly (readonly [number, number])[];
}

/**
 * A metric query pushed down to the ingesters (Loki's `QuerySample`): its range
 * aggregations are evaluated there into partial aggregates (`@sieve/logql` SamplePlan,
 * built from the same text and steps on both sides).
 */
export interface IngesterSampleRequest {
  readonly tenant: string;
  /** The metric query's text. */
  readonly query: string;
  /** Steps from start to end inclusive, every `step` ns; 0 for an instant query. */
  readonly start: bigint;
  readonly end: bigint;
  readonly step: bigint;
  /** Most buckets and points one part may hold; absent or 0 = LogQL's default. */
  readonly maxSamples?: number;
  /**
   * Labels put on every stream before it is matched and folded: a read across tenants
   * sends `__tenant_id__`. Absent: the streams' own labels.
   */
  readonly streamLabels?: Readonly<Record<string, string>>;
  /** As {@link IngesterQueryRequest.deletes}: lines dropped before they are counted. */
  readonly deletes?: readonly IngesterDelete[];
}

/** The identity of a cut chunk: as the index names it once flushed. */
export interface SampleChunkRef {
  readonly fingerprint: bigint;
  readonly from: bigint;
  readonly through: bigint;
  readonly checksum: number;
}

/**
 * The partials of one source of an ingester: a cut chunk (the querier drops it when it
 * reads the same chunk from the store, so nothing counts twice) or its heads.
 */
export interface IngesterSamplePart {
  readonly chunk?: SampleChunkRef;
  readonly series: readonly SeriesPartial[];
}

// --- wire shapes, as protobufjs decodes them (absent fields read as their defaults) -----

interface WireQueryRequest {
  tenant: string;
  selector: string;
  start: LongBits | number;
  end: LongBits | number;
  direction: number;
  limit: number;
  maxBytes: LongBits | number;
  deletes: WireDelete[];
}
interface WireDelete {
  selector: string;
  start: LongBits | number;
  end: LongBits | number;
}
interface WireEntry {
  timestamp: LongBits | number;
  line: string;
  structuredMetadata: Label[];
  labels?: { pairs: Label[] } | null;
}
interface WireStream {
  labels: string;
  fingerprint: LongBits | number;
  entries: WireEntry[];
  labelPairs: Label[];
}
interface WireSeriesRequest {
  tenant: string;
  selector: string;
  start: LongBits | number;
  end: LongBits | number;
}
interface WireSeries {
  labels: string;
  fingerprint: LongBits | number;
}

const DIRECTIONS = ["forward", "backward"] as const;

function pairs(record: Readonly<Record<string, string>>): Label[] {
  return Object.entries(record).map(([name, value]) => ({ name, value }));
}

function record(list: readonly Label[], where: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of list) {
    if (p.name === "") throw malformed(`${where}: a label without a name`);
    out[p.name] = p.value;
  }
  return out;
}

function checkTenant(tenant: string): void {
  if (tenant === "") throw malformed("tenant is empty");
}

function checkSelector(selector: string): void {
  if (selector.length > MAX_SELECTOR_LENGTH) {
    throw malformed(`selector longer than ${MAX_SELECTOR_LENGTH}`);
  }
}

function range(w: { start: LongBits | number; end: LongBits | number }): {
  start: bigint;
  end: bigint;
} {
  const start = toBigInt(w.start, true);
  const end = toBigInt(w.end, true);
  if (end < start) throw malformed(`end ${end} before start ${start}`);
  return { start, end };
}

function encodeDeletes(deletes: readonly IngesterDelete[] | undefined): object[] {
  return (deletes ?? []).map((d) => ({
    selector: d.query,
    start: toLong(d.start),
    end: toLong(d.end),
  }));
}

function decodeDeletes(w: readonly WireDelete[]): { deletes?: IngesterDelete[] } {
  if (w.length === 0) return {};
  if (w.length > MAX_QUERY_DELETES) throw malformed(`${w.length} deletes`);
  return {
    deletes: w.map((d) => {
      if (d.selector === "") throw malformed("a delete without a selector");
      checkSelector(d.selector);
      const start = toBigInt(d.start, true);
      const end = toBigInt(d.end, true);
      if (end < start) throw malformed(`delete end ${end} before start ${start}`);
      return { query: d.selector, start, end };
    }),
  };
}

/** Encodes a QueryRequest: what a querier sends. */
export function encodeQueryRequest(req: IngesterQueryRequest): Uint8Array {
  return QueryRequestType.encode({
    tenant: req.tenant,
    selector: req.selector,
    start: toLong(req.start),
    end: toLong(req.end),
    direction: req.direction === "backward" ? 1 : 0,
    limit: req.limit,
    maxBytes: toLong(BigInt(req.maxBytes ?? 0)),
    deletes: encodeDeletes(req.deletes),
  }).finish();
}

/** Decodes and checks a QueryRequest; throws a ProtoError `malformed_protobuf`. */
export function decodeQueryRequest(bytes: Uint8Array): IngesterQueryRequest {
  const w = decodeWith(QueryRequestType, bytes) as WireQueryRequest;
  checkTenant(w.tenant);
  if (w.selector === "") throw malformed("selector is empty");
  checkSelector(w.selector);
  const direction = DIRECTIONS[w.direction];
  if (direction === undefined) throw malformed(`direction ${w.direction}`);
  const maxBytes = toBigInt(w.maxBytes, false);
  if (maxBytes > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`max_bytes ${maxBytes}`);
  return {
    tenant: w.tenant,
    selector: w.selector,
    ...range(w),
    direction,
    limit: w.limit >>> 0,
    ...(maxBytes > 0n && { maxBytes: Number(maxBytes) }),
    ...decodeDeletes(w.deletes),
  };
}

/** Encodes a QueryResponse: what an ingester answers. */
export function encodeQueryResponse(streams: readonly IngesterStream[]): Uint8Array {
  return QueryResponseType.encode({
    streams: streams.map((s) => ({
      labels: s.labels,
      fingerprint: toLong(s.fingerprint),
      labelPairs: pairs(s.labelMap),
      entries: s.entries.map((e) => ({
        timestamp: toLong(e.timestamp),
        line: e.line,
        structuredMetadata: pairs(e.structuredMetadata),
        ...(e.labels !== undefined && { labels: { pairs: pairs(e.labels) } }),
      })),
    })),
  }).finish();
}

/** Decodes a QueryResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeQueryResponse(bytes: Uint8Array): IngesterStream[] {
  const w = decodeWith(QueryResponseType, bytes) as { streams: WireStream[] };
  return w.streams.map((s, i) => ({
    labels: s.labels,
    labelMap: record(s.labelPairs, `stream ${i}`),
    fingerprint: toBigInt(s.fingerprint, false),
    entries: s.entries.map((e): IngesterEntry => {
      const structuredMetadata = record(e.structuredMetadata, `stream ${i}`);
      const timestamp = toBigInt(e.timestamp, true);
      return e.labels == null
        ? { timestamp, line: e.line, structuredMetadata }
        : {
            timestamp,
            line: e.line,
            structuredMetadata,
            labels: record(e.labels.pairs, `stream ${i}`),
          };
    }),
  }));
}

/** Encodes a SeriesRequest: what a querier sends. */
export function encodeSeriesRequest(req: IngesterSeriesRequest): Uint8Array {
  return SeriesRequestType.encode({
    tenant: req.tenant,
    selector: req.selector ?? "",
    start: toLong(req.start),
    end: toLong(req.end),
  }).finish();
}

/** Decodes and checks a SeriesRequest; throws a ProtoError `malformed_protobuf`. */
export function decodeSeriesRequest(bytes: Uint8Array): IngesterSeriesRequest {
  const w = decodeWith(SeriesRequestType, bytes) as WireSeriesRequest;
  checkTenant(w.tenant);
  checkSelector(w.selector);
  return {
    tenant: w.tenant,
    ...(w.selector !== "" && { selector: w.selector }),
    ...range(w),
  };
}

/** Encodes a SeriesResponse: what an ingester answers. */
export function encodeSeriesResponse(series: readonly IngesterSeries[]): Uint8Array {
  return SeriesResponseType.encode({
    series: series.map((s) => ({ labels: s.labels, fingerprint: toLong(s.fingerprint) })),
  }).finish();
}

/** Decodes a SeriesResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeSeriesResponse(bytes: Uint8Array): IngesterSeries[] {
  const w = decodeWith(SeriesResponseType, bytes) as { series: WireSeries[] };
  return w.series.map((s) => ({ labels: s.labels, fingerprint: toBigInt(s.fingerprint, false) }));
}

// --- tail: live entries pushed from the ingesters to a tailing querier ------------------

/**
 * A tail's subscription at an ingester (Loki's `TailRequest`): from the moment it is
 * held, every entry the ingester appends to a matching stream of `tenant` is run through
 * the query's pipeline there and pushed to the querier. Over HTTP it is a QueryRequest
 * whose range, direction and limit are unused (see `encodeTailRequest`).
 */
export interface IngesterTailRequest {
  readonly tenant: string;
  /** The log query, as {@link IngesterQueryRequest.selector}. */
  readonly selector: string;
}

/** Where an ingester's tail delivers. Called on the thread that asked for the tail. */
export interface IngesterTailSink {
  /** New entries of one stream, after the pipeline, in the order they were appended. */
  entries(stream: IngesterStream): void;
  /**
   * The tail ended on the ingesters' side (one went away, refused or gave up on a querier
   * that does not read): no more entries will come. Not called after `close()`.
   */
  ended(error: Error): void;
}

/** A tail held by the ingesters. */
export interface IngesterTail {
  /**
   * Resolves once every ingester holds the subscription: an entry appended after that is
   * pushed to the sink, so a query started then misses nothing in between. Rejects when
   * one refuses it (a bad selector: `invalid_selector`).
   */
  readonly held: Promise<void>;
  /** Ends the tail on every ingester. Idempotent. */
  close(): void;
}

/**
 * What a tailing querier asks of the ingesters (Loki's `Querier.Tail` on its ingesters):
 * `@sieve/ingester`'s `Ingester` and its worker threads in process, or its
 * `IngesterHttpClient` over HTTP. Always on the main thread, never in a query worker: a
 * tail lives as long as its WebSocket.
 */
export interface IngesterTailer {
  tail(req: IngesterTailRequest, sink: IngesterTailSink): IngesterTail;
}

/** Encodes a tail request: a QueryRequest carrying only the tenant and the selector. */
export function encodeTailRequest(req: IngesterTailRequest): Uint8Array {
  return encodeQueryRequest({
    tenant: req.tenant,
    selector: req.selector,
    start: 0n,
    end: 0n,
    direction: "forward",
    limit: 0,
  });
}

/** Decodes and checks a tail request; throws a ProtoError `malformed_protobuf`. */
export function decodeTailRequest(bytes: Uint8Array): IngesterTailRequest {
  const { tenant, selector } = decodeQueryRequest(bytes);
  return { tenant, selector };
}

/** Most buckets a volume request may ask for (Loki's 11,000 points, and the two ends). */
const MAX_VOLUME_BUCKETS = 11_002n;
const AGGREGATE_BY = ["series", "labels"] as const;

interface WireVolumeRequest {
  tenant: string;
  selector: string;
  start: LongBits | number;
  end: LongBits | number;
  step: LongBits | number;
  targetLabels: string[];
  aggregateBy: number;
  maxSeries: number;
}

/** A uint64 as a JavaScript number, refused past 2^53. */
function safeNumber(v: LongBits | number, field: string): number {
  const n = toBigInt(v, false);
  if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`${field} ${n}`);
  return Number(n);
}

/** Encodes a VolumeRequest: what a querier sends. */
export function encodeVolumeRequest(req: IngesterVolumeRequest): Uint8Array {
  return VolumeRequestType.encode({
    tenant: req.tenant,
    selector: req.selector ?? "",
    start: toLong(req.start),
    end: toLong(req.end),
    step: toLong(req.step),
    targetLabels: [...req.targetLabels],
    aggregateBy: req.aggregateBy === "labels" ? 1 : 0,
    maxSeries: req.maxSeries,
  }).finish();
}

/**
 * Decodes and checks a VolumeRequest (at most {@link MAX_VOLUME_BUCKETS} buckets, a known
 * aggregation, a bounded selector); throws a ProtoError `malformed_protobuf`.
 */
export function decodeVolumeRequest(bytes: Uint8Array): IngesterVolumeRequest {
  const w = decodeWith(VolumeRequestType, bytes) as WireVolumeRequest;
  checkTenant(w.tenant);
  checkSelector(w.selector);
  const { start, end } = range(w);
  const step = toBigInt(w.step, true);
  if (step < 0n) throw malformed(`step ${step}`);
  if (step > 0n && (end - start) / step > MAX_VOLUME_BUCKETS - 2n) {
    throw malformed(`more than ${MAX_VOLUME_BUCKETS} buckets`);
  }
  const aggregateBy = AGGREGATE_BY[w.aggregateBy];
  if (aggregateBy === undefined) throw malformed(`aggregate_by ${w.aggregateBy}`);
  if (w.targetLabels.length > 1024) throw malformed(`${w.targetLabels.length} target labels`);
  if (w.maxSeries === 0) throw malformed("max_series is 0");
  return {
    tenant: w.tenant,
    ...(w.selector !== "" && { selector: w.selector }),
    start,
    end,
    step,
    targetLabels: w.targetLabels,
    aggregateBy,
    maxSeries: w.maxSeries >>> 0,
  };
}

/** Encodes a VolumeResponse: what an ingester answers. */
export function encodeVolumeResponse(volumes: readonly IngesterVolume[]): Uint8Array {
  return VolumeResponseType.encode({
    volumes: volumes.map((v) => ({
      name: v.name,
      bucket: v.bucket,
      bytes: toLong(BigInt(v.bytes)),
    })),
  }).finish();
}

/** Decodes a VolumeResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeVolumeResponse(bytes: Uint8Array): IngesterVolume[] {
  const w = decodeWith(VolumeResponseType, bytes) as {
    volumes: { name: string; bucket: number; bytes: LongBits | number }[];
  };
  return w.volumes.map((v) => ({
    name: v.name,
    bucket: v.bucket >>> 0,
    bytes: safeNumber(v.bytes, "bytes"),
  }));
}

/** Encodes a StatsRequest: what a querier sends. */
export function encodeStatsRequest(req: IngesterStatsRequest): Uint8Array {
  return StatsRequestType.encode({
    tenant: req.tenant,
    selector: req.selector ?? "",
    start: toLong(req.start),
    end: toLong(req.end),
  }).finish();
}

/** Decodes and checks a StatsRequest; throws a ProtoError `malformed_protobuf`. */
export function decodeStatsRequest(bytes: Uint8Array): IngesterStatsRequest {
  const w = decodeWith(StatsRequestType, bytes) as WireSeriesRequest;
  checkTenant(w.tenant);
  checkSelector(w.selector);
  return { tenant: w.tenant, ...(w.selector !== "" && { selector: w.selector }), ...range(w) };
}

/** Encodes a StatsResponse: what an ingester answers. */
export function encodeStatsResponse(stats: IngesterStats): Uint8Array {
  return StatsResponseType.encode({
    streams: toLong(BigInt(stats.streams)),
    chunks: toLong(BigInt(stats.chunks)),
    bytes: toLong(BigInt(stats.bytes)),
    entries: toLong(BigInt(stats.entries)),
  }).finish();
}

/** Decodes a StatsResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeStatsResponse(bytes: Uint8Array): IngesterStats {
  const w = decodeWith(StatsResponseType, bytes) as Record<
    "streams" | "chunks" | "bytes" | "entries",
    LongBits | number
  >;
  return {
    streams: safeNumber(w.streams, "streams"),
    chunks: safeNumber(w.chunks, "chunks"),
    bytes: safeNumber(w.bytes, "bytes"),
    entries: safeNumber(w.entries, "entries"),
  };
}

interface WirePatternsRequest {
  tenant: string;
  selector: string;
  start: LongBits | number;
  end: LongBits | number;
  stepMs: LongBits | number;
}
interface WirePatternSeries {
  pattern: string;
  level: string;
  samples: { timestamp: LongBits | number; count: LongBits | number }[];
}

/** Encodes a PatternsRequest: what a querier sends. */
export function encodePatternsRequest(req: IngesterPatternsRequest): Uint8Array {
  return PatternsRequestType.encode({
    tenant: req.tenant,
    selector: req.selector,
    start: toLong(req.start),
    end: toLong(req.end),
    stepMs: toLong(BigInt(req.stepMs)),
  }).finish();
}

/** Decodes and checks a PatternsRequest; throws a ProtoError `malformed_protobuf`. */
export function decodePatternsRequest(bytes: Uint8Array): IngesterPatternsRequest {
  const w = decodeWith(PatternsRequestType, bytes) as WirePatternsRequest;
  checkTenant(w.tenant);
  if (w.selector === "") throw malformed("selector is empty");
  checkSelector(w.selector);
  const stepMs = toBigInt(w.stepMs, false);
  if (stepMs < 1n || stepMs > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`step_ms ${stepMs}`);
  return { tenant: w.tenant, selector: w.selector, ...range(w), stepMs: Number(stepMs) };
}

/** Encodes a PatternsResponse: what an ingester answers. */
export function encodePatternsResponse(series: readonly PatternSeries[]): Uint8Array {
  return PatternsResponseType.encode({
    series: series.map((s) => ({
      pattern: s.pattern,
      level: s.level,
      samples: s.samples.map(([t, n]) => ({
        timestamp: toLong(BigInt(t)),
        count: toLong(BigInt(n)),
      })),
    })),
  }).finish();
}

/** Decodes a PatternsResponse; throws a ProtoError `malformed_protobuf`. */
export function decodePatternsResponse(bytes: Uint8Array): PatternSeries[] {
  const w = decodeWith(PatternsResponseType, bytes) as { series: WirePatternSeries[] };
  return w.series.map((s) => ({
    pattern: s.pattern,
    level: s.level,
    samples: s.samples.map((p): [number, number] => {
      const count = toBigInt(p.count, false);
      if (count > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`count ${count}`);
      return [Number(toBigInt(p.timestamp, true)), Number(count)];
    }),
  }));
}

// --- sample queries (pushed-down metric evaluation) -------------------------------------

interface WireSampleRequest {
  tenant: string;
  query: string;
  start: LongBits | number;
  end: LongBits | number;
  step: LongBits | number;
  maxSamples: LongBits | number;
  streamLabels: Label[];
  deletes: WireDelete[];
}
interface WireSeriesPartial {
  agg: number;
  labels: Label[];
  lo: number;
  n: number[];
  a: number[];
  b: number[];
  ts: number[];
  v: number[];
}
interface WireSamplePart {
  chunk?: {
    fingerprint: LongBits | number;
    from: LongBits | number;
    through: LongBits | number;
    checksum: number;
  } | null;
  series: WireSeriesPartial[];
}

/** Encodes a SampleRequest: what a querier sends. */
export function encodeSampleRequest(req: IngesterSampleRequest): Uint8Array {
  return SampleRequestType.encode({
    tenant: req.tenant,
    query: req.query,
    start: toLong(req.start),
    end: toLong(req.end),
    step: toLong(req.step),
    maxSamples: toLong(BigInt(req.maxSamples ?? 0)),
    streamLabels: pairs(req.streamLabels ?? {}),
    deletes: encodeDeletes(req.deletes),
  }).finish();
}

/** Decodes and checks a SampleRequest; throws a ProtoError `malformed_protobuf`. */
export function decodeSampleRequest(bytes: Uint8Array): IngesterSampleRequest {
  const w = decodeWith(SampleRequestType, bytes) as WireSampleRequest;
  checkTenant(w.tenant);
  if (w.query === "") throw malformed("query is empty");
  checkSelector(w.query);
  const step = toBigInt(w.step, true);
  if (step < 0n) throw malformed(`step ${step}`);
  const maxSamples = toBigInt(w.maxSamples, false);
  if (maxSamples > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`max_samples ${maxSamples}`);
  return {
    tenant: w.tenant,
    query: w.query,
    ...range(w),
    step,
    ...(maxSamples > 0n && { maxSamples: Number(maxSamples) }),
    ...(w.streamLabels.length > 0 && { streamLabels: record(w.streamLabels, "stream_labels") }),
    ...decodeDeletes(w.deletes),
  };
}

/** Encodes a SampleResponse: what an ingester answers. */
export function encodeSampleResponse(parts: readonly IngesterSamplePart[]): Uint8Array {
  return SampleResponseType.encode({
    parts: parts.map((p) => ({
      ...(p.chunk !== undefined && {
        chunk: {
          fingerprint: toLong(p.chunk.fingerprint),
          from: toLong(p.chunk.from),
          through: toLong(p.chunk.through),
          checksum: p.chunk.checksum,
        },
      }),
      series: p.series.map((s) => ({ ...s, labels: pairs(s.labels) })),
    })),
  }).finish();
}

/** Decodes a SampleResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeSampleResponse(bytes: Uint8Array): IngesterSamplePart[] {
  const w = decodeWith(SampleResponseType, bytes) as { parts: WireSamplePart[] };
  return w.parts.map((p, i): IngesterSamplePart => {
    const series = p.series.map((s): SeriesPartial => ({
      agg: s.agg,
      labels: record(s.labels, `part ${i}`),
      lo: s.lo,
      n: s.n,
      a: s.a,
      b: s.b,
      ts: s.ts,
      v: s.v,
    }));
    if (p.chunk == null) return { series };
    return {
      chunk: {
        fingerprint: toBigInt(p.chunk.fingerprint, false),
        from: toBigInt(p.chunk.from, true),
        through: toBigInt(p.chunk.through, true),
        checksum: p.chunk.checksum >>> 0,
      },
      series,
    };
  });
}
