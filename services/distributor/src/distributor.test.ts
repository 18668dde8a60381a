import { rm } from "node:fs/promises";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import type { LocalWal } from "@sieve/queue";
import type { IncomingEntry, IncomingStream } from "./decode.js";
import { Distributor } from "./distributor.js";
import { linesOf, readUntil, tempWal, testConfig } from "./harness.test-helper.js";
import type { TenantLimits } from "./limits.js";
import { DistributorMetrics } from "./metrics.js";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0); // the injected clock starts here
const NS = 1_000_000n;
const MIN = 60_000;

let wal: LocalWal | undefined;
let dir = "";
afterEach(async () => {
  await wal?.close();
  wal = undefined;
  await rm(dir, { recursive: true, force: true });
});

interface Setup {
  distributor: Distributor;
  registry: Registry;
  clock: { now: number };
  wal: LocalWal;
}

async function setup(
  limits: Partial<TenantLimits> = {},
  overrides: Record<string, Partial<TenantLimits>> = {},
): Promise<Setup> {
  const opened = await tempWal();
  wal = opened.wal;
  dir = opened.dir;
  const registry = new Registry();
  const clock = { now: T0 };
  const distributor = new Distributor({
    config: { ...testConfig({}, limits), overrides },
    queue: opened.wal.writer,
    logger: pino({ level: "silent" }),
    metrics: new DistributorMetrics(registry),
    now: () => clock.now,
  });
  return { distributor, registry, clock, wal: opened.wal };
}

const entry = (line: string, ms = T0, meta: [string, string][] = []): IncomingEntry => ({
  timestampNs: BigInt(ms) * NS,
  line,
  structuredMetadata: meta.map(([name, value]) => ({ name, value })),
});
const stream = (labelsText: string, ...entries: IncomingEntry[]): IncomingStream => ({
  labelsText,
  entries,
});

async function metric(registry: Registry, name: string, labels: Record<string, string>) {
  const m = await registry.getSingleMetric(name)!.get();
  const v = m.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l));
  return v?.value ?? 0;
}

describe("entry validation (Loki's ValidateEntry), valid entries of the stream kept", () => {
  const S = '{app="a"}';
  it.each<[string, Partial<TenantLimits>, IncomingEntry, string, string]>([
    [
      "too old",
      {},
      entry("x", T0 - 8 * 24 * 3600 * 1000),
      "greater_than_max_sample_age",
      `entry for stream '${S}' has timestamp too old: 2025-12-24T12:00:00Z, oldest acceptable timestamp is: 2025-12-25T12:00:00Z`,
    ],
    [
      "too new",
      {},
      entry("x", T0 + 11 * MIN),
      "too_far_in_future",
      `entry for stream '${S}' has timestamp too new: 2026-01-01T12:11:00Z`,
    ],
    [
      "line too long",
      { maxLineBytes: 4 },
      entry("ünï"),
      "line_too_long",
      `Max entry size '4' bytes exceeded for stream '${S}' while adding an entry with length '5' bytes`,
    ],
    [
      "structured metadata disallowed",
      { allowStructuredMetadata: false },
      entry("x", T0, [["k", "v"]]),
      "disallowed_structured_metadata",
      `stream '${S}' includes structured metadata, but this feature is disallowed. Please see \`limits_config.allow_structured_metadata\` or contact your Loki administrator to enable it.`,
    ],
    [
      "structured metadata too large",
      { maxStructuredMetadataBytes: 5 },
      entry("x", T0, [["trace", "id"]]),
      "structured_metadata_too_large",
      `stream '${S}' has structured metadata too large: '7' bytes, limit: '5' bytes. Please see \`limits_config.max_structured_metadata_size\` or contact your Loki administrator to increase it.`,
    ],
    [
      "structured metadata too many",
      { maxStructuredMetadataCount: 1 },
      entry("x", T0, [
        ["a", "1"],
        ["b", "2"],
      ]),
      "structured_metadata_too_many",
      `stream '${S}' has too many structured metadata labels: '2', limit: '1'. Please see \`limits_config.max_structured_metadata_entries_count\` or contact your Loki administrator to increase it.`,
    ],
  ])("%s", async (_name, limits, bad, reason, message) => {
    const s = await setup(limits);
    const result = await s.distributor.push("fake", [stream('{ app = "a" }', entry("good"), bad)]);
    expect(result.status).toBe(400);
    expect(result.body).toBe(message);
    expect(result.reasons).toEqual([reason]);
    expect(result.acceptedLines).toBe(1);
    expect(
      await metric(s.registry, "sieve_discarded_lines_total", { reason, tenant: "fake" }),
    ).toBe(1);
    expect(linesOf(await readUntil(s.wal.consumer, (r) => r.length === 1))).toEqual(["good"]);
  });

  it("accepts old entries when rejectOldSamples is off, and the edges of the window", async () => {
    const s = await setup({ rejectOldSamples: false });
    const result = await s.distributor.push("fake", [
      stream('{a="b"}', entry("ancient", 0), entry("edge", T0 + 10 * MIN)),
    ]);
    expect(result.status).toBe(204);
  });
});

describe("label validation (Loki's ValidateLabels): the whole stream refused", () => {
  const many = `{${Array.from({ length: 16 }, (_, i) => `l${i}="v"`).join(", ")}}`;
  it.each<[string, Partial<TenantLimits>, string, string, string]>([
    ["missing", {}, "{}", "missing_labels", "error at least one label pair is required per stream"],
    [
      "unparsable",
      {},
      '{a="b"',
      "invalid_labels",
      `Error parsing labels '{a="b"' with error: 1:7: parse error: unexpected end of input in label set, expected "," or "}"`,
    ],
    [
      "too many names",
      {},
      many,
      "max_label_names_per_series",
      `entry for stream '${many}' has 16 label names; limit 15`,
    ],
    [
      "name too long",
      { maxLabelNameLength: 3 },
      '{abcd="v"}',
      "label_name_too_long",
      `stream '{abcd="v"}' has label name too long: 'abcd'`,
    ],
    [
      "value too long",
      { maxLabelValueLength: 3 },
      '{a="vvvv"}',
      "label_value_too_long",
      `stream '{a="vvvv"}' has label value too long: 'vvvv'`,
    ],
    [
      "duplicate name",
      {},
      '{a="1", b="2", a="3"}',
      "duplicate_label_names",
      `stream '{a="1", b="2", a="3"}' has duplicate label name: 'a'`,
    ],
  ])("%s", async (_name, limits, labels, reason, message) => {
    const s = await setup(limits);
    const result = await s.distributor.push("fake", [
      stream(labels, entry("l1"), entry("l2")),
      stream('{ok="1"}', entry("kept")),
    ]);
    expect(result).toMatchObject({
      status: 400,
      body: message,
      reasons: [reason],
      acceptedLines: 1,
    });
    expect(await metric(s.registry, "sieve_discarded_lines_total", { reason })).toBe(2);
    expect(await metric(s.registry, "sieve_discarded_bytes_total", { reason })).toBe(4);
  });

  it("does not count service_name against the label-name limit, as Loki", async () => {
    const s = await setup({ maxLabelNamesPerSeries: 1 });
    const result = await s.distributor.push("fake", [
      stream('{a="1", service_name="s"}', entry("x")),
    ]);
    expect(result.status).toBe(204);
  });
});

describe("the refusal body", () => {
  it("lists the first 100 messages and counts the rest", async () => {
    const s = await setup({ maxLineBytes: 1 });
    const entries = Array.from({ length: 150 }, (_, i) => entry(`line ${i}`));
    const result = await s.distributor.push("fake", [stream('{a="b"}', ...entries)]);
    const lines = result.body.split("\n");
    expect(lines).toHaveLength(101);
    expect(lines[100]).toBe("and 50 more refused entries or streams");
    expect(
      await metric(s.registry, "sieve_discarded_lines_total", { reason: "line_too_long" }),
    ).toBe(150);
  });
});

describe("rate limits", () => {
  it("refuses a whole push over the tenant's ingestion rate (429) and refills with time", async () => {
    const s = await setup({ ingestionRateBytes: 100, ingestionBurstBytes: 150 });
    const push = (line: string) => s.distributor.push("fake", [stream('{a="b"}', entry(line))]);
    expect((await push("x".repeat(100))).status).toBe(204);
    const refused = await push("y".repeat(100));
    expect(refused.status).toBe(429);
    expect(refused.body).toBe(
      "Ingestion rate limit exceeded for user fake (limit: 100 bytes/sec) while attempting to ingest '1' lines totaling '100' bytes, reduce log volume or contact your Loki administrator to see if the limit can be increased",
    );
    expect(
      await metric(s.registry, "sieve_discarded_bytes_total", { reason: "rate_limited" }),
    ).toBe(100);
    s.clock.now += 500; // 50 + 50 refilled = 100 tokens
    expect((await push("z".repeat(100))).status).toBe(204);
  });

  it("applies per-tenant overrides", async () => {
    const s = await setup({}, { small: { ingestionRateBytes: 10, ingestionBurstBytes: 10 } });
    const big = [stream('{a="b"}', entry("x".repeat(50)))];
    expect((await s.distributor.push("small", big)).status).toBe(429);
    expect((await s.distributor.push("other", big)).status).toBe(204);
  });

  it("refuses one stream over its own rate, and keeps the others (429)", async () => {
    const s = await setup({ perStreamRateBytes: 1024, perStreamBurstBytes: 2048 });
    const result = await s.distributor.push("fake", [
      stream('{s="hot"}', entry("x".repeat(3000))),
      stream('{s="cool"}', entry("cool")),
    ]);
    expect(result.status).toBe(429);
    expect(result.body).toBe(
      "Per stream rate limit exceeded (limit: 1KB/sec) while attempting to ingest for stream '{s=\"hot\"}' totaling 3000B, consider splitting a stream via additional labels or contact your Loki administrator to see if the limit can be increased",
    );
    expect(linesOf(await readUntil(s.wal.consumer, (r) => r.length === 1))).toEqual(["cool"]);
  });
});

describe("series limiter (new streams per hour and per day)", () => {
  it("admits N new streams an hour, always re-admits known ones, and names the limit", async () => {
    const s = await setup({ maxNewStreamsPerHour: 2, maxNewStreamsPerDay: 3 });
    const push = (v: string) => s.distributor.push("fake", [stream(`{s="${v}"}`, entry(v))]);
    expect((await push("a")).status).toBe(204);
    expect((await push("b")).status).toBe(204);
    const refused = await push("c");
    expect(refused.status).toBe(429);
    expect(refused.reasons).toEqual(["stream_limit"]);
    expect(refused.body).toContain("(maxNewStreamsPerHour: 2)");
    expect(refused.body).toContain(`stream {s="c"}`);
    expect((await push("a")).status).toBe(204);
    s.clock.now += 60 * MIN;
    expect((await push("c")).status).toBe(204);
    const daily = await push("d");
    expect(daily.status).toBe(429);
    expect(daily.body).toContain("(maxNewStreamsPerDay: 3)");
    expect(
      await metric(s.registry, "sieve_discarded_lines_total", { reason: "stream_limit" }),
    ).toBe(2);
  });
});

describe("the queue", () => {
  it("writes one record per accepted stream, on the partition of its fingerprint", async () => {
    const s = await setup();
    const streams = Array.from({ length: 12 }, (_, i) => stream(`{i="${i}"}`, entry(`line ${i}`)));
    expect((await s.distributor.push("fake", streams)).status).toBe(204);
    let total = 0;
    for (let p = 0; p < 4; p++) total += s.wal.endOffset(p);
    expect(total).toBe(12);
    const records = await readUntil(s.wal.consumer, (r) => r.length === 12);
    for (const r of records) expect(r.partition).toBe(Number(r.fingerprint % 4n));
  });

  it("answers 503 and counts nothing received when the queue cannot append", async () => {
    const s = await setup();
    await s.wal.close();
    wal = undefined;
    const result = await s.distributor.push("fake", [stream('{a="b"}', entry("lost"))]);
    expect(result.status).toBe(503);
    expect(result.body).toMatch(/^the queue could not store the push durably: /);
    expect(await metric(s.registry, "sieve_distributor_lines_received_total", {})).toBe(0);
    const histogram = await s.registry.getSingleMetric("sieve_queue_write_duration_seconds")!.get();
    const errors = histogram.values.find(
      (v) =>
        (v as { metricName?: string }).metricName === "sieve_queue_write_duration_seconds_count" &&
        v.labels.outcome === "error",
    );
    expect(errors?.value).toBe(1);
  });

  it("refuses an invalid tenant ID before anything else", async () => {
    const s = await setup();
    const result = await s.distributor.push("../etc", [stream('{a="b"}', entry("x"))]);
    expect(result).toMatchObject({
      status: 400,
      body: "tenant ID '../etc' contains unsupported character '/'",
    });
    expect(s.wal.endOffset(0) + s.wal.endOffset(1) + s.wal.endOffset(2) + s.wal.endOffset(3)).toBe(
      0,
    );
  });

  it("answers 204 for an empty push and writes nothing", async () => {
    const s = await setup();
    expect((await s.distributor.push("fake", [])).status).toBe(204);
    expect(s.wal.endOffset(0)).toBe(0);
  });
});

describe("tenant state (issue 10, case 7)", () => {
  it("is created only for a push with a valid stream: 10,000 refused tenants leave none", async () => {
    const s = await setup();
    const before = process.memoryUsage();
    const refused = [
      stream("{}", entry("no labels")),
      stream('{"bad-name"="x"}', entry("bad name")),
      stream('{a="b"}', entry("far too old", T0 - 30 * 24 * 60 * MIN)),
    ];
    for (let i = 0; i < 10_000; i++) {
      const result = await s.distributor.push(`tenant-${i}`, [refused[i % refused.length]!]);
      expect(result.status).toBe(400);
    }
    const after = process.memoryUsage();
    // ~440 KB of limiters each had they been created: 4.4 GB.
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(64 << 20);
    expect(s.distributor.tenantCount).toBe(0);
    expect((await s.distributor.push("tenant-ok", [stream('{a="b"}', entry("x"))])).status).toBe(
      204,
    );
    expect(s.distributor.tenantCount).toBe(1);
  });

  it("is evicted once idle and holding nothing a new state would not", async () => {
    const s = await setup({ perStreamRateBytes: 1000, perStreamBurstBytes: 1000 });
    const streams = ["a", "b", "c"].map((v) => stream(`{s="${v}"}`, entry(`line ${v}`)));
    expect((await s.distributor.push("t1", streams)).status).toBe(204);
    expect(s.distributor.tenantCount).toBe(1);
    expect(s.distributor.streamBucketCount).toBe(3);

    s.clock.now += 10_000; // buckets refilled, tenant not idle long enough
    s.distributor.evictIdle();
    expect(s.distributor.tenantCount).toBe(1);
    expect(s.distributor.streamBucketCount).toBe(0);

    s.clock.now += 2 * 60 * MIN; // idle, but the day's new streams are still counted
    s.distributor.evictIdle();
    expect(s.distributor.tenantCount).toBe(1);

    s.clock.now += 24 * 60 * MIN; // the day rolled over with no new stream: forgotten
    s.distributor.evictIdle();
    expect(s.distributor.tenantCount).toBe(0);
    expect(await metric(s.registry, "sieve_distributor_tenants", {})).toBe(0);
  });

  it("eviction never lets a tenant past its new-stream limit", async () => {
    const s = await setup({ maxNewStreamsPerHour: 1, maxNewStreamsPerDay: 1 });
    const push = (v: string) =>
      s.distributor.push("t", [stream(`{s="${v}"}`, entry(v, s.clock.now))]);
    expect((await push("a")).status).toBe(204);
    s.clock.now += 2 * 60 * MIN; // idle past tenantIdleMs (1 h) but within the day
    s.distributor.evictIdle();
    expect((await push("b")).status).toBe(429);
  });
});
