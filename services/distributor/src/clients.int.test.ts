// Real Loki clients push into a running distributor over loopback, and every line is read
// back from the write-ahead log intact: winston-loki speaks protobuf + snappy, pino-loki JSON
// with structured metadata.
import { once } from "node:events";
import { pino } from "pino";
import pinoLoki from "pino-loki";
import winston from "winston";
import LokiTransport from "winston-loki";
import { afterEach, describe, expect, it } from "vitest";
import { readUntil, startDistributor } from "./harness.test-helper.js";
import type { Harness, ReadRecord } from "./harness.test-helper.js";

const LINES = 200;
const line = (i: number) => `line ${i}: ünïcödé "quoted" \\ back\tslash ✓ ${"x".repeat(i % 37)}`;

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const count = (records: readonly ReadRecord[]) => records.reduce((n, r) => n + r.entries.length, 0);

describe("real clients", () => {
  it("winston-loki (protobuf + snappy): every line arrives intact", async () => {
    h = await startDistributor();
    const errors: unknown[] = [];
    const transport = new LokiTransport({
      host: h.url,
      labels: { app: "winston-test", env: "ci" },
      json: false,
      batching: true,
      interval: 0.05,
      format: winston.format.printf((info) => String(info.message)),
      onConnectionError: (error: unknown) => errors.push(error),
    });
    // The client falls back to JSON silently if its snappy binding is missing: make sure not.
    const batcher = (transport as unknown as { batcher: { contentType: string } }).batcher;
    expect(batcher.contentType).toBe("application/x-protobuf");
    const logger = winston.createLogger({
      // winston-loki extends its own copy of winston-transport: the same class, another copy.
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
      transports: [transport],
    });
    for (let i = 0; i < LINES; i++) logger.info(line(i));
    const records = await readUntil(h.wal.consumer, (r) => count(r) >= LINES);
    expect(errors).toEqual([]);
    const lines = records.flatMap((r) => r.entries.map((e) => e.line));
    expect(lines.sort()).toEqual(Array.from({ length: LINES }, (_, i) => line(i)).sort());
    for (const r of records) {
      expect(r.tenant).toBe("fake");
      expect(r.labels).toBe('{app="winston-test", env="ci", level="info"}');
    }
    await transport.close();
    logger.close();
  });

  it("pino-loki (JSON with structured metadata): every line and its metadata arrive intact", async () => {
    h = await startDistributor();
    const stream = pinoLoki({
      host: h.url,
      batching: true,
      interval: 0.05,
      labels: { app: "pino-test" },
      structuredMetaKey: "meta",
      logFormat: "{msg}",
      silenceErrors: false,
    });
    const logger = pino({ level: "info", base: null }, stream);
    for (let i = 0; i < LINES; i++) {
      logger.info({ meta: { trace_id: `trace-${i}`, user: "ü" } }, line(i));
    }
    const records = await readUntil(h.wal.consumer, (r) => count(r) >= LINES);
    const got = records
      .flatMap((r) => r.entries)
      .map((e) => ({
        line: e.line,
        metadata: Object.fromEntries(e.structuredMetadata.map((p) => [p.name, p.value])),
      }))
      .sort((a, b) => (a.line < b.line ? -1 : 1));
    const want = Array.from({ length: LINES }, (_, i) => ({
      line: line(i),
      metadata: { trace_id: `trace-${i}`, user: "ü" },
    })).sort((a, b) => (a.line < b.line ? -1 : 1));
    expect(got).toEqual(want);
    for (const r of records) expect(r.labels).toMatch(/^\{app="pino-test", level="info"\}$/);
    stream.end();
    await once(stream, "close");
  });
});
