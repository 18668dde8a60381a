/*
 * OTLP/HTTP logs (otlp.proto, the specification's ExportLogsServiceRequest and response):
 * both encodings the specification defines, protobuf and JSON, decoded into one model the
 * distributor maps to Loki streams. Decoding refuses with a ProtoError `malformed_protobuf`
 * (JSON: `malformed_json`) naming the field; it never allocates past what the caller
 * allows: a protobuf body is walked once without allocating to count its messages and
 * check their nesting before protobufjs decodes it.
 */
import protobuf from "protobufjs";
import type { LongBits } from "./codec.js";
import { ProtoError } from "./errors.js";
import { otlpDescriptor } from "./generated/otlp-descriptor.js";
import { decodeWith, malformed, toBigInt, toLong } from "./long.js";

const root = protobuf.Root.fromJSON(otlpDescriptor as unknown as protobuf.INamespace);
const RequestType = root.lookupType("sieve.otlp.v1.ExportLogsServiceRequest");
const ResponseType = root.lookupType("sieve.otlp.v1.ExportLogsServiceResponse");
const StatusType = root.lookupType("sieve.otlp.v1.Status");

/** Deepest nesting of AnyValue arrays and maps accepted (the specification sets none). */
export const MAX_OTLP_VALUE_DEPTH = 32;

/** An attribute's or a body's value (`AnyValue`); `empty` when no field is set. */
export type OtlpValue =
  | { readonly kind: "string"; readonly value: string }
  | { readonly kind: "bool"; readonly value: boolean }
  | { readonly kind: "int"; readonly value: bigint }
  | { readonly kind: "double"; readonly value: number }
  | { readonly kind: "bytes"; readonly value: Uint8Array }
  | { readonly kind: "array"; readonly values: readonly OtlpValue[] }
  | { readonly kind: "kvlist"; readonly values: readonly OtlpAttribute[] }
  | { readonly kind: "empty" };

/** A key and its value (`KeyValue`). */
export interface OtlpAttribute {
  readonly key: string;
  readonly value: OtlpValue;
}

/** One log record, every field at its default when absent. */
export interface OtlpLogRecord {
  /** Unix ns; 0 when unknown. */
  readonly timeUnixNano: bigint;
  readonly observedTimeUnixNano: bigint;
  readonly severityNumber: number;
  readonly severityText: string;
  readonly body: OtlpValue;
  readonly attributes: readonly OtlpAttribute[];
  readonly droppedAttributesCount: number;
  readonly flags: number;
  /** 16 bytes, or empty. */
  readonly traceId: Uint8Array;
  /** 8 bytes, or empty. */
  readonly spanId: Uint8Array;
  readonly eventName: string;
}

/** The records of one instrumentation scope. */
export interface OtlpScopeLogs {
  readonly scope: {
    readonly name: string;
    readonly version: string;
    readonly attributes: readonly OtlpAttribute[];
    readonly droppedAttributesCount: number;
  };
  readonly logRecords: readonly OtlpLogRecord[];
}

/** The records of one resource. */
export interface OtlpResourceLogs {
  readonly resource: {
    readonly attributes: readonly OtlpAttribute[];
    readonly droppedAttributesCount: number;
  };
  readonly scopeLogs: readonly OtlpScopeLogs[];
}

/** An export request. */
export interface OtlpLogs {
  readonly resourceLogs: readonly OtlpResourceLogs[];
}

// --- protobuf ---------------------------------------------------------------------------

/**
 * Which fields of each message are messages themselves (field number → message), for the
 * counting walk. Every other field is a scalar, a string or bytes.
 */
type Walked = "request" | "resourceLogs" | "resource" | "scopeLogs" | "scope" | "record";
type WalkedValue = "any" | "array" | "kvlist" | "kv";
const CHILDREN: Record<Walked | WalkedValue, Record<number, Walked | WalkedValue>> = {
  request: { 1: "resourceLogs" },
  resourceLogs: { 1: "resource", 2: "scopeLogs" },
  resource: { 1: "kv" },
  scopeLogs: { 1: "scope", 2: "record" },
  scope: { 3: "kv" },
  record: { 5: "any", 6: "kv" },
  any: { 5: "array", 6: "kvlist" },
  array: { 1: "any" },
  kvlist: { 1: "kv" },
  kv: { 2: "any" },
};

/**
 * Counts the messages of an encoded request, refusing past `maxMessages` or past
 * {@link MAX_OTLP_VALUE_DEPTH} nested values, without allocating: protobufjs would
 * allocate every message of a hostile body before anyone could count them.
 */
function walk(bytes: Uint8Array, maxMessages: number): void {
  let messages = 0;
  const visit = (start: number, end: number, type: Walked | WalkedValue, depth: number) => {
    if (++messages > maxMessages) {
      throw new ProtoError("too_many_messages", `more than ${maxMessages}`);
    }
    if (depth > MAX_OTLP_VALUE_DEPTH * 2 + 8) {
      throw malformed(`values nested deeper than ${MAX_OTLP_VALUE_DEPTH} levels`);
    }
    let at = start;
    const varint = (): number => {
      let shift = 0;
      let value = 0;
      for (;;) {
        if (at >= end) throw malformed("a varint runs past its message");
        const b = bytes[at++]!;
        if (shift < 28) value |= (b & 0x7f) << shift;
        else if (shift < 53) value += (b & 0x7f) * 2 ** shift;
        if ((b & 0x80) === 0) return value;
        shift += 7;
        if (shift > 63) throw malformed("a varint longer than 10 bytes");
      }
    };
    while (at < end) {
      const tag = varint();
      const field = Math.floor(tag / 8);
      switch (tag & 7) {
        case 0:
          varint();
          break;
        case 1:
          at += 8;
          break;
        case 5:
          at += 4;
          break;
        case 2: {
          const length = varint();
          if (at + length > end) throw malformed(`field ${field} runs past its message`);
          const child = CHILDREN[type][field];
          if (child !== undefined) {
            const deeper = type === "any" || type === "array" || type === "kvlist" || type === "kv";
            visit(at, at + length, child, deeper ? depth + 1 : depth);
          }
          at += length;
          break;
        }
        default:
          throw malformed(`wire type ${tag & 7} of field ${field}`);
      }
      if (at > end) throw malformed(`field ${field} runs past its message`);
    }
  };
  visit(0, bytes.length, "request", 0);
}

interface WireValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: LongBits | number;
  doubleValue?: number;
  arrayValue?: { values: WireValue[] };
  kvlistValue?: { values: WireKv[] };
  bytesValue?: Uint8Array;
  /** protobufjs' oneof getter: which field is set. */
  value?:
    | "stringValue"
    | "boolValue"
    | "intValue"
    | "doubleValue"
    | "arrayValue"
    | "kvlistValue"
    | "bytesValue";
}
interface WireKv {
  key: string;
  value?: WireValue | null;
}
interface WireRecord {
  timeUnixNano: LongBits | number;
  observedTimeUnixNano: LongBits | number;
  severityNumber: number;
  severityText: string;
  body?: WireValue | null;
  attributes: WireKv[];
  droppedAttributesCount: number;
  flags: number;
  traceId: Uint8Array;
  spanId: Uint8Array;
  eventName: string;
}
interface WireRequest {
  resourceLogs: {
    resource?: { attributes: WireKv[]; droppedAttributesCount: number } | null;
    scopeLogs: {
      scope?: {
        name: string;
        version: string;
        attributes: WireKv[];
        droppedAttributesCount: number;
      } | null;
      logRecords: WireRecord[];
    }[];
  }[];
}

const EMPTY: OtlpValue = { kind: "empty" };

function fromWireValue(v: WireValue | null | undefined): OtlpValue {
  switch (v?.value) {
    case "stringValue":
      return { kind: "string", value: v.stringValue! };
    case "boolValue":
      return { kind: "bool", value: v.boolValue! };
    case "intValue":
      return { kind: "int", value: toBigInt(v.intValue!, true) };
    case "doubleValue":
      return { kind: "double", value: v.doubleValue! };
    case "bytesValue":
      return { kind: "bytes", value: view(v.bytesValue!) };
    case "arrayValue":
      return { kind: "array", values: (v.arrayValue?.values ?? []).map(fromWireValue) };
    case "kvlistValue":
      return { kind: "kvlist", values: (v.kvlistValue?.values ?? []).map(fromWireKv) };
    case undefined:
      return EMPTY;
  }
}

function fromWireKv(kv: WireKv): OtlpAttribute {
  return { key: kv.key, value: fromWireValue(kv.value) };
}

/** protobufjs' Buffer as a plain Uint8Array over the same bytes. */
function view(b: Uint8Array): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.length);
}

function checkId(bytes: Uint8Array, length: number, what: string): Uint8Array {
  if (bytes.length !== 0 && bytes.length !== length) {
    throw malformed(`${what} of ${bytes.length} bytes (${length} or none)`);
  }
  return view(bytes);
}

/**
 * Decodes an OTLP protobuf export request. More than `maxMessages` messages is a ProtoError
 * `too_many_messages`; anything malformed (including a trace id that is not 16 bytes or a
 * span id that is not 8) a ProtoError `malformed_protobuf`.
 */
export function decodeOtlpLogsProtobuf(bytes: Uint8Array, maxMessages: number): OtlpLogs {
  walk(bytes, maxMessages);
  const w = decodeWith(RequestType, bytes) as WireRequest;
  return {
    resourceLogs: w.resourceLogs.map((rl) => ({
      resource: {
        attributes: (rl.resource?.attributes ?? []).map(fromWireKv),
        droppedAttributesCount: rl.resource?.droppedAttributesCount ?? 0,
      },
      scopeLogs: rl.scopeLogs.map((sl) => ({
        scope: {
          name: sl.scope?.name ?? "",
          version: sl.scope?.version ?? "",
          attributes: (sl.scope?.attributes ?? []).map(fromWireKv),
          droppedAttributesCount: sl.scope?.droppedAttributesCount ?? 0,
        },
        logRecords: sl.logRecords.map((r) => ({
          timeUnixNano: toBigInt(r.timeUnixNano, false),
          observedTimeUnixNano: toBigInt(r.observedTimeUnixNano, false),
          severityNumber: r.severityNumber,
          severityText: r.severityText,
          body: fromWireValue(r.body),
          attributes: r.attributes.map(fromWireKv),
          droppedAttributesCount: r.droppedAttributesCount,
          flags: r.flags >>> 0,
          traceId: checkId(r.traceId, 16, "trace_id"),
          spanId: checkId(r.spanId, 8, "span_id"),
          eventName: r.eventName,
        })),
      })),
    })),
  };
}

/** How an encoding writes the leaves the two encodings disagree on. */
interface Leaves {
  int64(n: bigint): unknown;
  bytes(b: Uint8Array): unknown;
  id(b: Uint8Array): unknown;
  double(d: number): unknown;
}

/** protobufjs' forms: Longs and raw bytes. */
const WIRE: Leaves = { int64: toLong, bytes: (b) => b, id: (b) => b, double: (d) => d };

/** OTLP/JSON's: int64 as strings, base64 bytes, hex ids, NaN and infinities as strings. */
const JSON_LEAVES: Leaves = {
  int64: (n) => n.toString(),
  bytes: (b) => Buffer.from(b).toString("base64"),
  id: (b) => Buffer.from(b).toString("hex"),
  double: (d) => (Number.isFinite(d) ? d : String(d)),
};

/** A request as the object tree both encoders write, leaves as `leaves` says. */
function requestTree(logs: OtlpLogs, leaves: Leaves): object {
  const value = (v: OtlpValue): object => {
    switch (v.kind) {
      case "string":
        return { stringValue: v.value };
      case "bool":
        return { boolValue: v.value };
      case "int":
        return { intValue: leaves.int64(v.value) };
      case "double":
        return { doubleValue: leaves.double(v.value) };
      case "bytes":
        return { bytesValue: leaves.bytes(v.value) };
      case "array":
        return { arrayValue: { values: v.values.map(value) } };
      case "kvlist":
        return { kvlistValue: { values: v.values.map(kv) } };
      case "empty":
        return {};
    }
  };
  const kv = (a: OtlpAttribute) => ({ key: a.key, value: value(a.value) });
  return {
    resourceLogs: logs.resourceLogs.map((rl) => ({
      resource: {
        attributes: rl.resource.attributes.map(kv),
        droppedAttributesCount: rl.resource.droppedAttributesCount,
      },
      scopeLogs: rl.scopeLogs.map((sl) => ({
        scope: { ...sl.scope, attributes: sl.scope.attributes.map(kv) },
        logRecords: sl.logRecords.map((r) => ({
          ...r,
          timeUnixNano: leaves.int64(r.timeUnixNano),
          observedTimeUnixNano: leaves.int64(r.observedTimeUnixNano),
          body: value(r.body),
          attributes: r.attributes.map(kv),
          traceId: leaves.id(r.traceId),
          spanId: leaves.id(r.spanId),
        })),
      })),
    })),
  };
}

/**
 * Encodes a request as protobuf: what tests and benchmarks send, nested as deep as asked.
 * protobufjs refuses to encode past `util.recursionLimit` (100) nested messages, and a
 * value nested in maps takes three a level: the fuzzers' values nested past
 * {@link MAX_OTLP_VALUE_DEPTH} on purpose went past it. Its decoder keeps its own limit.
 */
export function encodeOtlpLogsProtobuf(logs: OtlpLogs): Uint8Array {
  const { util } = protobuf;
  const limit = util.recursionLimit;
  util.recursionLimit = Number.POSITIVE_INFINITY;
  try {
    return RequestType.encode(requestTree(logs, WIRE)).finish();
  } finally {
    util.recursionLimit = limit;
  }
}

/** Encodes a request as OTLP/JSON (hex ids, lowerCamelCase): what tests and fuzzers send. */
export function encodeOtlpLogsJson(logs: OtlpLogs): string {
  return JSON.stringify(requestTree(logs, JSON_LEAVES));
}

/** What a partial success reports: records refused and why (none: a full success). */
export interface OtlpPartialSuccess {
  readonly rejectedLogRecords: number;
  readonly errorMessage: string;
}

/** An `ExportLogsServiceResponse` as protobuf; `partial_success` only when something was refused. */
export function encodeOtlpLogsResponse(partial?: OtlpPartialSuccess): Uint8Array {
  if (partial === undefined || (partial.rejectedLogRecords === 0 && partial.errorMessage === ""))
    return new Uint8Array(0);
  return ResponseType.encode({
    partialSuccess: {
      rejectedLogRecords: toLong(BigInt(partial.rejectedLogRecords)),
      errorMessage: partial.errorMessage,
    },
  }).finish();
}

/** The same response as OTLP/JSON (int64 as a string, lowerCamelCase names). */
export function otlpLogsResponseJson(partial?: OtlpPartialSuccess): string {
  if (partial === undefined || (partial.rejectedLogRecords === 0 && partial.errorMessage === ""))
    return "{}";
  return JSON.stringify({
    partialSuccess: {
      rejectedLogRecords: String(partial.rejectedLogRecords),
      errorMessage: partial.errorMessage,
    },
  });
}

/**
 * A refusal's body, `google.rpc.Status` (gRPC code: 3 INVALID_ARGUMENT for a 400, 8
 * RESOURCE_EXHAUSTED for 429 and 413, 14 UNAVAILABLE for 503), as protobuf and as JSON.
 */
export function encodeOtlpStatus(code: number, message: string): Uint8Array {
  return StatusType.encode({ code, message }).finish();
}

/** Decodes a refusal's protobuf body (for tests and clients). */
export function decodeOtlpStatus(bytes: Uint8Array): { code: number; message: string } {
  const w = decodeWith(StatusType, bytes) as { code: number; message: string };
  return { code: w.code, message: w.message };
}

/** Decodes a response (both encodings' readers use it in tests). */
export function decodeOtlpLogsResponse(bytes: Uint8Array): OtlpPartialSuccess | undefined {
  const w = decodeWith(ResponseType, bytes) as {
    partialSuccess?: { rejectedLogRecords: LongBits | number; errorMessage: string } | null;
  };
  if (w.partialSuccess == null) return undefined;
  return {
    rejectedLogRecords: Number(toBigInt(w.partialSuccess.rejectedLogRecords, true)),
    errorMessage: w.partialSuccess.errorMessage,
  };
}

// --- JSON -------------------------------------------------------------------------------

/** A JSON body that does not follow OTLP/JSON, with the path of what is wrong. */
export class OtlpJsonError extends Error {
  override readonly name = "OtlpJsonError";
}

function jsonFail(path: string, what: string): never {
  throw new OtlpJsonError(`${path}: ${what}`);
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** An optional field: absent and null read as the default. */
function field(obj: Json, name: string): unknown {
  const v = obj[name];
  return v === null ? undefined : v;
}

function array(obj: Json, name: string, path: string): unknown[] {
  const v = field(obj, name);
  if (v === undefined) return [];
  if (!Array.isArray(v)) jsonFail(`${path}.${name}`, "expected an array");
  return v;
}

function object(obj: Json, name: string, path: string): Json {
  const v = field(obj, name);
  if (v === undefined) return {};
  if (!isObject(v)) jsonFail(`${path}.${name}`, "expected an object");
  return v;
}

function string(obj: Json, name: string, path: string): string {
  const v = field(obj, name);
  if (v === undefined) return "";
  if (typeof v !== "string") jsonFail(`${path}.${name}`, "expected a string");
  return v;
}

const INTEGER = /^-?\d{1,20}$/;

/** An integer field: a number or a decimal string, as OTLP/JSON writes 64-bit integers. */
function integer(obj: Json, name: string, path: string, min: bigint, max: bigint): bigint {
  const v = field(obj, name);
  if (v === undefined) return 0n;
  let n: bigint;
  if (typeof v === "number" && Number.isInteger(v)) n = BigInt(v);
  else if (typeof v === "string" && INTEGER.test(v)) n = BigInt(v);
  else jsonFail(`${path}.${name}`, "expected an integer (a number or a decimal string)");
  if (n < min || n > max) jsonFail(`${path}.${name}`, `${n} is out of range`);
  return n;
}

const U32 = 0xffffffffn;
const U64 = 0xffffffffffffffffn;
const I64_MIN = -0x8000000000000000n;
const I64_MAX = 0x7fffffffffffffffn;

/** The specification's hex ids (case-insensitive): trace 32 digits, span 16, or none. */
function hexId(obj: Json, name: string, path: string, bytes: number): Uint8Array {
  const v = string(obj, name, path);
  if (v === "") return new Uint8Array(0);
  if (v.length !== bytes * 2 || !/^[0-9a-fA-F]+$/.test(v)) {
    jsonFail(`${path}.${name}`, `expected ${bytes * 2} hex digits`);
  }
  return Uint8Array.from(Buffer.from(v, "hex"));
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

function jsonValue(v: unknown, path: string, depth: number): OtlpValue {
  if (v === undefined || v === null) return EMPTY;
  if (!isObject(v)) jsonFail(path, "expected an AnyValue object");
  if (depth > MAX_OTLP_VALUE_DEPTH) {
    jsonFail(path, `values nested deeper than ${MAX_OTLP_VALUE_DEPTH} levels`);
  }
  const set = Object.keys(v).filter((k) => v[k] !== null && v[k] !== undefined);
  if (set.length > 1) jsonFail(path, `more than one value (${set.join(", ")})`);
  switch (set[0]) {
    case undefined:
      return EMPTY;
    case "stringValue":
      return { kind: "string", value: string(v, "stringValue", path) };
    case "boolValue":
      if (typeof v.boolValue !== "boolean") jsonFail(`${path}.boolValue`, "expected a boolean");
      return { kind: "bool", value: v.boolValue };
    case "intValue":
      return { kind: "int", value: integer(v, "intValue", path, I64_MIN, I64_MAX) };
    case "doubleValue": {
      const d = v.doubleValue;
      // Proto3 JSON writes NaN and the infinities as strings.
      if (typeof d === "number") return { kind: "double", value: d };
      if (d === "NaN" || d === "Infinity" || d === "-Infinity")
        return { kind: "double", value: Number(d) };
      if (typeof d === "string" && d.trim() !== "" && Number.isFinite(Number(d)))
        return { kind: "double", value: Number(d) };
      return jsonFail(`${path}.doubleValue`, "expected a number");
    }
    case "bytesValue": {
      const b = string(v, "bytesValue", path);
      if (!BASE64.test(b)) jsonFail(`${path}.bytesValue`, "expected base64");
      return { kind: "bytes", value: Uint8Array.from(Buffer.from(b, "base64")) };
    }
    case "arrayValue": {
      const values = array(object(v, "arrayValue", path), "values", `${path}.arrayValue`);
      return {
        kind: "array",
        values: values.map((x, i) => jsonValue(x, `${path}.arrayValue.values[${i}]`, depth + 1)),
      };
    }
    case "kvlistValue": {
      const values = array(object(v, "kvlistValue", path), "values", `${path}.kvlistValue`);
      return {
        kind: "kvlist",
        values: values.map((x, i) => jsonKv(x, `${path}.kvlistValue.values[${i}]`, depth + 1)),
      };
    }
    default:
      return jsonFail(path, `unknown value field ${JSON.stringify(set[0])}`);
  }
}

function jsonKv(v: unknown, path: string, depth = 0): OtlpAttribute {
  if (!isObject(v)) jsonFail(path, "expected a KeyValue object");
  return {
    key: string(v, "key", path),
    value: jsonValue(field(v, "value"), `${path}.value`, depth),
  };
}

function jsonAttributes(obj: Json, path: string): OtlpAttribute[] {
  return array(obj, "attributes", path).map((a, i) => jsonKv(a, `${path}.attributes[${i}]`));
}

/**
 * Decodes an OTLP/JSON export request from its parsed document (the caller bounds its
 * size and depth before parsing). Follows the specification's JSON mapping: lowerCamelCase
 * names, 64-bit integers as numbers or decimal strings, trace and span ids as hex, bytes
 * as base64, enums as numbers. Throws an {@link OtlpJsonError} naming the path.
 */
export function decodeOtlpLogsJson(doc: unknown): OtlpLogs {
  if (!isObject(doc)) jsonFail("$", "expected an object");
  return {
    resourceLogs: array(doc, "resourceLogs", "$").map((rlv, i) => {
      const rp = `$.resourceLogs[${i}]`;
      if (!isObject(rlv)) jsonFail(rp, "expected an object");
      const resource = object(rlv, "resource", rp);
      return {
        resource: {
          attributes: jsonAttributes(resource, `${rp}.resource`),
          droppedAttributesCount: Number(
            integer(resource, "droppedAttributesCount", `${rp}.resource`, 0n, U32),
          ),
        },
        scopeLogs: array(rlv, "scopeLogs", rp).map((slv, j) => {
          const sp = `${rp}.scopeLogs[${j}]`;
          if (!isObject(slv)) jsonFail(sp, "expected an object");
          const scope = object(slv, "scope", sp);
          return {
            scope: {
              name: string(scope, "name", `${sp}.scope`),
              version: string(scope, "version", `${sp}.scope`),
              attributes: jsonAttributes(scope, `${sp}.scope`),
              droppedAttributesCount: Number(
                integer(scope, "droppedAttributesCount", `${sp}.scope`, 0n, U32),
              ),
            },
            logRecords: array(slv, "logRecords", sp).map((r, k): OtlpLogRecord => {
              const p = `${sp}.logRecords[${k}]`;
              if (!isObject(r)) jsonFail(p, "expected an object");
              return {
                timeUnixNano: integer(r, "timeUnixNano", p, 0n, U64),
                observedTimeUnixNano: integer(r, "observedTimeUnixNano", p, 0n, U64),
                severityNumber: Number(
                  integer(r, "severityNumber", p, -(2n ** 31n), 2n ** 31n - 1n),
                ),
                severityText: string(r, "severityText", p),
                body: jsonValue(field(r, "body"), `${p}.body`, 0),
                attributes: jsonAttributes(r, p),
                droppedAttributesCount: Number(integer(r, "droppedAttributesCount", p, 0n, U32)),
                flags: Number(integer(r, "flags", p, 0n, U32)),
                traceId: hexId(r, "traceId", p, 16),
                spanId: hexId(r, "spanId", p, 8),
                eventName: string(r, "eventName", p),
              };
            }),
          };
        }),
      };
    }),
  };
}
