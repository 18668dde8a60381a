/*
 * The bloom gateway's API (gateway.proto, package sieve.gateway.v1): the one definition of
 * the contract between queriers and gateways ({@link ChunkFilter} and its request and
 * response), used in process (`BloomGateway`), over a MessagePort and over HTTP (these
 * codecs), with bigints for 64-bit integers, the BloomTest tree of @sieve/logql and the
 * BloomLocation and SegmentChunk of @sieve/index (types only: no runtime dependency).
 * Decoding checks the structure the wire grammar cannot express (a test node's kind and its
 * fields, the tree's depth and size, offsets that fit a JavaScript number) and throws a
 * ProtoError `malformed_protobuf` naming the field; what the values mean (a known missing
 * reason, a tenant) is the gateway's to judge.
 */
import type { BloomLocation, SegmentChunk } from "@sieve/index";
import type { BloomTest } from "@sieve/logql";
import protobuf from "protobufjs";
import type { LongBits } from "./codec.js";
import { gatewayDescriptor } from "./generated/gateway-descriptor.js";
import { decodeWith, malformed, toBigInt, toLong } from "./long.js";

// Reflection, as codec.ts explains for the push messages; a root of its own so the push
// path's descriptor does not change with the gateway's.
// The `as const` literal is too precise for protobufjs' INamespace union; its shape is pbjs'.
const root = protobuf.Root.fromJSON(gatewayDescriptor as unknown as protobuf.INamespace);
const FilterRequestType = root.lookupType("sieve.gateway.v1.FilterRequest");
const FilterResponseType = root.lookupType("sieve.gateway.v1.FilterResponse");

/** Deepest bloom test tree a request may carry (LogQL's extraction yields depth ≤ 3). */
export const MAX_TEST_DEPTH = 32;
/** Most nodes a bloom test tree may have (a 200-literal regex is 201 nodes). */
export const MAX_TEST_NODES = 10_000;

/**
 * One series' chunk refs and the bloom that covers them. The chunks must be ones that bloom
 * covers (an index segment's series entry): a chunk marked `prefixed` is tested with its
 * prefixed tokens in this bloom.
 */
export interface FilterSeries {
  readonly fingerprint: bigint;
  /** Canonical stream labels: a test leaf on a stream label holds without the bloom. */
  readonly labels: string;
  readonly bloom: BloomLocation;
  readonly chunks: readonly SegmentChunk[];
}

/** What a querier asks: a tenant's chunk refs by series and the query's bloom test. */
export interface FilterRequest {
  readonly tenant: string;
  /** Query range, Unix ns; informational (the gateway does not prune by time). */
  readonly from: bigint;
  readonly through: bigint;
  readonly test: BloomTest;
  readonly series: readonly FilterSeries[];
  /** Whether the answer's `verdicts` explain every chunk pruned (a query's `explain=true`). */
  readonly explain?: boolean;
}

/** What filtering did. `blocksRead + cacheHits` + series failed open before a read = series tested. */
export interface FilterStats {
  series: number;
  /** Series whose unprefixed test failed: all their chunks pruned. */
  seriesSkipped: number;
  chunks: number;
  /** Chunks pruned, by their series' test or their own. */
  chunksPruned: number;
  /** Of `chunksPruned`, those the structured-metadata tests alone would have kept. */
  chunksPrunedByLine: number;
  /**
   * Bloom block objects read whole from the object store (one for every series of the
   * block), plus series records read one by one for blocks past `maxBlockBytes`.
   */
  blocksRead: number;
  /** Series whose bloom came from memory or from another request's read. */
  cacheHits: number;
  /** Fail-open reason → chunks kept untested because of it. */
  failedOpen: Record<string, number>;
}

/**
 * Why one chunk of a request was not simply kept by a passing test: pruned by its series'
 * unprefixed tokens (`series`) or by its own prefixed tokens (`chunk`), or kept untested
 * (`failed_open`).
 */
export interface ChunkVerdict {
  readonly fingerprint: bigint;
  readonly from: bigint;
  readonly through: bigint;
  readonly checksum: number;
  readonly outcome: "series" | "chunk" | "failed_open";
  /**
   * For a pruned chunk: the LogQL text of the first failing leaf in query order
   * (`trace_id="abc"`, `user=~".+"`, `|= "needle"`); see gateway.proto.
   */
  readonly test?: string;
  /** For `failed_open`: the fail-open reason (a key of `FilterStats.failedOpen`). */
  readonly reason?: string;
}

/** The refs that may match (series with no kept chunk left out), in request order. */
export interface FilterResponse {
  series: { fingerprint: bigint; chunks: SegmentChunk[] }[];
  stats: FilterStats;
  /**
   * The chunks not kept by a passing test (absent when none): with `explain`, every one
   * pruned or kept untested; without, those kept untested because their bloom could not be
   * read or tested (not `missing_bloom`, which the request says already).
   */
  verdicts?: ChunkVerdict[];
}

/** Anything that prunes chunk refs: the in-process gateway or the client of remote ones. */
export interface ChunkFilter {
  filterChunkRefs(req: FilterRequest): Promise<FilterResponse>;
  /**
   * True when an answer's chunks are the very records of its request (a gateway in the
   * caller's thread), so the caller may tell them by identity; a client's are copies.
   */
  readonly answersWithSentRecords?: boolean;
  /**
   * Reads the bloom blocks at `keys` into memory ahead of queries, in order, until they
   * hold `maxBytes`; answers how many of them it holds (a gateway in the caller's thread has it).
   */
  loadBlocks?(keys: readonly string[], maxBytes: number): Promise<number>;
}

/**
 * A FilterRequest as the wire carries it: a missing bloom's reason is any string until the
 * gateway checks it against the reasons it knows (`parseFilterRequest`).
 */
export type DecodedFilterRequest = Omit<FilterRequest, "series"> & {
  readonly series: readonly (Omit<FilterSeries, "bloom"> & {
    readonly bloom:
      | Extract<BloomLocation, { kind: "block" }>
      | { readonly kind: "missing"; readonly reason: string };
  })[];
};

// --- wire shapes, as protobufjs decodes them (absent fields read as their defaults) -----

interface WireChunk {
  from: LongBits | number;
  through: LongBits | number;
  checksum: number;
  bytes: number;
  entries: number;
  prefixed: boolean;
}
interface WireTest {
  kind: number;
  name: string;
  value: string;
  children: WireTest[];
}
interface WireSeries {
  fingerprint: LongBits | number;
  labels: string;
  bloom: {
    block?: { key: string; offset: LongBits | number; length: number } | null;
    missingReason?: string;
  } | null;
  chunks: WireChunk[];
}
interface WireRequest {
  tenant: string;
  from: LongBits | number;
  through: LongBits | number;
  test: WireTest | null;
  series: WireSeries[];
  explain: boolean;
}
interface WireVerdict {
  fingerprint: LongBits | number;
  from: LongBits | number;
  through: LongBits | number;
  checksum: number;
  outcome: number;
  test: string;
  reason: string;
}
interface WireResponse {
  series: { fingerprint: LongBits | number; chunks: WireChunk[] }[];
  stats: FilterStats | null;
  verdicts: WireVerdict[];
}

const KINDS = ["all", "key", "kv", "and", "or", "line"] as const;
/** ChunkVerdict.Outcome by number (0, unspecified, is refused). */
const OUTCOMES = [undefined, "series", "chunk", "failed_open"] as const;

function decodeTest(t: WireTest | null, depth: number, count: { nodes: number }): BloomTest {
  if (t === null) return { kind: "all" };
  if (++count.nodes > MAX_TEST_NODES)
    throw malformed(`bloom test has over ${MAX_TEST_NODES} nodes`);
  if (depth > MAX_TEST_DEPTH) throw malformed(`bloom test deeper than ${MAX_TEST_DEPTH}`);
  const kind = KINDS[t.kind];
  switch (kind) {
    case "all":
      return { kind };
    case "key":
    case "kv":
      if (t.name === "") throw malformed(`bloom test ${kind} without a name`);
      return kind === "key" ? { kind, name: t.name } : { kind, name: t.name, value: t.value };
    case "and":
    case "or":
      if (t.children.length === 0) throw malformed(`bloom test ${kind} without children`);
      return { kind, children: t.children.map((c) => decodeTest(c, depth + 1, count)) };
    case "line":
      if (t.value === "") throw malformed("bloom test line without a literal");
      return { kind, literal: t.value };
    case undefined:
      break;
  }
  throw malformed(`bloom test kind ${t.kind}`);
}

function encodeTest(t: BloomTest): Partial<WireTest> {
  switch (t.kind) {
    case "all":
      return { kind: 0 };
    case "key":
      return { kind: 1, name: t.name };
    case "kv":
      return { kind: 2, name: t.name, value: t.value };
    case "and":
    case "or":
      return { kind: t.kind === "and" ? 3 : 4, children: t.children.map(encodeTest) as WireTest[] };
    case "line":
      return { kind: 5, value: t.literal };
  }
}

function decodeChunk(c: WireChunk): SegmentChunk {
  const from = toBigInt(c.from, true);
  const through = toBigInt(c.through, true);
  return {
    from,
    through,
    checksum: c.checksum >>> 0,
    bytes: c.bytes >>> 0,
    entries: c.entries >>> 0,
    prefixed: c.prefixed,
  };
}

function encodeChunk(c: SegmentChunk): WireChunk {
  return {
    from: toLong(c.from),
    through: toLong(c.through),
    checksum: c.checksum >>> 0,
    bytes: c.bytes,
    entries: c.entries,
    prefixed: c.prefixed,
  };
}

/** The decoded location of series `i`; a missing bloom's reason is left for the gateway to check. */
type DecodedLocation = DecodedFilterRequest["series"][number]["bloom"];

function decodeLocation(b: WireSeries["bloom"], i: number): DecodedLocation {
  if (b?.block != null) {
    const offset = toBigInt(b.block.offset, false);
    if (offset > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw malformed(`series ${i}: bloom offset ${offset} is too large`);
    }
    if (b.block.key === "") throw malformed(`series ${i}: bloom block without a key`);
    return { kind: "block", key: b.block.key, offset: Number(offset), length: b.block.length };
  }
  if (b?.missingReason == null || b.missingReason === "") {
    throw malformed(`series ${i}: no bloom location`);
  }
  return { kind: "missing", reason: b.missingReason };
}

/** Decodes and checks a FilterRequest; throws a ProtoError `malformed_protobuf`. */
export function decodeFilterRequest(bytes: Uint8Array): DecodedFilterRequest {
  const w = decodeWith(FilterRequestType, bytes) as WireRequest;
  const test = decodeTest(w.test, 1, { nodes: 0 });
  const series = w.series.map((s, i) => ({
    fingerprint: toBigInt(s.fingerprint, false),
    labels: s.labels,
    bloom: decodeLocation(s.bloom, i),
    chunks: s.chunks.map(decodeChunk),
  }));
  return {
    tenant: w.tenant,
    from: toBigInt(w.from, true),
    through: toBigInt(w.through, true),
    test,
    series,
    ...(w.explain && { explain: true }),
  };
}

/** Encodes a FilterRequest (or a decoded one, as tests send back): what a querier sends. */
export function encodeFilterRequest(req: DecodedFilterRequest): Uint8Array {
  return FilterRequestType.encode({
    tenant: req.tenant,
    from: toLong(req.from),
    through: toLong(req.through),
    test: encodeTest(req.test),
    series: req.series.map((s) => ({
      fingerprint: toLong(s.fingerprint),
      labels: s.labels,
      bloom:
        s.bloom.kind === "block"
          ? { block: { key: s.bloom.key, offset: s.bloom.offset, length: s.bloom.length } }
          : { missingReason: s.bloom.reason },
      chunks: s.chunks.map(encodeChunk),
    })),
    explain: req.explain === true,
  }).finish();
}

function decodeVerdict(v: WireVerdict, i: number): ChunkVerdict {
  const outcome = OUTCOMES[v.outcome];
  if (outcome === undefined) throw malformed(`verdict ${i}: outcome ${v.outcome}`);
  return {
    fingerprint: toBigInt(v.fingerprint, false),
    from: toBigInt(v.from, true),
    through: toBigInt(v.through, true),
    checksum: v.checksum >>> 0,
    outcome,
    ...(v.test !== "" && { test: v.test }),
    ...(v.reason !== "" && { reason: v.reason }),
  };
}

function encodeVerdict(v: ChunkVerdict): Partial<WireVerdict> {
  return {
    fingerprint: toLong(v.fingerprint),
    from: toLong(v.from),
    through: toLong(v.through),
    checksum: v.checksum >>> 0,
    outcome: OUTCOMES.indexOf(v.outcome),
    ...(v.test !== undefined && { test: v.test }),
    ...(v.reason !== undefined && { reason: v.reason }),
  };
}

/** Decodes a FilterResponse; throws a ProtoError `malformed_protobuf`. */
export function decodeFilterResponse(bytes: Uint8Array): FilterResponse {
  const w = decodeWith(FilterResponseType, bytes) as WireResponse;
  const s = w.stats;
  return {
    series: w.series.map((x) => ({
      fingerprint: toBigInt(x.fingerprint, false),
      chunks: x.chunks.map(decodeChunk),
    })),
    stats: {
      series: s?.series ?? 0,
      seriesSkipped: s?.seriesSkipped ?? 0,
      chunks: s?.chunks ?? 0,
      chunksPruned: s?.chunksPruned ?? 0,
      chunksPrunedByLine: s?.chunksPrunedByLine ?? 0,
      blocksRead: s?.blocksRead ?? 0,
      cacheHits: s?.cacheHits ?? 0,
      failedOpen: { ...(s?.failedOpen ?? {}) },
    },
    ...(w.verdicts.length > 0 && { verdicts: w.verdicts.map(decodeVerdict) }),
  };
}

/** Encodes a FilterResponse: what the gateway answers. */
export function encodeFilterResponse(res: FilterResponse): Uint8Array {
  return FilterResponseType.encode({
    series: res.series.map((x) => ({
      fingerprint: toLong(x.fingerprint),
      chunks: x.chunks.map(encodeChunk),
    })),
    stats: res.stats,
    verdicts: (res.verdicts ?? []).map(encodeVerdict),
  }).finish();
}
