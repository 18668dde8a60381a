/*
 * The bloom gateway's request and response (gateway.proto, package sieve.gateway.v1), in
 * the shapes the gateway and querier use: bigints for 64-bit integers, the BloomTest tree
 * of @sieve/logql, the BloomLocation and SegmentChunk of @sieve/index (structurally: this
 * package depends on neither). Decoding checks the structure the wire grammar cannot
 * express (a test node's kind and its fields, the tree's depth and size, offsets that fit
 * a JavaScript number) and throws a ProtoError `malformed_protobuf` naming the field;
 * what the values mean (a known missing reason, a tenant) is the gateway's to judge.
 */
import protobuf from "protobufjs";
import type { LongBits } from "./codec.js";
import { ProtoError } from "./errors.js";
import { gatewayDescriptor } from "./generated/gateway-descriptor.js";

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

/** A bloom test node, as @sieve/logql's BloomTest. */
export type GatewayBloomTest =
  | { kind: "all" }
  | { kind: "key"; name: string }
  | { kind: "kv"; name: string; value: string }
  | { kind: "and"; children: GatewayBloomTest[] }
  | { kind: "or"; children: GatewayBloomTest[] };

/** Where a series' bloom is, as @sieve/index's BloomLocation (the reason unchecked). */
export type GatewayBloomLocation =
  | {
      readonly kind: "block";
      readonly key: string;
      readonly offset: number;
      readonly length: number;
    }
  | { readonly kind: "missing"; readonly reason: string };

/** A chunk ref, as @sieve/index's SegmentChunk. */
export interface GatewayChunkRef {
  readonly from: bigint;
  readonly through: bigint;
  readonly checksum: number;
  readonly bytes: number;
  readonly entries: number;
  readonly prefixed: boolean;
}

/** One series of a request. */
export interface GatewaySeries {
  readonly fingerprint: bigint;
  readonly labels: string;
  readonly bloom: GatewayBloomLocation;
  readonly chunks: readonly GatewayChunkRef[];
}

/** sieve.gateway.v1.FilterRequest. */
export interface GatewayFilterRequest {
  readonly tenant: string;
  readonly from: bigint;
  readonly through: bigint;
  readonly test: GatewayBloomTest;
  readonly series: readonly GatewaySeries[];
}

/** sieve.gateway.v1.FilterStats. */
export interface GatewayFilterStats {
  series: number;
  seriesSkipped: number;
  chunks: number;
  chunksPruned: number;
  blocksRead: number;
  cacheHits: number;
  failedOpen: Record<string, number>;
}

/** sieve.gateway.v1.FilterResponse. */
export interface GatewayFilterResponse {
  readonly series: readonly {
    readonly fingerprint: bigint;
    readonly chunks: readonly GatewayChunkRef[];
  }[];
  readonly stats: GatewayFilterStats;
}

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
}
interface WireStats {
  series: number;
  seriesSkipped: number;
  chunks: number;
  chunksPruned: number;
  blocksRead: number;
  cacheHits: number;
  failedOpen: Record<string, number>;
}
interface WireResponse {
  series: { fingerprint: LongBits | number; chunks: WireChunk[] }[];
  stats: WireStats | null;
}

const KINDS = ["all", "key", "kv", "and", "or"] as const;

function toBigInt(v: LongBits | number, signed: boolean): bigint {
  const bits =
    typeof v === "number" ? BigInt(v) : (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return signed ? BigInt.asIntN(64, bits) : BigInt.asUintN(64, bits);
}

function toLong(v: bigint): LongBits {
  return { low: Number(BigInt.asUintN(32, v)) | 0, high: Number(BigInt.asUintN(32, v >> 32n)) | 0 };
}

function malformed(detail: string): ProtoError {
  return new ProtoError("malformed_protobuf", detail);
}

function decodeTest(t: WireTest | null, depth: number, count: { nodes: number }): GatewayBloomTest {
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
    case undefined:
      break;
  }
  throw malformed(`bloom test kind ${t.kind}`);
}

function encodeTest(t: GatewayBloomTest): Partial<WireTest> {
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
  }
}

function decodeChunk(c: WireChunk): GatewayChunkRef {
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

function encodeChunk(c: GatewayChunkRef): WireChunk {
  return {
    from: toLong(c.from),
    through: toLong(c.through),
    checksum: c.checksum >>> 0,
    bytes: c.bytes,
    entries: c.entries,
    prefixed: c.prefixed,
  };
}

function decodeLocation(b: WireSeries["bloom"], i: number): GatewayBloomLocation {
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

function decodeWith(type: protobuf.Type, bytes: Uint8Array): unknown {
  try {
    // A plain Uint8Array view, never a Buffer: protobufjs' BufferReader clamps a string or
    // bytes field that runs past the end instead of failing, so truncation would pass.
    return type.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (error) {
    // A tree nested past the stack's depth surfaces here as a RangeError: still bad input.
    throw malformed((error as Error).message);
  }
}

/** Decodes and checks a FilterRequest; throws a {@link ProtoError} `malformed_protobuf`. */
export function decodeFilterRequest(bytes: Uint8Array): GatewayFilterRequest {
  const w = decodeWith(FilterRequestType, bytes) as WireRequest;
  const test = decodeTest(w.test, 1, { nodes: 0 });
  const series = w.series.map((s, i): GatewaySeries => ({
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
  };
}

/** Encodes a FilterRequest: what a querier sends. */
export function encodeFilterRequest(req: GatewayFilterRequest): Uint8Array {
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
  }).finish();
}

/** Decodes a FilterResponse; throws a {@link ProtoError} `malformed_protobuf`. */
export function decodeFilterResponse(bytes: Uint8Array): GatewayFilterResponse {
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
      blocksRead: s?.blocksRead ?? 0,
      cacheHits: s?.cacheHits ?? 0,
      failedOpen: { ...(s?.failedOpen ?? {}) },
    },
  };
}

/** Encodes a FilterResponse: what the gateway answers. */
export function encodeFilterResponse(res: GatewayFilterResponse): Uint8Array {
  return FilterResponseType.encode({
    series: res.series.map((x) => ({
      fingerprint: toLong(x.fingerprint),
      chunks: x.chunks.map(encodeChunk),
    })),
    stats: res.stats,
  }).finish();
}
