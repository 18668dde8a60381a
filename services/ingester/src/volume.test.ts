/**
 * Volume and stats over real streams in memory: an open head and a chunk cut from it (as
 * the flush scheduler leaves it until the next flush), counted by their line bytes.
 */
import type { IngesterVolumeRequest } from "@sieve/proto";
import { Registry } from "prom-client";
import { describe, expect, test } from "vitest";
import { DEFAULT_CONFIG } from "./config.js";
import { IngesterError } from "./errors.js";
import { IngesterMetrics } from "./metrics.js";
import { Stream, streamKey } from "./stream.js";
import { queryStats, queryVolume } from "./volume.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;
const T0s = 1_700_000_000;
/** The ingester's bound on an answer's entries (maxEntriesPerQuery). */
const MAX = 1000;

const ctx = { config: DEFAULT_CONFIG, metrics: new IngesterMetrics(new Registry()) };

function stream(labels: string, fp: bigint): Stream {
  return new Stream(streamKey("t", fp), "t", labels, fp, undefined, ctx);
}

/** `n` entries from `fromS` s after T0, 1 s apart. */
function entries(tag: string, fromS: number, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    timestampNs: T0 + BigInt(fromS + i) * S,
    line: `${tag} ✓ ${i}`,
    structuredMetadata: [],
  }));
}
const bytes = (es: { line: string }[]): number =>
  es.reduce((n, e) => n + Buffer.byteLength(e.line, "utf8"), 0);

// api/a: a chunk cut at 0..9 s, then a head at 20..24 s; web: a head at 5..7 s.
const cutPart = entries("api-a", 0, 10);
const headPart = entries("api-a-late", 20, 5);
const webPart = entries("web", 5, 3);
const apiA = stream('{app="api", pod="a"}', 1n);
apiA.append(cutPart, 0, 0);
apiA.cut("forced");
apiA.append(headPart, 1, 0);
const web = stream('{app="web"}', 2n);
web.append(webPart, 2, 0);
const empty = stream('{app="api", pod="b"}', 3n);
const streams = [apiA, web, empty];

const req: IngesterVolumeRequest = {
  tenant: "t",
  start: T0,
  end: T0 + 60n * S,
  step: 0n,
  targetLabels: [],
  aggregateBy: "series",
  maxSeries: 100,
};

/** queryVolume over these streams, with the ingester's default bound. */
const vol = (r: IngesterVolumeRequest, options?: { signal?: AbortSignal }) =>
  queryVolume(streams, r, MAX, options);

describe("queryVolume", () => {
  test("every stream's head and cut chunks, by line bytes", () => {
    expect(apiA.pending).toHaveLength(1);
    expect(vol(req)).toEqual([
      { name: '{app="api", pod="a"}', bucket: 0, bytes: bytes([...cutPart, ...headPart]) },
      { name: '{app="web"}', bucket: 0, bytes: bytes(webPart) },
    ]);
  });

  test("a selector, and the names its matchers give", () => {
    expect(vol({ ...req, selector: '{app=~"api|web"}' })).toEqual([
      { name: '{app="api"}', bucket: 0, bytes: bytes([...cutPart, ...headPart]) },
      { name: '{app="web"}', bucket: 0, bytes: bytes(webPart) },
    ]);
    expect(vol({ ...req, selector: '{app="web"}' })).toEqual([
      { name: '{app="web"}', bucket: 0, bytes: bytes(webPart) },
    ]);
  });

  test("buckets of 10 s: the cut chunk in the first, the head in the third", () => {
    const got = vol({ ...req, step: 10n * S, selector: '{pod="a"}' }).sort(
      (x, y) => x.bucket - y.bucket,
    );
    expect(got).toEqual([
      { name: '{pod="a"}', bucket: 0, bytes: bytes(cutPart) },
      { name: '{pod="a"}', bucket: 2, bytes: bytes(headPart) },
    ]);
    expect(T0s % 10).toBe(0);
  });

  test("outside the range: nothing; labels and target labels", () => {
    expect(vol({ ...req, start: T0 + 100n * S, end: T0 + 200n * S })).toEqual([]);
    expect(vol({ ...req, aggregateBy: "labels", targetLabels: ["pod"] })).toEqual([
      { name: "pod", bucket: 0, bytes: bytes([...cutPart, ...headPart]) },
    ]);
  });

  test("refusals: a bad selector, too many names (Loki's words)", () => {
    expect(() => vol({ ...req, selector: "{app=" })).toThrow(IngesterError);
    let error: unknown;
    try {
      vol({ ...req, maxSeries: 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(IngesterError);
    expect((error as IngesterError).code).toBe("too_many_series");
    expect((error as Error).message).toContain(
      "the query hit the max number of series limit (limit: 1 series)",
    );
  });

  test("past maxEntriesPerQuery (name, bucket) values: too_many_entries", () => {
    let error: unknown;
    try {
      queryVolume(streams, req, 1);
    } catch (e) {
      error = e;
    }
    expect((error as IngesterError).code).toBe("too_many_entries");
  });

  test("an aborted call stops at once", () => {
    const abort = new AbortController();
    abort.abort();
    expect(() => vol(req, { signal: abort.signal })).toThrow(IngesterError);
  });
});

describe("queryStats", () => {
  test("streams with chunks in range, their chunks, line bytes and entries", () => {
    expect(queryStats(streams, { tenant: "t", start: T0, end: T0 + 60n * S })).toEqual({
      streams: 2,
      chunks: 3,
      bytes: bytes([...cutPart, ...headPart, ...webPart]),
      entries: cutPart.length + headPart.length + webPart.length,
    });
    // Only the head of api/a overlaps [15 s, 60 s].
    expect(
      queryStats(streams, {
        tenant: "t",
        selector: '{app="api"}',
        start: T0 + 15n * S,
        end: T0 + 60n * S,
      }),
    ).toEqual({ streams: 1, chunks: 1, bytes: bytes(headPart), entries: headPart.length });
  });
});
