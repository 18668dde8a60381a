/**
 * Test data written the way an ingester flush writes it, with the real libraries: chunk
 * objects (`@sieve/chunk`), one bloom block per flush (`@sieve/index` SeriesBloomBuilder,
 * encodeBloomBlock) and one index segment per day (encodeSegment), into a real
 * FsObjectStore. Plus an in-process IngesterQuerier over real ChunkBuilder heads.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChunkBuilder, ChunkReader, chunkKey, encodeChunk, type Entry } from "@sieve/chunk";
import {
  SeriesBloomBuilder,
  encodeBloomBlock,
  encodeSegment,
  segmentKey,
  segmentsForFlush,
  type BloomBlockInput,
  type MissingReason,
  type NgramOptions,
  type SegmentSeries,
  VolumeAccumulator,
} from "@sieve/index";
import { fingerprint, labelsFromObject, labelsString } from "@sieve/labels";
import { SamplePlan, compilePipeline, matchesLabels, parseSyntax } from "@sieve/logql";
import { FsObjectStore, type ObjectStore } from "@sieve/storage";
import type {
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterSeries,
  IngesterSeriesRequest,
  IngesterStats,
  IngesterStatsRequest,
  IngesterSamplePart,
  IngesterSampleRequest,
  IngesterStream,
  IngesterVolume,
  IngesterVolumeRequest,
  PatternSeries,
} from "@sieve/proto";

/** A stream to write: its labels and entries (any order). */
export interface TestStream {
  labels: Record<string, string>;
  entries: Entry[];
}

/** A temporary FsObjectStore, removed by `close`. */
export async function tempStore(): Promise<{ store: FsObjectStore; close: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "sieve-querier-"));
  return { store: new FsObjectStore(dir), close: () => rm(dir, { recursive: true, force: true }) };
}

/** The canonical label string and fingerprint of a label object. */
export function identity(labels: Record<string, string>): { canonical: string; fp: bigint } {
  const canonical = labelsString(labelsFromObject(labels));
  return { canonical, fp: fingerprint(canonical) };
}

let flushes = 0;

/** What a flush writes besides its streams' own blooms. */
export interface FlushOptions {
  /** No bloom block: every series' bloom is recorded missing for this reason. */
  readonly missing?: MissingReason;
  /**
   * Tokens added to the bloom of chunk `chunk` of stream `stream` that none of its entries
   * hold (metadata pairs, a line's n-grams): a forced false positive.
   */
  readonly ghost?: {
    readonly stream: number;
    readonly chunk: number;
    readonly pairs?: readonly { name: string; value: string }[];
    readonly line?: string;
  };
}

/** The key of the bloom block flush number `flush` of `tenant` writes. */
export function bloomBlockKey(tenant: string, flush: number): string {
  return `${tenant}/blooms/test-${flush}`;
}

/** How many flushes {@link writeFlush} has written (the last one's number). */
export function flushCount(): number {
  return flushes;
}

/**
 * Writes `streams` as one flush: each stream cut into chunks of `entriesPerChunk` entries
 * (in time order), chunk objects first, then one bloom block, then the day segments.
 * Answers the number of chunks written.
 */
export async function writeFlush(
  store: Pick<ObjectStore, "put">,
  tenant: string,
  streams: readonly TestStream[],
  entriesPerChunk: number,
  blockTargetBytes = 512,
  ngrams?: NgramOptions,
  options: FlushOptions = {},
): Promise<number> {
  const flush = ++flushes;
  const { ghost } = options;
  const blooms: BloomBlockInput[] = [];
  const series: Omit<SegmentSeries, "bloom">[] = [];
  let written = 0;
  for (const [si, s] of streams.entries()) {
    const { canonical, fp } = identity(s.labels);
    const sorted = [...s.entries].sort((a, b) =>
      a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0,
    );
    const bloom = new SeriesBloomBuilder(ngrams === undefined ? {} : { ngrams });
    const chunks = [];
    for (let i = 0; i < sorted.length; i += entriesPerChunk) {
      const part = sorted.slice(i, i + entriesPerChunk);
      for (const e of part) bloom.add(e.structuredMetadata, e.line);
      if (ghost?.stream === si && ghost.chunk === chunks.length) {
        bloom.add(ghost.pairs ?? [], ghost.line ?? "");
      }
      const encoded = encodeChunk(part, { blockTargetBytes });
      const ref = { tenant, fingerprint: fp, ...pick(encoded) };
      await store.put(chunkKey(ref), encoded.bytes);
      written++;
      bloom.cut(pick(encoded));
      chunks.push({
        ...pick(encoded),
        bytes: encoded.bytes.byteLength,
        entries: encoded.entryCount,
        lineBytes: encoded.lineBytes,
      });
    }
    if (options.missing !== undefined) {
      series.push({
        fingerprint: fp,
        labels: canonical,
        chunks: chunks.map((c) => ({ ...c, prefixed: false })),
      });
      continue;
    }
    const finished = bloom.finish();
    if (finished === undefined || finished.status !== "ok") throw new Error("no bloom");
    const { filter, metadataTokens } = finished;
    blooms.push({ fingerprint: fp, filter, chunks: finished.chunks, ngrams, metadataTokens });
    series.push({
      fingerprint: fp,
      labels: canonical,
      chunks: chunks.map((c, i) => ({ ...c, prefixed: finished.chunks[i]!.prefixed })),
    });
  }
  const { missing } = options;
  let withBlooms: SegmentSeries[];
  if (missing !== undefined) {
    withBlooms = series.map((s) => ({ ...s, bloom: { kind: "missing", reason: missing } }));
  } else {
    const block = encodeBloomBlock(blooms);
    const blockKey = bloomBlockKey(tenant, flush);
    await store.put(blockKey, block.bytes);
    withBlooms = series.map((s) => {
      const entry = block.entries.find((e) => e.fingerprint === s.fingerprint)!;
      return {
        ...s,
        bloom: { kind: "block", key: blockKey, offset: entry.offset, length: entry.length, ngrams },
      };
    });
  }
  for (const segment of segmentsForFlush(tenant, withBlooms)) {
    const id = `${String(flush).padStart(15, "0")}-test-00000000`;
    await store.put(segmentKey(tenant, segment.day, id), encodeSegment(segment));
  }
  return written;
}

function pick(c: { from: bigint; through: bigint; checksum: number }) {
  return { from: c.from, through: c.through, checksum: c.checksum };
}

/**
 * An in-process ingester over real ChunkBuilder heads, per tenant and stream: what the
 * contract asks of `@sieve/ingester` (tenants isolated, entries in direction, limit per
 * stream), enough to test the querier's merge and dedupe until the ingester lands.
 */
export class HeadIngester implements IngesterQuerier {
  private readonly heads = new Map<
    string,
    Map<string, { labels: Record<string, string>; head: ChunkBuilder }>
  >();

  push(tenant: string, labels: Record<string, string>, entries: readonly Entry[]): void {
    const { canonical } = identity(labels);
    let t = this.heads.get(tenant);
    if (t === undefined) {
      t = new Map<string, { labels: Record<string, string>; head: ChunkBuilder }>();
      this.heads.set(tenant, t);
    }
    let s = t.get(canonical);
    if (s === undefined) t.set(canonical, (s = { labels, head: new ChunkBuilder() }));
    for (const e of entries) s.head.append(e);
  }

  query(req: IngesterQueryRequest): Promise<IngesterStream[]> {
    const sel = parseSyntax(req.selector);
    if (sel.kind !== "log") throw new Error("not a log query");
    // As the contract asks: the query's pipeline runs here, and the limit applies after it.
    const pipeline = compilePipeline(sel.pipeline);
    const out: IngesterStream[] = [];
    for (const [canonical, { labels, head }] of this.heads.get(req.tenant) ?? []) {
      if (!matchesLabels(sel.matchers, labels) || head.entryCount === 0) continue;
      const reader = new ChunkReader(head.encode().bytes);
      const entries = [];
      for (const e of reader.entries({
        from: req.start,
        through: req.end,
        direction: req.direction,
      })) {
        const structuredMetadata = Object.fromEntries(
          e.structuredMetadata.map((p) => [p.name, p.value]),
        );
        const kept = pipeline.process({
          timestamp: e.timestamp,
          line: e.line,
          labels,
          structuredMetadata,
        });
        if (kept === null) continue;
        entries.push({
          timestamp: e.timestamp,
          line: kept.line,
          structuredMetadata,
          labels: kept.labels,
        });
        if (req.limit > 0 && entries.length === req.limit) break;
      }
      out.push({ labels: canonical, labelMap: labels, fingerprint: identity(labels).fp, entries });
    }
    return Promise.resolve(out);
  }

  series(req: IngesterSeriesRequest): Promise<IngesterSeries[]> {
    const sel = req.selector === undefined ? undefined : parseSyntax(req.selector);
    const out = [];
    for (const [canonical, { labels }] of this.heads.get(req.tenant) ?? []) {
      if (sel !== undefined && sel.kind === "log" && !matchesLabels(sel.matchers, labels)) continue;
      out.push({ labels: canonical, fingerprint: identity(labels).fp });
    }
    return Promise.resolve(out);
  }

  /** Each head as one unflushed chunk, accumulated as the ingester does (its line bytes). */
  volume(req: IngesterVolumeRequest): Promise<IngesterVolume[]> {
    const sel = req.selector === undefined ? undefined : parseSyntax(req.selector);
    const matchers = sel?.kind === "log" ? sel.matchers : [];
    const acc = new VolumeAccumulator({
      ...req,
      matcherNames: matchers.map((m) => m.name),
    });
    for (const { labels, head } of this.heads.get(req.tenant)?.values() ?? []) {
      if (!matchesLabels(matchers, labels) || head.entryCount === 0) continue;
      const pairs = Object.keys(labels)
        .sort()
        .map((name) => ({ name, value: labels[name]! }));
      const names = acc.namesOf(pairs);
      if (names !== undefined) acc.addChunk(names, head.from!, head.through!, head.lineBytes);
    }
    return Promise.resolve(acc.entries());
  }

  /** Each head as one unflushed chunk overlapping [start, end]. */
  stats(req: IngesterStatsRequest): Promise<IngesterStats> {
    const sel = req.selector === undefined ? undefined : parseSyntax(req.selector);
    const matchers = sel?.kind === "log" ? sel.matchers : [];
    const out = { streams: 0, chunks: 0, bytes: 0, entries: 0 };
    for (const { labels, head } of this.heads.get(req.tenant)?.values() ?? []) {
      if (!matchesLabels(matchers, labels) || head.entryCount === 0) continue;
      if (head.through! < req.start || head.from! > req.end) continue;
      out.streams++;
      out.chunks++;
      out.bytes += head.lineBytes;
      out.entries += head.entryCount;
    }
    return Promise.resolve(out);
  }

  /** No patterns: as an ingester whose tenants have them off (the default). */
  patterns(): Promise<PatternSeries[]> {
    return Promise.resolve([]);
  }

  /** As the contract asks: the query's range aggregations folded here, one part (the heads). */
  querySample(req: IngesterSampleRequest): Promise<IngesterSamplePart[]> {
    const expr = parseSyntax(req.query);
    if (expr.kind === "log") throw new Error("not a metric query");
    const plan = new SamplePlan(expr, { startNs: req.start, endNs: req.end, stepNs: req.step });
    const into = plan.partials();
    for (const { labels, head } of this.heads.get(req.tenant)?.values() ?? []) {
      const fold = plan.stream(labels);
      if (fold === undefined || head.entryCount === 0) continue;
      for (const e of new ChunkReader(head.encode().bytes).entries({
        from: plan.from + 1n,
        through: plan.through + 1n,
        direction: "forward",
      })) {
        const structuredMetadata = Object.fromEntries(
          e.structuredMetadata.map((p) => [p.name, p.value]),
        );
        plan.fold(into, fold, { timestamp: e.timestamp, line: e.line, structuredMetadata });
      }
    }
    return Promise.resolve([{ series: into.data() }]);
  }
}
