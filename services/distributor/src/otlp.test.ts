// The OTLP → Loki mapping, table by table: attribute values of every kind, names, where
// each attribute goes under the default and the per-tenant rules, service_name discovery,
// timestamps and grouping (Loki's otlp.go and its tests are the reference).
import type { OtlpAttribute, OtlpLogRecord, OtlpLogs, OtlpValue } from "@sieve/proto";
import { describe, expect, it } from "vitest";
import { DEFAULT_LIMITS } from "./limits.js";
import type { OtlpLimits } from "./otlp.js";
import {
  UNKNOWN_SERVICE,
  attributePairs,
  goFloat,
  normalizeLabelName,
  otlpStreams,
  valueString,
} from "./otlp.js";

const str = (value: string): OtlpValue => ({ kind: "string", value });
const attr = (key: string, value: OtlpValue | string): OtlpAttribute => ({
  key,
  value: typeof value === "string" ? str(value) : value,
});

const record = (over: Partial<OtlpLogRecord> = {}): OtlpLogRecord => ({
  timeUnixNano: 1_700_000_000_000_000_000n,
  observedTimeUnixNano: 0n,
  severityNumber: 0,
  severityText: "",
  body: str("line"),
  attributes: [],
  droppedAttributesCount: 0,
  flags: 0,
  traceId: new Uint8Array(0),
  spanId: new Uint8Array(0),
  eventName: "",
  ...over,
});

function logs(
  resource: OtlpAttribute[],
  records: OtlpLogRecord[],
  scope: Partial<OtlpLogs["resourceLogs"][number]["scopeLogs"][number]["scope"]> = {},
): OtlpLogs {
  return {
    resourceLogs: [
      {
        resource: { attributes: resource, droppedAttributesCount: 0 },
        scopeLogs: [
          {
            scope: { name: "", version: "", attributes: [], droppedAttributesCount: 0, ...scope },
            logRecords: records,
          },
        ],
      },
    ],
  };
}

const NOW = 1_800_000_000_000_000_000n;
const map = (l: OtlpLogs, limits: Partial<OtlpLimits> = {}) =>
  otlpStreams(l, { ...DEFAULT_LIMITS, ...limits }, NOW);
const metadataOf = (l: OtlpLogs, limits: Partial<OtlpLimits> = {}) =>
  Object.fromEntries(
    map(l, limits)[0]!.entries[0]!.structuredMetadata.map((p) => [p.name, p.value]),
  );

describe("values as strings (pdata's AsString)", () => {
  it.each<[string, OtlpValue, string]>([
    ["a string", str("héllo ✓"), "héllo ✓"],
    ["an empty string", str(""), ""],
    ["true", { kind: "bool", value: true }, "true"],
    ["an int", { kind: "int", value: -42n }, "-42"],
    ["the smallest int64", { kind: "int", value: -(2n ** 63n) }, "-9223372036854775808"],
    ["a double", { kind: "double", value: 1.5 }, "1.5"],
    ["a large double, no exponent", { kind: "double", value: 1e21 }, "1000000000000000000000"],
    ["a small double, no exponent", { kind: "double", value: 1.25e-7 }, "0.000000125"],
    ["NaN", { kind: "double", value: NaN }, "NaN"],
    ["-Inf", { kind: "double", value: -Infinity }, "-Inf"],
    ["bytes, base64", { kind: "bytes", value: Uint8Array.of(0, 255, 16) }, "AP8Q"],
    ["nothing", { kind: "empty" }, ""],
    [
      "an array, as JSON",
      {
        kind: "array",
        values: [
          { kind: "int", value: 1n },
          str("a"),
          { kind: "bool", value: false },
          { kind: "empty" },
          { kind: "double", value: 0.5 },
          { kind: "bytes", value: Uint8Array.of(1) },
        ],
      },
      '[1,"a",false,null,0.5,"AQ=="]',
    ],
    [
      "a map, as JSON in its order",
      {
        kind: "kvlist",
        values: [attr("z", "1"), attr("a", { kind: "array", values: [str('q"uote')] })],
      },
      '{"z":"1","a":["q\\"uote"]}',
    ],
  ])("%s", (_name, value, want) => {
    expect(valueString(value)).toBe(want);
  });

  it("goFloat agrees with String where JavaScript prints no exponent", () => {
    for (const f of [0, -0.5, 123.456, 2 ** 53, 1e20, 1e-6, -1e-7]) {
      expect(Number(goFloat(f))).toBe(f);
      expect(goFloat(f)).not.toContain("e");
    }
  });
});

describe("names (Prometheus' NormalizeLabel)", () => {
  it.each([
    ["service.name", "service_name"],
    ["k8s.pod.name", "k8s_pod_name"],
    ["http-status code", "http_status_code"],
    ["1st", "key_1st"],
    ["_private", "key_private"],
    ["__reserved", "__reserved"],
    ["é", "key_"],
    ["already_fine", "already_fine"],
  ])("%s → %s", (name, want) => {
    expect(normalizeLabelName(name)).toBe(want);
  });

  it("flattens maps with their key as prefix, nested maps in turn; a top-level empty key is skipped", () => {
    const value: OtlpValue = {
      kind: "kvlist",
      values: [
        attr("id", { kind: "int", value: 7n }),
        attr("geo", { kind: "kvlist", values: [attr("city.name", "Oslo")] }),
        attr("", "nameless"),
      ],
    };
    expect(attributePairs("user.info", value)).toEqual([
      { name: "user_info_id", value: "7" },
      { name: "user_info_geo_city_name", value: "Oslo" },
      // An empty key inside a map: the prefix and its separator, as Loki writes it.
      { name: "user_info_", value: "nameless" },
    ]);
    expect(attributePairs("", str("x"))).toEqual([]);
  });
});

describe("the default mapping", () => {
  const traceId = Uint8Array.from(Buffer.from("4bf92f3577b34da6a3ce929d0e0e4736", "hex"));
  const spanId = Uint8Array.from(Buffer.from("00f067aa0ba902b7", "hex"));
  const l = logs(
    [
      attr("service.name", "checkout"),
      attr("k8s.namespace.name", "shop"),
      attr("host.name", "web-1"),
      attr("deployment.environment", ""),
    ],
    [
      record({
        observedTimeUnixNano: 1_700_000_000_000_000_500n,
        severityNumber: 17,
        severityText: "ERROR",
        attributes: [attr("http.method", "POST"), attr("retries", { kind: "int", value: 3n })],
        droppedAttributesCount: 2,
        flags: 1,
        traceId,
        spanId,
        body: { kind: "kvlist", values: [attr("msg", "boom")] },
      }),
    ],
    {
      name: "my.lib",
      version: "1.2.0",
      attributes: [attr("scope.attr", "s")],
      droppedAttributesCount: 1,
    },
  );

  it("indexes Loki's list of resource attributes and stores the rest as metadata", () => {
    const [stream] = map(l);
    // An empty value names no stream: left out, as Loki's label parsing does.
    expect(stream!.labelsText).toBe('{k8s_namespace_name="shop", service_name="checkout"}');
    expect(stream!.entries[0]!.line).toBe('{"msg":"boom"}');
    expect(stream!.entries[0]!.timestampNs).toBe(1_700_000_000_000_000_000n);
    expect(stream!.entries[0]!.structuredMetadata).toEqual([
      { name: "http_method", value: "POST" },
      { name: "retries", value: "3" },
      { name: "observed_timestamp", value: "1700000000000000500" },
      { name: "severity_number", value: "17" },
      { name: "severity_text", value: "ERROR" },
      { name: "dropped_attributes_count", value: "2" },
      { name: "flags", value: "1" },
      { name: "trace_id", value: "4bf92f3577b34da6a3ce929d0e0e4736" },
      { name: "span_id", value: "00f067aa0ba902b7" },
      { name: "host_name", value: "web-1" },
      { name: "scope_attr", value: "s" },
      { name: "scope_name", value: "my.lib" },
      { name: "scope_version", value: "1.2.0" },
      { name: "scope_dropped_attributes_count", value: "1" },
    ]);
  });

  it("all-zero ids, unset severity and flags add nothing; a huge value is kept for validation to judge", () => {
    const huge = "x".repeat(200_000);
    const md = metadataOf(
      logs(
        [attr("service.name", "a")],
        [
          record({
            traceId: new Uint8Array(16),
            spanId: new Uint8Array(8),
            attributes: [attr("big", huge)],
          }),
        ],
      ),
    );
    expect(md).toEqual({ big: huge });
  });

  it("takes the observed time when the time is unset, and now when both are", () => {
    const [s] = map(
      logs(
        [attr("service.name", "a")],
        [
          record({ timeUnixNano: 0n, observedTimeUnixNano: 5n }),
          record({ timeUnixNano: 0n }),
          record({ timeUnixNano: 2n ** 64n - 1n }),
        ],
      ),
    );
    expect(s!.entries.map((e) => e.timestampNs)).toEqual([5n, NOW, -1n]);
    // With the time unset the observed time is the timestamp, not metadata too.
    expect(s!.entries[0]!.structuredMetadata).toEqual([]);
  });

  it("groups resources with the same labels into one stream, in first-seen order", () => {
    const two: OtlpLogs = {
      resourceLogs: [
        ...logs([attr("service.name", "b")], [record()]).resourceLogs,
        ...logs([attr("service.name", "a")], [record(), record()]).resourceLogs,
        ...logs([attr("service.name", "b"), attr("host.name", "h2")], [record()]).resourceLogs,
      ],
    };
    const streams = map(two);
    expect(streams.map((s) => [s.labelsText, s.entries.length])).toEqual([
      ['{service_name="b"}', 2],
      ['{service_name="a"}', 2],
    ]);
  });

  it("on a name collision the last index label wins and metadata keeps both", () => {
    const [s] = map(
      logs(
        [attr("k8s.pod.name", "p1"), attr("k8s_pod_name", "p2"), attr("service.name", "a")],
        [record({ attributes: [attr("a.b", "1"), attr("a_b", "2")] })],
      ),
      { otlpResourceIndexLabels: ["k8s.pod.name", "k8s_pod_name", "service.name"] },
    );
    expect(s!.labelsText).toBe('{k8s_pod_name="p2", service_name="a"}');
    expect(s!.entries[0]!.structuredMetadata).toEqual([
      { name: "a_b", value: "1" },
      { name: "a_b", value: "2" },
    ]);
  });
});

describe("per-tenant rules and service_name discovery", () => {
  const resource = [
    attr("service.name", "checkout"),
    attr("k8s.pod.name", "checkout-1"),
    attr("k8s.node.name", "node-a"),
    attr("host.name", "web-1"),
  ];
  const recordWith = record({ attributes: [attr("http.method", "GET"), attr("user", "u1")] });

  it.each<[string, Partial<OtlpLimits>, string, Record<string, string>]>([
    [
      "the defaults",
      {},
      '{k8s_pod_name="checkout-1", service_name="checkout"}',
      { http_method: "GET", user: "u1", k8s_node_name: "node-a", host_name: "web-1" },
    ],
    [
      "a regex index list (service.name, now metadata, still names the service)",
      { otlpResourceIndexLabels: ["/k8s\\..*/"] },
      '{k8s_node_name="node-a", k8s_pod_name="checkout-1"}',
      { http_method: "GET", user: "u1", service_name: "checkout", host_name: "web-1" },
    ],
    [
      "drops, which win over the index list",
      {
        otlpResourceDrop: ["host.name", "k8s.pod.name"],
        otlpLogDrop: ["/http\\..*/"],
      },
      '{service_name="checkout"}',
      { user: "u1", k8s_node_name: "node-a" },
    ],
  ])("%s", (_name, limits, labels, metadata) => {
    const l = logs(resource, [recordWith]);
    expect(map(l, limits)[0]!.labelsText).toBe(labels);
    expect(metadataOf(l, limits)).toEqual(metadata);
  });

  it("drops scope attributes by rule", () => {
    const l = logs([attr("service.name", "a")], [record()], {
      attributes: [attr("keep", "1"), attr("drop.me", "2")],
    });
    expect(metadataOf(l, { otlpScopeDrop: ["drop.me"] })).toEqual({ keep: "1" });
  });

  it.each<[string, OtlpAttribute[], readonly string[] | undefined, string]>([
    ["service.name given", [attr("service.name", "svc")], undefined, '{service_name="svc"}'],
    [
      "named by an index label on the list (k8s.container.name)",
      [attr("k8s.container.name", "api"), attr("k8s.pod.name", "p")],
      undefined,
      '{k8s_container_name="api", k8s_pod_name="p", service_name="api"}',
    ],
    [
      "nothing names it",
      [attr("host.name", "h")],
      undefined,
      `{service_name="${UNKNOWN_SERVICE}"}`,
    ],
    [
      "an empty service.name",
      [attr("service.name", "")],
      undefined,
      `{service_name="${UNKNOWN_SERVICE}"}`,
    ],
    ["discovery off", [attr("host.name", "h")], [], "{}"],
    [
      "a custom list",
      [attr("k8s.pod.name", "p"), attr("k8s.namespace.name", "ns")],
      ["k8s_namespace_name"],
      '{k8s_namespace_name="ns", k8s_pod_name="p", service_name="ns"}',
    ],
  ])("service_name: %s", (_name, resource, discover, labels) => {
    const limits = discover === undefined ? {} : { discoverServiceName: discover };
    expect(map(logs(resource, [record()]), limits)[0]!.labelsText).toBe(labels);
  });
});
