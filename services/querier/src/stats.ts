import type { FilterStats } from "@sieve/proto";

/** Stages a query's time is split into, in seconds. */
export interface StageSeconds {
  /** Listing and reading index segments, matching series. */
  index: number;
  /** The bloom gateway's pruning. */
  blooms: number;
  /** Waiting for chunk objects (store or cache). */
  fetch: number;
  /** Decoding chunks and running the pipeline / the metric evaluation. */
  eval: number;
  /** The ingesters' answer (runs beside index and blooms). */
  ingester: number;
}

/**
 * The counters of one query. Serialised as Loki's `stats` (summary, querier.store,
 * ingester, cache, index) so Grafana and logcli read what they know, plus a `sieve`
 * section with what only Sieve has: chunks pruned by blooms, bytes, time per stage.
 */
export class QueryStats {
  seriesMatched = 0;
  chunksInRange = 0;
  chunksPrunedByBlooms = 0;
  chunksFetched = 0;
  /** Fetched chunks a bloom test kept that held no entry passing it (audit.ts). */
  falsePositiveChunks = 0;
  chunkCacheHits = 0;
  bytesFetched = 0;
  bytesDecompressed = 0;
  /** Blocks of fetched chunks, in range, that their symbols showed cannot match. */
  blocksSkipped = 0;
  /** Chunks fetched whose symbol filter refused the query: read no further than their end. */
  chunksRefusedByFilter = 0;
  linesScanned = 0;
  /** Lines that passed the pipeline (before the limit). */
  linesMatched = 0;
  duplicatesDropped = 0;
  /** Store lines a delete request hides (query-time filtering, deletes.ts). */
  linesDeleted = 0;
  ingesterStreams = 0;
  ingesterLines = 0;
  ingesterBytes = 0;
  entriesReturned = 0;
  segmentsRead = 0;
  bloomsUsed = false;
  bloom: FilterStats | undefined;
  readonly stages: StageSeconds = { index: 0, blooms: 0, fetch: 0, eval: 0, ingester: 0 };

  /** Runs `fn` and adds its wall time to `stage`. */
  async time<T>(stage: keyof StageSeconds, fn: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      this.stages[stage] += (performance.now() - t0) / 1000;
    }
  }

  /** Loki's `stats` object plus `sieve`; `execSeconds` is the whole query's wall time. */
  toJSON(execSeconds: number): Record<string, unknown> {
    const totalBytes = this.bytesDecompressed + this.ingesterBytes;
    const totalLines = this.linesScanned + this.ingesterLines;
    const perSecond = (n: number) => (execSeconds > 0 ? Math.round(n / execSeconds) : 0);
    const chunkStats = (store: boolean) => ({
      headChunkBytes: store ? 0 : this.ingesterBytes,
      headChunkLines: store ? 0 : this.ingesterLines,
      decompressedBytes: store ? this.bytesDecompressed : 0,
      decompressedLines: store ? this.linesScanned : 0,
      compressedBytes: store ? this.bytesFetched : 0,
      totalDuplicates: store ? this.duplicatesDropped : 0,
      postFilterLines: store ? this.linesMatched : 0,
      headChunkStructuredMetadataBytes: 0,
      decompressedStructuredMetadataBytes: 0,
    });
    return {
      summary: {
        bytesProcessedPerSecond: perSecond(totalBytes),
        linesProcessedPerSecond: perSecond(totalLines),
        totalBytesProcessed: totalBytes,
        totalLinesProcessed: totalLines,
        execTime: execSeconds,
        queueTime: 0,
        subqueries: 0,
        totalEntriesReturned: this.entriesReturned,
        splits: 0,
        shards: 0,
        totalPostFilterLines: this.linesMatched,
        totalStructuredMetadataBytesProcessed: 0,
      },
      querier: {
        store: {
          totalChunksRef: this.chunksInRange,
          totalChunksDownloaded: this.chunksFetched,
          chunksDownloadTime: Math.round(this.stages.fetch * 1e9),
          queryReferencedStructuredMetadata: this.bloomsUsed,
          chunk: chunkStats(true),
          chunkRefsFetchTime: Math.round(this.stages.index * 1e9),
          congestionControlLatency: 0,
          pipelineWrapperFilteredLines: 0,
        },
      },
      ingester: {
        totalReached: this.ingesterStreams > 0 ? 1 : 0,
        totalChunksMatched: 0,
        totalBatches: 0,
        totalLinesSent: this.ingesterLines,
        store: { chunk: chunkStats(false) },
      },
      cache: {
        chunk: {
          entriesFound: this.chunkCacheHits,
          entriesRequested: this.chunksFetched,
          entriesStored: this.chunksFetched - this.chunkCacheHits,
          bytesReceived: 0,
          bytesSent: 0,
          requests: this.chunksFetched,
          downloadTime: 0,
        },
      },
      index: {
        totalChunks: this.chunksInRange,
        postFilterChunks: this.chunksInRange - this.chunksPrunedByBlooms,
        shardsDuration: 0,
        usedBloomFilters: this.bloomsUsed,
      },
      sieve: {
        seriesMatched: this.seriesMatched,
        segmentsRead: this.segmentsRead,
        chunksInRange: this.chunksInRange,
        chunksPrunedByBlooms: this.chunksPrunedByBlooms,
        // Of those, the chunks the query's structured-metadata tests alone would have kept.
        chunksPrunedByLineFilters: this.bloom?.chunksPrunedByLine ?? 0,
        chunksFetched: this.chunksFetched,
        falsePositiveChunks: this.falsePositiveChunks,
        chunkCacheHits: this.chunkCacheHits,
        bytesFetched: this.bytesFetched,
        bytesDecompressed: this.bytesDecompressed,
        blocksSkipped: this.blocksSkipped,
        chunksRefusedByFilter: this.chunksRefusedByFilter,
        linesScanned: this.linesScanned,
        linesMatched: this.linesMatched,
        duplicatesDropped: this.duplicatesDropped,
        linesDeleted: this.linesDeleted,
        ingesterLines: this.ingesterLines,
        bloomGateway: this.bloom ?? null,
        stageSeconds: { ...this.stages },
      },
    };
  }
}
