import {
  OtlpJsonError,
  decodeOtlpLogsJson,
  decodeOtlpLogsProtobuf,
  decodePushRaw,
  snappyUncompress,
} from "@sieve/proto";
import type { LabelPair, OtlpLogs, RawPush } from "@sieve/proto";
import { labelsString } from "@sieve/labels";
import type { Label } from "@sieve/labels";

/** One entry of a pushed stream, whatever the wire format. */
export interface IncomingEntry {
  /** Nanoseconds since the Unix epoch. */
  readonly timestampNs: bigint;
  readonly line: string;
  readonly structuredMetadata: readonly LabelPair[];
}

/** One pushed stream: its labels as sent, parsed already when the format gives pairs (JSON). */
export interface IncomingStream {
  /** The label set as text: as sent (protobuf) or printed from the JSON object. */
  readonly labelsText: string;
  /** Sorted labels, when the format carries pairs; undefined means parse `labelsText`. */
  readonly labels?: readonly Label[];
  readonly entries: readonly IncomingEntry[];
}

/** Why a body cannot be decoded: 400 for malformed bodies, 413 for the two size limits. */
export type DecodeErrorCode =
  "malformed_json" | "malformed_protobuf" | "body_too_large" | "too_many_messages";

/**
 * Decompressed bytes allowed per protobuf message (stream, entry, timestamp, label pair): a
 * push may hold at most `maxDecompressedBytes / 16` of them. Decoding costs about 114 bytes
 * of heap per message whatever its size, so this bounds a push's heap at ~7× its byte limit;
 * real entries of 200-byte lines are ~80 bytes per message, far from the bound.
 */
const BYTES_PER_MESSAGE = 16;

/** A body that does not decode. */
export class DecodeError extends Error {
  override readonly name = "DecodeError";

  constructor(
    readonly code: DecodeErrorCode,
    message: string,
    /** For `body_too_large`: the size seen or declared, in bytes. */
    readonly bytes = 0,
  ) {
    super(message);
  }
}

/**
 * Reads a protobuf PushRequest compressed with raw snappy (what Loki requires for any
 * content type but JSON) as byte ranges (`@sieve/proto`'s push-raw.ts: lines and metadata
 * are never decoded here). Decompression is refused before allocating when the block
 * declares more than `maxDecompressedBytes`.
 */
export function decodeProtobufPush(body: Uint8Array, maxDecompressedBytes: number): RawPush {
  let raw: Uint8Array;
  try {
    raw = snappyUncompress(body, maxDecompressedBytes);
  } catch (error) {
    const e = error as Error & { code?: string; declaredBytes?: number };
    if (e.code === "snappy_too_large") {
      throw new DecodeError("body_too_large", e.message, e.declaredBytes ?? 0);
    }
    throw new DecodeError("malformed_protobuf", e.message);
  }
  try {
    return decodePushRaw(raw, Math.floor(maxDecompressedBytes / BYTES_PER_MESSAGE));
  } catch (error) {
    const e = error as Error & { code?: string };
    throw new DecodeError(
      e.code === "too_many_messages" ? "too_many_messages" : "malformed_protobuf",
      e.message,
    );
  }
}

/**
 * Reads an OTLP export request (uncompressed), in its protobuf or its JSON encoding, with
 * the bounds the Loki formats have: at most `maxDecompressedBytes / 16` protobuf messages,
 * JSON no deeper than {@link MAX_JSON_DEPTH}.
 */
export function decodeOtlpPush(
  body: Uint8Array,
  format: "otlp-protobuf" | "otlp-json",
  maxDecompressedBytes: number,
): OtlpLogs {
  if (format === "otlp-protobuf") {
    try {
      return decodeOtlpLogsProtobuf(body, Math.floor(maxDecompressedBytes / BYTES_PER_MESSAGE));
    } catch (error) {
      const e = error as Error & { code?: string };
      throw new DecodeError(
        e.code === "too_many_messages" ? "too_many_messages" : "malformed_protobuf",
        e.message,
      );
    }
  }
  if (jsonDepthExceeds(body)) {
    throw new DecodeError("malformed_json", `nesting deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const text = Buffer.from(body.buffer, body.byteOffset, body.length).toString("utf8");
  try {
    const doc: unknown = JSON.parse(text);
    // Lone surrogates in escapes become U+FFFD, as for Loki's JSON (see below).
    return decodeOtlpLogsJson(SURROGATE_ESCAPE.test(text) ? wellFormedDeep(doc) : doc);
  } catch (error) {
    if (error instanceof OtlpJsonError || error instanceof SyntaxError) {
      throw new DecodeError("malformed_json", error.message);
    }
    throw error;
  }
}

/** A parsed JSON document with every string (keys too) made well-formed. */
function wellFormedDeep(v: unknown): unknown {
  if (typeof v === "string") return toWellFormed(v);
  if (Array.isArray(v)) return v.map(wellFormedDeep);
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const [k, x] of Object.entries(v)) out[toWellFormed(k)] = wellFormedDeep(x);
    return out;
  }
  return v;
}

const NS = /^-?\d{1,19}$/;

function fail(path: string, what: string): never {
  throw new DecodeError("malformed_json", `${path}: ${what}`);
}

/**
 * Deepest nesting of arrays and objects accepted in a JSON body. Loki's shape needs 6
 * (`{streams: [{values: [[ts, line, {metadata}]]}]}`); Go's encoding/json stops at 10,000.
 * JSON.parse of a 1,000,000-deep body took about a second, so depth is checked first.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * The nesting depth of a JSON text, or `MAX_JSON_DEPTH + 1` as soon as it is passed. Skips
 * strings with the native `indexOf`, so it costs a few percent of JSON.parse: most of a
 * push's bytes are inside line strings. Malformed text is left for JSON.parse to report.
 */
function jsonDepthExceeds(bytes: Uint8Array): boolean {
  const buf = Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  let depth = 0;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]!;
    if (c === 0x22) {
      // Find the closing quote: one preceded by an even run of backslashes.
      let end = buf.indexOf(0x22, i + 1);
      while (end > 0) {
        let slashes = 0;
        while (buf[end - 1 - slashes] === 0x5c) slashes++;
        if (slashes % 2 === 0) break;
        end = buf.indexOf(0x22, end + 1);
      }
      if (end < 0) return false;
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

// JSON.parse turns an escaped lone surrogate (`"\ud800"`) into a lone UTF-16 surrogate,
// which no UTF-8 encoder can write and Go's quoting prints as an escape its own parser
// refuses: a label value holding one made every read of the tenant fail. Go's
// encoding/json, which Loki uses, decodes it as U+FFFD; so does `toWellFormed`. Raw bytes
// cannot hold one (Buffer's UTF-8 decoder already replaces invalid sequences), so only
// bodies with a surrogate escape pay for the fix.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
type WellFormed = (s: string) => string;
const asIs: WellFormed = (s) => s;
const toWellFormed: WellFormed = (s) => (s as string & { toWellFormed(): string }).toWellFormed();

/**
 * Decodes Loki's JSON push body: `{"streams": [{"stream": {"name": "value"}, "values":
 * [["<unix ns>", "<line>"], ["<unix ns>", "<line>", {"name": "value"}]]}]}`. The third
 * element is structured metadata, and may be `{}`. Shape errors name the JSON path. Every
 * string comes out well-formed (invalid UTF-8 and lone surrogates become U+FFFD, as Go
 * decodes them).
 */
export function decodeJsonPush(body: string | Uint8Array): IncomingStream[] {
  if (typeof body !== "string" && jsonDepthExceeds(body)) {
    throw new DecodeError("malformed_json", `nesting deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const text =
    typeof body === "string"
      ? body
      : Buffer.from(body.buffer, body.byteOffset, body.length).toString("utf8");
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new DecodeError("malformed_json", (error as Error).message);
  }
  const fix = SURROGATE_ESCAPE.test(text) ? toWellFormed : asIs;
  if (!isObject(doc)) fail("$", "expected an object");
  const rawStreams = doc.streams;
  if (rawStreams === undefined || rawStreams === null) return [];
  if (!Array.isArray(rawStreams)) fail("$.streams", "expected an array");
  return rawStreams.map((raw: unknown, s): IncomingStream => {
    const path = `$.streams[${s}]`;
    if (!isObject(raw)) fail(path, "expected an object");
    const stream = raw.stream ?? {};
    if (!isObject(stream)) fail(`${path}.stream`, "expected an object of label names to values");
    const labels = jsonLabels(stream, path, fix);
    const values = raw.values ?? [];
    if (!Array.isArray(values)) fail(`${path}.values`, "expected an array");
    const entries = values.map((v: unknown, i): IncomingEntry => {
      const at = `${path}.values[${i}]`;
      if (!Array.isArray(v) || v.length < 2 || v.length > 3) {
        fail(at, "expected [timestamp, line] or [timestamp, line, structured metadata]");
      }
      const [ts, line, metadata] = v as unknown[];
      if (typeof ts !== "string" || !NS.test(ts)) {
        fail(`${at}[0]`, "expected a string of Unix nanoseconds");
      }
      if (typeof line !== "string") fail(`${at}[1]`, "expected a string");
      const structuredMetadata: LabelPair[] = [];
      if (metadata !== undefined && metadata !== null) {
        if (!isObject(metadata)) fail(`${at}[2]`, "expected an object of names to values");
        for (const [name, value] of Object.entries(metadata)) {
          if (typeof value !== "string") fail(`${at}[2].${name}`, "expected a string");
          structuredMetadata.push({ name: fix(name), value: fix(value) });
        }
      }
      const timestamp = BigInt(ts);
      if (timestamp > 0x7fffffffffffffffn || timestamp < -0x8000000000000000n) {
        fail(`${at}[0]`, "timestamp out of the int64 range");
      }
      return { timestampNs: timestamp, line: fix(line), structuredMetadata };
    });
    return { labelsText: labelsString(labels), labels, entries };
  });
}

/** A copy with well-formed names and values; no prototype, so `__proto__` stays a name. */
/**
 * A JSON stream object's labels, normalised as `parseLabels` does (empty values dropped,
 * sorted by name), in one walk over its keys: a body of 200,000 labels cost three walks
 * and ~0.7 s a stream with `Object.entries` then `labelsFromObject`; one `for...in` walk
 * halves that (measured on this machine; `JSON.parse` objects have no inherited keys).
 * Names that become equal once well-formed are left for validation to refuse as duplicates.
 */
function jsonLabels(stream: Record<string, unknown>, path: string, fix: WellFormed): Label[] {
  const out: Label[] = [];
  for (const name in stream) {
    const value = stream[name];
    if (typeof value !== "string") fail(`${path}.stream.${name}`, "expected a string");
    if (value !== "") out.push({ name: fix(name), value: fix(value) });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** HTTP's separators (RFC 2045 tspecials): not allowed in a token. */
const TSPECIALS = new Set('()<>@,;:\\"/[]?=');

function isTokenChar(c: string): boolean {
  const code = c.charCodeAt(0);
  return code > 0x20 && code < 0x7f && !TSPECIALS.has(c);
}

/** The longest token at the start of `s`, and what follows it. */
function consumeToken(s: string): [token: string, rest: string] {
  let i = 0;
  while (i < s.length && isTokenChar(s[i]!)) i++;
  return [s.slice(0, i), s.slice(i)];
}

/**
 * What follows a parameter value (token or quoted string) at the start of `s`; undefined
 * when there is none. The value itself is skipped: the push route reads no parameter.
 */
function skipValue(s: string): string | undefined {
  if (!s.startsWith('"')) {
    const [token, rest] = consumeToken(s);
    return token === "" ? undefined : rest;
  }
  for (let i = 1; i < s.length; i++) {
    const c = s[i];
    if (c === '"') return s.slice(i + 1);
    // Go unescapes only a backslash before a separator; either way the next char is text.
    if (c === "\\" && i + 1 < s.length && TSPECIALS.has(s[i + 1]!)) i++;
    else if (c === "\r" || c === "\n") return undefined;
  }
  return undefined;
}

/**
 * The media type of a Content-Type header, lower-cased, or Go's error text when the header
 * is malformed. Loki refuses a push whose Content-Type `mime.ParseMediaType` refuses and
 * answers that error's text; this follows Go's grammar by hand (libraries such as
 * `content-type` accept and refuse other headers than Go does, e.g. a type without a slash).
 * Parameter values are checked, not returned: the push route reads none.
 */
export function parseMediaType(header: string): { type: string } | { error: string } {
  const semi = header.indexOf(";");
  const base = semi < 0 ? header : header.slice(0, semi);
  const type = base.trim().toLowerCase();
  const [main, afterMain] = consumeToken(type);
  if (main === "") return { error: "mime: no media type" };
  if (afterMain !== "") {
    if (!afterMain.startsWith("/")) return { error: "mime: expected slash after first token" };
    const [sub, afterSub] = consumeToken(afterMain.slice(1));
    if (sub === "") return { error: "mime: expected token after slash" };
    if (afterSub !== "") return { error: "mime: unexpected content after media subtype" };
  }
  const seen = new Set<string>();
  let rest = header.slice(base.length);
  for (;;) {
    rest = rest.trimStart();
    if (rest === "") return { type };
    const param = consumeParam(rest);
    if (param === undefined) {
      // Go ignores trailing semicolons; anything else is a bad parameter.
      if (rest.trim() === ";") return { type };
      return { error: "mime: invalid media parameter" };
    }
    if (seen.has(param.key)) return { error: "mime: duplicate parameter name" };
    seen.add(param.key);
    rest = param.rest;
  }
}

/** `; key=value` at the start of `s`, as Go's consumeMediaParam reads it. */
function consumeParam(s: string): { key: string; rest: string } | undefined {
  if (!s.startsWith(";")) return undefined;
  const [token, afterKey] = consumeToken(s.slice(1).trimStart());
  if (token === "") return undefined;
  const eq = afterKey.trimStart();
  if (!eq.startsWith("=")) return undefined;
  const rest = skipValue(eq.slice(1).trimStart());
  return rest === undefined ? undefined : { key: token.toLowerCase(), rest };
}
