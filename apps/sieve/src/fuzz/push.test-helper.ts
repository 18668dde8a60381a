/**
 * Push bodies for the fuzzers, in every encoding Sieve accepts (JSON, JSON+gzip,
 * JSON+deflate, protobuf+snappy) and the ways clients and attackers get them wrong: valid,
 * mutated, truncated, decompression bombs, wrong content types and encodings, hostile JSON
 * (lone surrogates, deep nesting, many labels). Every body is a {@link FuzzRequest}.
 */
import { constants, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import {
  MAX_OTLP_VALUE_DEPTH,
  encodeOtlpLogsJson,
  encodeOtlpLogsProtobuf,
  encodePushRequest,
  type OtlpLogs,
  type OtlpValue,
  type PushRequest,
} from "@sieve/proto";
import snappy from "snappyjs";
import { type Rng, mutateBytes, mutateText, nastyString } from "./random.test-helper.js";

/** One HTTP request of a fuzz run. */
export interface FuzzRequest {
  /** What the generator meant to make, e.g. `json-gzip` or `query_range`: for the summary. */
  readonly kind: string;
  readonly method: "GET" | "POST";
  /** Path and query string. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Uint8Array;
}

/** The push endpoint. */
export const PUSH_PATH = "/loki/api/v1/push";

/** The OTLP logs endpoint. */
export const OTLP_PATH = "/otlp/v1/logs";

const MiB = 1 << 20;

/** The label values fuzzed pushes use for `app`, so queries of the canary never see them. */
export const FUZZ_APPS = ["fz", "fz-a", "fz-b"] as const;

/** Label names fuzzed pushes and queries share, so queries find what pushes wrote. */
export const FUZZ_LABELS = ["app", "env", "level", "k", "trace_id"] as const;

const LINE_WORDS = ["GET", "/api", "status=500", "dur=12ms", "ünïcödé", '{"a":1}', "level=warn"];

/**
 * Level words as a client may send them, Object's own property names among them (a
 * `level=constructor` line was a 500 for its whole push once).
 */
const LEVEL_WORDS = ["info", "WARN", "constructor", "__proto__", "toString"];

/** Nanosecond timestamps near `nowMs` (the push accepts 7 days back, 10 minutes ahead). */
function timestampNs(rng: Rng, nowMs: number): string {
  const offsetMs = rng.chance(0.95) ? -rng.int(0, 60_000) : rng.int(-10 * 86_400_000, 86_400_000);
  return String(BigInt(nowMs + offsetMs) * 1_000_000n + BigInt(rng.int(0, 999_999)));
}

function line(rng: Rng): string {
  const words = Array.from({ length: rng.int(1, 8) }, () => rng.pick(LINE_WORDS));
  return words.join(" ") + (rng.chance(0.1) ? nastyString(rng, rng.int(1, 16)) : "");
}

interface Stream {
  labels: Record<string, string>;
  entries: { ts: string; line: string; metadata?: Record<string, string> }[];
}

/** A valid request: 1–3 streams of 1–6 entries, some with structured metadata. */
function validStreams(rng: Rng, nowMs: number): Stream[] {
  return Array.from({ length: rng.int(1, 3) }, () => {
    const labels: Record<string, string> = { app: rng.pick(FUZZ_APPS) };
    if (rng.chance(0.5)) labels.env = rng.pick(["prod", "dev"]);
    if (rng.chance(0.3)) labels.k = String(rng.int(0, 20));
    if (rng.chance(0.1)) labels.level = rng.pick(LEVEL_WORDS);
    const entries = Array.from({ length: rng.int(1, 6) }, () => {
      const metadata: Record<string, string> = {};
      if (rng.chance(0.4)) metadata.trace_id = `t${rng.int(0, 50)}`;
      if (rng.chance(0.05)) metadata.severity = rng.pick(LEVEL_WORDS);
      return {
        ts: timestampNs(rng, nowMs),
        line: rng.chance(0.1) ? `level=${rng.pick(LEVEL_WORDS)} ${line(rng)}` : line(rng),
        ...(Object.keys(metadata).length > 0 && { metadata }),
      };
    });
    return { labels, entries };
  });
}

function jsonText(streams: Stream[]): string {
  return JSON.stringify({
    streams: streams.map((s) => ({
      stream: s.labels,
      values: s.entries.map((e) => (e.metadata ? [e.ts, e.line, e.metadata] : [e.ts, e.line])),
    })),
  });
}

function protobuf(streams: Stream[]): Uint8Array {
  const request: PushRequest = {
    streams: streams.map((s) => ({
      labels: `{${Object.entries(s.labels)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(", ")}}`,
      entries: s.entries.map((e) => {
        const ns = BigInt(e.ts);
        return {
          timestamp: { seconds: Number(ns / 1_000_000_000n), nanos: Number(ns % 1_000_000_000n) },
          line: e.line,
          structuredMetadata: Object.entries(e.metadata ?? {}).map(([name, value]) => ({
            name,
            value,
          })),
        };
      }),
    })),
  };
  return encodePushRequest(request);
}

/** A JSON body whose text is written raw, so it can hold what JSON.stringify never makes. */
function hostileJson(rng: Rng, nowMs: number): string {
  const ts = `"${timestampNs(rng, nowMs)}"`;
  const app = rng.pick(FUZZ_APPS);
  switch (
    rng.pick([
      "surrogate-label",
      "surrogate-line",
      "surrogate-metadata",
      "deep",
      "many-labels",
      "long-line",
      "bad-names",
      "wrong-types",
      "empty",
      "duplicate-keys",
    ] as const)
  ) {
    case "surrogate-label":
      return `{"streams":[{"stream":{"app":"${app}","k":"\\ud800"},"values":[[${ts},"x"]]}]}`;
    case "surrogate-line":
      return `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"a\\udfffb\\ud800"]]}]}`;
    case "surrogate-metadata":
      return `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"m",{"trace_id":"\\udc00"}]]}]}`;
    case "deep": {
      const depth = rng.int(100, 50_000);
      return `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"d",${"[".repeat(depth)}${"]".repeat(depth)}]]}]}`;
    }
    case "many-labels": {
      const n = rng.int(16, 5_000);
      const labels = Array.from({ length: n }, (_, i) => `"l${i}":"v"`).join(",");
      return `{"streams":[{"stream":{"app":"${app}",${labels}},"values":[[${ts},"x"]]}]}`;
    }
    case "long-line":
      return `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"${"x".repeat(rng.int(200_000, 400_000))}"]]}]}`;
    case "bad-names": {
      const name = rng.pick(["", "0abc", "__name__", "a-b", "ü", "a b", "__reserved__"]);
      return `{"streams":[{"stream":{"app":"${app}",${JSON.stringify(name)}:"v"},"values":[[${ts},"x"]]}]}`;
    }
    case "wrong-types":
      return rng.pick([
        `{"streams":[{"stream":{"app":1},"values":[[${ts},"x"]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[[1e30,"x"]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[["-1","x"]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},null]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts}]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":{}}]}`,
        `{"streams":{}}`,
        `{"streams":null}`,
        `[]`,
        `"streams"`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"x",{"a":1}]]}]}`,
        `{"streams":[{"stream":{"app":"${app}"},"values":[[${ts},"x",[]]]}]}`,
      ]);
    case "empty":
      return rng.pick(["", "{}", `{"streams":[]}`, `{"streams":[{"stream":{},"values":[]}]}`]);
    case "duplicate-keys":
      return `{"streams":[{"stream":{"app":"${app}","app":"fz-b"},"values":[[${ts},"x"]]}],"streams":[]}`;
  }
}

let bombs:
  { gzip: Uint8Array; deflate: Uint8Array; snappyLie: Uint8Array; snappy: Uint8Array } | undefined;

/**
 * Decompression bombs, made once: 1 GiB of zeros as gzip (1,024 one-MiB members, about
 * 1 MB) and as zlib deflate (one 1-MiB block repeated: deflate blocks only refer back to
 * zeros, so repeating one is a valid stream; adler32 of n zeros is `(n mod 65521) << 16 | 1`);
 * a snappy block whose preamble claims 4 GiB; a real snappy block of 17 MiB of zeros.
 * Building them this way takes milliseconds where compressing 1 GiB takes 10 s.
 */
export function decompressionBombs(): NonNullable<typeof bombs> {
  if (bombs !== undefined) return bombs;
  const members = 1024;
  const member = gzipSync(Buffer.alloc(MiB), { level: 9 });
  const block = deflateRawSync(Buffer.alloc(MiB), {
    level: 9,
    finishFlush: constants.Z_SYNC_FLUSH,
  });
  const adler = Buffer.alloc(4);
  adler.writeUInt32BE(((((members * MiB) % 65521) << 16) | 1) >>> 0);
  const finalEmptyBlock = Buffer.from([0x03, 0x00]);
  bombs = {
    gzip: Buffer.concat(Array<Buffer>(members).fill(member)),
    deflate: Buffer.concat([
      Buffer.from([0x78, 0xda]),
      ...Array<Buffer>(members).fill(block),
      finalEmptyBlock,
      adler,
    ]),
    // Varint 0xffffffff, then one literal: a liar a careless decoder would allocate 4 GiB for.
    snappyLie: Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x61]),
    snappy: snappy.compress(new Uint8Array(17 * MiB)),
  };
  return bombs;
}

/** Pushes `json` as plain JSON. */
export function jsonPush(
  kind: string,
  json: string,
  headers: Record<string, string> = {},
): FuzzRequest {
  return {
    kind,
    method: "POST",
    path: PUSH_PATH,
    headers: { "Content-Type": "application/json", ...headers },
    body: Buffer.from(json),
  };
}

function binaryPush(
  kind: string,
  body: Uint8Array,
  contentType: string,
  encoding?: string,
  path = PUSH_PATH,
): FuzzRequest {
  return {
    kind,
    method: "POST",
    path,
    headers: {
      "Content-Type": contentType,
      ...(encoding !== undefined && { "Content-Encoding": encoding }),
    },
    body,
  };
}

/** The mix of push cases, by weight: mostly valid and mutated bodies, some of everything. */
const PUSH_KINDS = {
  json: 12,
  "json-gzip": 6,
  "json-deflate": 6,
  protobuf: 10,
  "json-mutated": 14,
  "json-hostile": 14,
  "protobuf-mutated": 10,
  "compressed-corrupt": 8,
  bomb: 3,
  "wrong-content-type": 7,
  "wrong-encoding": 4,
  "random-bytes": 6,
  "otlp-protobuf": 6,
  "otlp-json": 6,
  "otlp-mutated": 10,
  "otlp-hostile": 8,
} as const;

/** A random attribute value, nested up to `depth` levels of arrays and maps. */
function otlpValue(rng: Rng, depth: number): OtlpValue {
  switch (rng.int(0, depth > 0 ? 7 : 5)) {
    case 0:
      return {
        kind: "string",
        value: rng.chance(0.2) ? nastyString(rng, rng.int(0, 24)) : line(rng),
      };
    case 1:
      return { kind: "bool", value: rng.chance(0.5) };
    case 2:
      return { kind: "int", value: BigInt(rng.int(-1e9, 1e9)) * BigInt(rng.int(1, 1e9)) };
    case 3:
      return { kind: "double", value: rng.pick([0.5, -1e300, NaN, Infinity, 1e-320, 42]) };
    case 4:
      return { kind: "bytes", value: rng.bytes(rng.int(0, 32)) };
    case 5:
      return { kind: "empty" };
    case 6:
      return {
        kind: "array",
        values: Array.from({ length: rng.int(0, 4) }, () => otlpValue(rng, depth - 1)),
      };
    default:
      return {
        kind: "kvlist",
        values: Array.from({ length: rng.int(0, 4) }, () => ({
          key: rng.pick(["a", "b.c", "", "ü", "1x"]),
          value: otlpValue(rng, depth - 1),
        })),
      };
  }
}

/** Streams as an OTLP request: one resource a stream, its app as service.name. */
function otlpLogs(rng: Rng, streams: Stream[], depth = 2): OtlpLogs {
  return {
    resourceLogs: streams.map((s) => ({
      resource: {
        attributes: [
          { key: "service.name", value: { kind: "string", value: s.labels.app! } },
          ...Object.entries(s.labels).map(([key, value]) => ({
            key: `k8s.${key}`,
            value: { kind: "string" as const, value },
          })),
        ],
        droppedAttributesCount: 0,
      },
      scopeLogs: [
        {
          scope: { name: "fuzz", version: "", attributes: [], droppedAttributesCount: 0 },
          logRecords: s.entries.map((e) => ({
            timeUnixNano: BigInt(e.ts),
            observedTimeUnixNano: rng.chance(0.3) ? BigInt(e.ts) : 0n,
            severityNumber: rng.int(0, 24),
            severityText: rng.pick(["", "INFO", "warn"]),
            body: rng.chance(0.7) ? { kind: "string", value: e.line } : otlpValue(rng, depth),
            attributes: Array.from({ length: rng.int(0, 3) }, () => ({
              key: rng.pick(["http.method", "user", "x"]),
              value: otlpValue(rng, depth),
            })),
            droppedAttributesCount: 0,
            flags: rng.int(0, 1),
            traceId: rng.chance(0.5) ? rng.bytes(16) : new Uint8Array(0),
            spanId: rng.chance(0.5) ? rng.bytes(8) : new Uint8Array(0),
            eventName: "",
          })),
        },
      ],
    })),
  };
}

/** OTLP requests meant to hurt: deep values, many attributes, bad ids, odd numbers. */
function hostileOtlp(rng: Rng, streams: Stream[]): FuzzRequest {
  const kind = "otlp-hostile";
  const json = (text: string) =>
    binaryPush(kind, Buffer.from(text), "application/json", undefined, OTLP_PATH);
  const record = (r: string) => `{"resourceLogs":[{"scopeLogs":[{"logRecords":[${r}]}]}]}`;
  switch (rng.int(0, 6)) {
    case 0: {
      let deep: OtlpValue = { kind: "string", value: "x" };
      for (let i = 0; i < MAX_OTLP_VALUE_DEPTH + rng.int(-2, 8); i++) {
        deep = rng.chance(0.5)
          ? { kind: "array", values: [deep] }
          : { kind: "kvlist", values: [{ key: "k", value: deep }] };
      }
      const logs = otlpLogs(rng, streams);
      const r0 = logs.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!;
      const nested = {
        ...logs,
        resourceLogs: [
          {
            ...logs.resourceLogs[0]!,
            scopeLogs: [
              { ...logs.resourceLogs[0]!.scopeLogs[0]!, logRecords: [{ ...r0, body: deep }] },
            ],
          },
        ],
      };
      return binaryPush(
        kind,
        encodeOtlpLogsProtobuf(nested),
        "application/x-protobuf",
        undefined,
        OTLP_PATH,
      );
    }
    case 1:
      return json(record(`{"traceId":"${"a".repeat(rng.int(0, 40))}","body":{"stringValue":"x"}}`));
    case 2:
      return json(
        record(
          `{"timeUnixNano":${rng.pick(['"-1"', '"99999999999999999999999"', "1e30", '"0x10"', "null", "true"])}}`,
        ),
      );
    case 3: {
      // Many attributes: labels past the limit, metadata past its count and bytes.
      const attrs = Array.from(
        { length: rng.int(100, 3000) },
        (_, i) => `{"key":"k8s.a${i}","value":{"stringValue":"${"v".repeat(rng.int(0, 50))}"}}`,
      );
      return json(
        `{"resourceLogs":[{"resource":{"attributes":[${attrs.join(",")}]},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"},"attributes":[${attrs.join(",")}]}]}]}]}`,
      );
    }
    case 4:
      return json(record(`{"body":{"stringValue":"a","intValue":"1"}}`));
    case 5:
      return binaryPush(
        kind,
        rng.bytes(rng.int(0, 2048)),
        "application/x-protobuf",
        rng.pick([undefined, "gzip"]),
        OTLP_PATH,
      );
    default:
      return json(record(`{"body":{"bytesValue":"${nastyString(rng, 8).replace(/["\\]/g, "")}"}}`));
  }
}

/** The push request of case `rng`; timestamps are around `nowMs`. */
export function pushCase(rng: Rng, nowMs: number): FuzzRequest {
  const kind = rng.weighted(PUSH_KINDS);
  const streams = validStreams(rng, nowMs);
  const json = jsonText(streams);
  switch (kind) {
    case "json":
      return jsonPush(kind, json);
    case "json-gzip":
      return binaryPush(kind, gzipSync(json), "application/json", "gzip");
    case "json-deflate":
      return binaryPush(kind, deflateSync(json), "application/json", "deflate");
    case "protobuf":
      return binaryPush(kind, snappy.compress(protobuf(streams)), "application/x-protobuf");
    case "json-mutated":
      return jsonPush(kind, mutateText(rng, json, rng.int(1, 4)));
    case "json-hostile": {
      const text = hostileJson(rng, nowMs);
      return rng.chance(0.2)
        ? binaryPush(kind, gzipSync(text), "application/json", "gzip")
        : jsonPush(kind, text);
    }
    case "protobuf-mutated": {
      const raw = protobuf(streams);
      return rng.chance(0.5)
        ? binaryPush(
            kind,
            snappy.compress(mutateBytes(rng, raw, rng.int(1, 4))),
            "application/x-protobuf",
          )
        : binaryPush(
            kind,
            mutateBytes(rng, snappy.compress(raw), rng.int(1, 4)),
            "application/x-protobuf",
          );
    }
    case "compressed-corrupt": {
      const gz = rng.chance(0.5);
      const packed = gz ? gzipSync(json) : deflateSync(json);
      const body = rng.chance(0.5)
        ? packed.subarray(0, rng.int(0, packed.length - 1))
        : mutateBytes(rng, packed, rng.int(1, 3));
      return binaryPush(kind, body, "application/json", gz ? "gzip" : "deflate");
    }
    case "bomb": {
      const b = decompressionBombs();
      return rng.pick([
        binaryPush("bomb-gzip", b.gzip, "application/json", "gzip"),
        binaryPush("bomb-deflate", b.deflate, "application/json", "deflate"),
        binaryPush("bomb-snappy-lie", b.snappyLie, "application/x-protobuf"),
        binaryPush("bomb-snappy", b.snappy, "application/x-protobuf"),
      ]);
    }
    case "wrong-content-type":
      return rng.pick([
        binaryPush(kind, Buffer.from(json), "application/x-protobuf"),
        binaryPush(kind, snappy.compress(protobuf(streams)), "application/json"),
        binaryPush(kind, Buffer.from(json), "text/plain"),
        binaryPush(kind, Buffer.from(json), "application/json; charset=utf-16"),
        binaryPush(kind, Buffer.from(json), "multipart/form-data; boundary=x"),
        binaryPush(kind, Buffer.from(json), "application/x-www-form-urlencoded"),
        { kind, method: "POST", path: PUSH_PATH, headers: {}, body: Buffer.from(json) },
      ]);
    case "wrong-encoding":
      return binaryPush(
        kind,
        rng.chance(0.5) ? gzipSync(json) : Buffer.from(json),
        "application/json",
        rng.pick(["br", "zstd", "gzip, deflate", "identity", "x-gzip", "GZIP", "snappy"]),
      );
    case "random-bytes":
      return binaryPush(
        kind,
        rng.bytes(rng.int(0, 4096)),
        rng.pick(["application/json", "application/x-protobuf"]),
        rng.pick([undefined, "gzip", "deflate"]),
      );
    case "otlp-protobuf": {
      const body = encodeOtlpLogsProtobuf(otlpLogs(rng, streams));
      const gz = rng.chance(0.3);
      return binaryPush(
        kind,
        gz ? gzipSync(body) : body,
        "application/x-protobuf",
        gz ? "gzip" : undefined,
        OTLP_PATH,
      );
    }
    case "otlp-json":
      return binaryPush(
        kind,
        Buffer.from(encodeOtlpLogsJson(otlpLogs(rng, streams))),
        "application/json",
        undefined,
        OTLP_PATH,
      );
    case "otlp-mutated": {
      const logs = otlpLogs(rng, streams);
      return rng.chance(0.5)
        ? binaryPush(
            kind,
            mutateBytes(rng, encodeOtlpLogsProtobuf(logs), rng.int(1, 4)),
            "application/x-protobuf",
            undefined,
            OTLP_PATH,
          )
        : binaryPush(
            kind,
            Buffer.from(mutateText(rng, encodeOtlpLogsJson(logs), rng.int(1, 4))),
            "application/json",
            undefined,
            OTLP_PATH,
          );
    }
    case "otlp-hostile":
      return hostileOtlp(rng, streams);
  }
}
