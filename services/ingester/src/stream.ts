/**
 * One stream in memory (Loki's `pkg/ingester/stream.go`): its open head chunk (head.ts),
 * its bloom builder, and the chunks cut from its head until their flush is durable. A
 * record's entries are appended here, and the head is cut here: when it is full (on
 * append), or when the flush scheduler (flush.ts) or a revocation says so.
 */
import { ChunkError } from "@sieve/chunk";
import type { Entry } from "@sieve/chunk";
import type { SeriesBloomBuilder } from "@sieve/index";
import { parseLabels } from "@sieve/labels";
import { QueueEntryView, type QueueRecord } from "@sieve/proto";
import type { IngesterConfig } from "./config.js";
import type { CutChunk } from "./flush.js";
import { Head } from "./head.js";
import type { FlushReason } from "./head.js";
import type { IngesterMetrics } from "./metrics.js";
import type { StreamPatterns } from "./patterns.js";

/** An entry of a record as the chunk's Entry, its line a string. */
function plainEntry(e: QueueRecord["entries"][number]): Entry {
  return { timestamp: e.timestampNs, line: e.line, structuredMetadata: e.structuredMetadata };
}

/** The key of a stream in the ingester's maps: tenant and fingerprint. */
export function streamKey(tenant: string, fingerprint: bigint): string {
  return `${tenant}\u0000${fingerprint.toString(16)}`;
}

/**
 * Memory of one bloom token kept until its chunk is cut (~20-40 bytes of UTF-8 and up to
 * ~30 of hash table in the bloom builder's token set, plus the grown arrays' spare room),
 * for {@link Stream.heldBytes}.
 */
const TOKEN_BYTES = 64;

/** What every stream shares: the head sizes it cuts at, and the counters it adds to. */
export interface StreamContext {
  readonly config: Pick<
    IngesterConfig,
    "chunkBlockBytes" | "chunkTargetBytes" | "chunkMaxUncompressedBytes"
  >;
  readonly metrics: Pick<IngesterMetrics, "entriesAppended" | "entriesDropped" | "tokensAdded">;
}

/** What {@link Stream.append} did: entries kept, and bytes cut for the next flush. */
export interface AppendResult {
  readonly appended: number;
  readonly cutBytes: number;
}

/** One stream in memory: its head, its bloom, and its cut chunks until they are flushed. */
export class Stream {
  /** Its labels by name, for matching selectors. */
  readonly labelMap: Readonly<Record<string, string>>;
  head: Head | undefined = undefined;
  /** Cut, waiting for the next flush job. */
  pending: CutChunk[] = [];
  /** In the running flush job. */
  flushing: CutChunk[] = [];
  /** Its patterns, when its tenant has them on (kept apart: they outlive the stream). */
  patterns: StreamPatterns | undefined = undefined;
  /** Bloom tokens already counted in `tokensAdded`. */
  private tokensCounted = 0;

  /** `bloom` is undefined when blooms are off for the tenant. */
  constructor(
    readonly key: string,
    readonly tenant: string,
    readonly labels: string,
    readonly fingerprint: bigint,
    readonly bloom: SeriesBloomBuilder | undefined,
    private readonly ctx: StreamContext,
  ) {
    const labelMap: Record<string, string> = {};
    try {
      for (const l of parseLabels(labels)) labelMap[l.name] = l.value;
    } catch {
      // The distributor wrote canonical labels; anything else simply matches no selector.
    }
    this.labelMap = labelMap;
  }

  /**
   * Appends the entries of the record at `offset` to the head (opened on demand), counting
   * what is appended and dropped (`duplicate`, `invalid_entry`), and cuts the head once it
   * reaches `chunkTargetBytes` compressed. Each entry appended is also pushed to
   * `appendedOut` when given (for the tails, tail.ts: duplicates are not appended).
   */
  append(
    entries: QueueRecord["entries"],
    offset: number,
    nowMs: number,
    appendedOut?: Entry[],
  ): AppendResult {
    const { config, metrics } = this.ctx;
    const patterns = this.patterns;
    let appended = 0;
    let cutBytes = 0;
    const bloom = this.bloom;
    const ngrams = bloom?.readsLines === true;
    for (const e of entries) {
      // A record's view is appended as it is: the head copies its line's bytes, and only
      // what needs the text (n-grams, patterns, tails) decodes it.
      const entry: Entry = e instanceof QueueEntryView ? e : plainEntry(e);
      this.head ??= new Head(config.chunkBlockBytes, nowMs);
      let ok: boolean;
      try {
        ok = this.head.append(entry, offset, nowMs);
      } catch (error) {
        if (
          !(error instanceof ChunkError && error.code === "too_large") ||
          this.head.entryCount === 0
        ) {
          metrics.entriesDropped.inc({ reason: "invalid_entry" });
          continue;
        }
        // The symbol table is full: cut here. The cut chunk claims only the records before
        // this one, so a replay re-reads this record whole (at-least-once for this rare case).
        cutBytes += this.cut("full", offset - 1);
        this.head = new Head(config.chunkBlockBytes, nowMs);
        try {
          ok = this.head.append(entry, offset, nowMs);
        } catch {
          metrics.entriesDropped.inc({ reason: "invalid_entry" });
          continue;
        }
      }
      if (!ok) {
        metrics.entriesDropped.inc({ reason: "duplicate" });
        continue;
      }
      appended++;
      // A plain copy: a view would hold its record's bytes.
      appendedOut?.push(e instanceof QueueEntryView ? plainEntry(e) : entry);
      // By the ids the head just interned: repeated metadata costs no string work.
      const builder = this.head.builder;
      bloom?.addInterned(builder.lastEntryIds, builder.symbolList, ngrams ? entry.line : undefined);
      patterns?.train(e.line, e.timestampNs, e.structuredMetadata, nowMs);
    }
    metrics.entriesAppended.inc(appended);
    const builder = this.head?.builder;
    if (
      builder !== undefined &&
      (builder.compressedBytesEstimate >= config.chunkTargetBytes ||
        builder.uncompressedBytes >= config.chunkMaxUncompressedBytes)
    ) {
      cutBytes += this.cut("full");
    }
    return { appended, cutBytes };
  }

  /**
   * What the head holds in memory, estimated: its uncompressed bytes (cut blocks are held
   * compressed, so this errs high; the open block is held as its bytes, near exact; the
   * symbol table is not counted) and the distinct bloom tokens it holds, at {@link TOKEN_BYTES} each (a line's
   * n-grams repeat from line to line: counting every token made would cut heads early).
   */
  get heldBytes(): number {
    if (this.head === undefined) return 0;
    const tokens = this.bloom?.heldTokens ?? 0;
    return this.head.builder.uncompressedBytes + tokens * TOKEN_BYTES;
  }

  /**
   * Cuts the head: encodes it, closes its bloom chunk, and queues it for the next flush of
   * its partition. `lastOffset` lowers the offset the chunk claims (see {@link append}).
   * Returns the bytes queued (0 when there was no head, or an empty one).
   */
  cut(reason: FlushReason, lastOffset?: number): number {
    const head = this.head;
    if (head === undefined) return 0;
    this.head = undefined;
    if (head.entryCount === 0) return 0;
    const encoded = head.encode();
    this.bloom?.cut({ from: encoded.from, through: encoded.through, checksum: encoded.checksum });
    if (this.bloom !== undefined) {
      this.ctx.metrics.tokensAdded.inc(this.bloom.stats.tokens - this.tokensCounted);
      this.tokensCounted = this.bloom.stats.tokens;
    }
    this.pending.push({
      encoded,
      firstOffset: head.firstOffset,
      lastOffset: lastOffset ?? head.lastOffset,
      reason,
    });
    return encoded.bytes.length;
  }

  /**
   * True when the stream holds nothing (no entry in a head, no chunk cut or flushing), so
   * it may go: its next record builds it again. Drops an empty head first.
   */
  releasable(): boolean {
    if (this.head !== undefined && this.head.entryCount === 0) this.head = undefined;
    return this.head === undefined && this.pending.length === 0 && this.flushing.length === 0;
  }
}
