import { decodePushRequest, snappyUncompress, timestampNs } from "@sieve/proto";
import type { LabelPair } from "@sieve/proto";
import { labelsFromObject, labelsString } from "@sieve/labels";
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
export const BYTES_PER_MESSAGE = 16;

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
 * Decodes a protobuf PushRequest compressed with raw snappy (what Loki requires for any
 * content type but JSON). Decompression is refused before allocating when the block declares
 * more than `maxDecompressedBytes`.
 */
export function decodeProtobufPush(
  body: Uint8Array,
  maxDecompressedBytes: number,
): IncomingStream[] {
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
  let request;
  try {
    request = decodePushRequest(raw, Math.floor(maxDecompressedBytes / BYTES_PER_MESSAGE));
  } catch (error) {
    const e = error as Error & { code?: string };
    throw new DecodeError(
      e.code === "too_many_messages" ? "too_many_messages" : "malformed_protobuf",
      e.message,
    );
  }
  const streams: IncomingStream[] = new Array<IncomingStream>(request.streams.length);
  for (let s = 0; s < request.streams.length; s++) {
    const stream = request.streams[s]!;
    const entries = new Array<IncomingEntry>(stream.entries.length);
    for (let i = 0; i < entries.length; i++) {
      const e = stream.entries[i]!;
      entries[i] = {
        timestampNs: timestampNs(e.timestamp),
        line: e.line,
        structuredMetadata: e.structuredMetadata,
      };
    }
    streams[s] = { labelsText: stream.labels, entries };
  }
  return streams;
}

const NS = /^-?\d{1,19}$/;

function fail(path: string, what: string): never {
  throw new DecodeError("malformed_json", `${path}: ${what}`);
}

/**
 * Decodes Loki's JSON push body: `{"streams": [{"stream": {"name": "value"}, "values":
 * [["<unix ns>", "<line>"], ["<unix ns>", "<line>", {"name": "value"}]]}]}`. The third
 * element is structured metadata, and may be `{}`. Shape errors name the JSON path.
 */
export function decodeJsonPush(text: string): IncomingStream[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new DecodeError("malformed_json", (error as Error).message);
  }
  if (!isObject(doc)) fail("$", "expected an object");
  const rawStreams = doc.streams;
  if (rawStreams === undefined || rawStreams === null) return [];
  if (!Array.isArray(rawStreams)) fail("$.streams", "expected an array");
  return rawStreams.map((raw: unknown, s): IncomingStream => {
    const path = `$.streams[${s}]`;
    if (!isObject(raw)) fail(path, "expected an object");
    const stream = raw.stream ?? {};
    if (!isObject(stream)) fail(`${path}.stream`, "expected an object of label names to values");
    for (const [name, value] of Object.entries(stream)) {
      if (typeof value !== "string") fail(`${path}.stream.${name}`, "expected a string");
    }
    const labels = labelsFromObject(stream);
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
          structuredMetadata.push({ name, value });
        }
      }
      const timestamp = BigInt(ts);
      if (timestamp > 0x7fffffffffffffffn || timestamp < -0x8000000000000000n) {
        fail(`${at}[0]`, "timestamp out of the int64 range");
      }
      return { timestampNs: timestamp, line, structuredMetadata };
    });
    return { labelsText: labelsString(labels), labels, entries };
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
