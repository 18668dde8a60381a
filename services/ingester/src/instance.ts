/**
 * One tenant's streams (Loki's per-tenant `instance`, `pkg/ingester/instance.go`): the
 * index a query reads instead of every stream in memory, and where a tenant's streams are
 * made with its bloom settings. Loki keeps one instance per tenant; here each owned
 * partition keeps one per tenant with streams in it (partitions.ts), because a partition
 * is what is assigned, flushed, committed and revoked: its instances go with it, and a
 * query reads the tenant's instances partition by partition, in the order answers have
 * always had.
 */
import { SeriesBloomBuilder } from "@sieve/index";
import type { QueueRecord } from "@sieve/proto";
import { tenantBlooms } from "./config.js";
import type { IngesterConfig, TenantBloomConfig } from "./config.js";
import { Stream } from "./stream.js";
import type { StreamContext } from "./stream.js";

/** What an instance needs: a stream's context, and the configuration its tenant's blooms come from. */
export interface InstanceContext extends StreamContext {
  readonly config: IngesterConfig;
}

/** One tenant's streams in one partition, by stream key (`streamKey`), in creation order. */
export class Instance {
  private readonly streams = new Map<string, Stream>();
  private readonly blooms: TenantBloomConfig;

  constructor(
    readonly tenant: string,
    private readonly ctx: InstanceContext,
  ) {
    this.blooms = tenantBlooms(ctx.config, tenant);
  }

  /** Whether the tenant's lines are learned into patterns (patterns.ts). */
  get patternsEnabled(): boolean {
    return this.blooms.patternsEnabled;
  }

  /** Streams held. */
  get size(): number {
    return this.streams.size;
  }

  /** The tenant's streams, oldest first. */
  all(): IterableIterator<Stream> {
    return this.streams.values();
  }

  /** Makes and indexes the stream of `record` (of this tenant), with the tenant's blooms. */
  create(key: string, record: Pick<QueueRecord, "labels" | "fingerprint">): Stream {
    const b = this.blooms;
    const bloom = b.bloomsEnabled
      ? new SeriesBloomBuilder({
          maxBloomBytes: this.ctx.config.maxBloomBytes,
          filter: { fp: b.falsePositiveRate },
          layout: b.filterLayout,
          metadataTokens: { keys: b.keyTokens, values: b.keyValueTokens },
          prefixed: b.prefixedTokens,
          ...(b.ngramLength > 0 && { ngrams: { length: b.ngramLength, skip: b.ngramSkip } }),
        })
      : undefined;
    const s = new Stream(key, this.tenant, record.labels, record.fingerprint, bloom, this.ctx);
    this.streams.set(key, s);
    return s;
  }

  /** Drops a stream from the index. */
  delete(key: string): void {
    this.streams.delete(key);
  }
}
