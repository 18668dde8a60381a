/**
 * The local write-ahead log: the queue of the single-process deployment. One directory
 * holds a sub-directory per partition (see partition.ts), the consumer's committed
 * offsets and a lock file naming the process that has it open.
 */
import { mkdir, open, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { deferred } from "../deferred.js";
import { QueueError } from "../errors.js";
import { DeliveryReporter } from "../retry.js";
import type {
  ConsumedBatch,
  ConsumedRecord,
  DeliveryFailure,
  DeliveryStage,
  OutgoingRecord,
  PartitionListener,
  QueueConsumer,
  QueuePosition,
  QueueWriter,
} from "../queue.js";
import { PartitionCursor } from "./cursor.js";
import { replaceFileAtomically } from "./files.js";
import { decodeOffsets, encodeOffsets, MAX_BODY_BYTES, MAX_KEY_BYTES } from "./format.js";
import { PartitionLog } from "./partition.js";
import type { PartitionItem, WalStats } from "./partition.js";

/** Options of {@link openWal}. Sizes in bytes. */
export interface WalOptions {
  /** Directory of the log; created if missing. */
  readonly dir: string;
  /** Partition count; fixed when the directory is created. */
  readonly partitions: number;
  /** A segment is sealed and a new one started once it would grow past this. Default 64 MiB. */
  readonly segmentBytes?: number;
  /**
   * Once every record of a partition is committed, its active segment is sealed and
   * deleted if it holds at least this many bytes. Default 1 MiB.
   */
  readonly retireBytes?: number;
  /** Largest key + value accepted by `append`. Default 8 MiB. */
  readonly maxRecordBytes?: number;
  /** Bytes read from a segment at a time by recovery and the consumer. Default 1 MiB. */
  readonly readChunkBytes?: number;
  /** Most records in one consumed batch. Default 1000. */
  readonly maxBatchRecords?: number;
  /** A consumed batch stops once it holds this many key+value bytes. Default 4 MiB. */
  readonly maxBatchBytes?: number;
  /**
   * First wait before the consumer retries a failed handler or `assigned` (doubling, with
   * jitter, up to 5 s). Default 100 ms.
   */
  readonly retryBackoffMs?: number;
  /** Told about every handler failure and every unreadable partition (as is the listener's `failed`). */
  readonly onError?: (error: unknown, partition: number) => void;
}

const DEFAULTS = {
  segmentBytes: 64 * 1024 * 1024,
  retireBytes: 1024 * 1024,
  maxRecordBytes: 8 * 1024 * 1024,
  readChunkBytes: 1024 * 1024,
  maxBatchRecords: 1000,
  maxBatchBytes: 4 * 1024 * 1024,
  retryBackoffMs: 100,
};
const MAX_PARTITIONS = 4096;
const MAX_RETRY_BACKOFF_MS = 5000;

type ResolvedOptions = typeof DEFAULTS & {
  readonly dir: string;
  readonly partitions: number;
  readonly onError: ((error: unknown, partition: number) => void) | undefined;
};

function resolveOptions(options: WalOptions): ResolvedOptions {
  const o: ResolvedOptions = {
    dir: resolve(options.dir),
    partitions: options.partitions,
    segmentBytes: options.segmentBytes ?? DEFAULTS.segmentBytes,
    retireBytes: options.retireBytes ?? DEFAULTS.retireBytes,
    maxRecordBytes: options.maxRecordBytes ?? DEFAULTS.maxRecordBytes,
    readChunkBytes: options.readChunkBytes ?? DEFAULTS.readChunkBytes,
    maxBatchRecords: options.maxBatchRecords ?? DEFAULTS.maxBatchRecords,
    maxBatchBytes: options.maxBatchBytes ?? DEFAULTS.maxBatchBytes,
    retryBackoffMs: options.retryBackoffMs ?? DEFAULTS.retryBackoffMs,
    onError: options.onError,
  };
  const check = (ok: boolean, what: string): void => {
    if (!ok) throw new QueueError("invalid_options", what);
  };
  const int = (v: number, min: number, max: number): boolean =>
    Number.isSafeInteger(v) && v >= min && v <= max;
  check(int(o.partitions, 1, MAX_PARTITIONS), `partitions must be 1..${MAX_PARTITIONS}`);
  check(int(o.segmentBytes, 1024, 2 ** 40), "segmentBytes must be at least 1024");
  check(int(o.retireBytes, 0, 2 ** 40), "retireBytes must be 0 or more");
  check(
    int(o.maxRecordBytes, 1, MAX_BODY_BYTES - 16),
    `maxRecordBytes must be 1..${MAX_BODY_BYTES - 16}`,
  );
  check(int(o.readChunkBytes, 64, 2 ** 30), "readChunkBytes must be 64..2^30");
  check(int(o.maxBatchRecords, 1, 2 ** 30), "maxBatchRecords must be positive");
  check(int(o.maxBatchBytes, 1, 2 ** 40), "maxBatchBytes must be positive");
  check(int(o.retryBackoffMs, 0, MAX_RETRY_BACKOFF_MS), "retryBackoffMs must be 0..5000");
  return o;
}

/** Directories open in this process, so a second `openWal` of one fails like another process's would. */
const openDirs = new Set<string>();

/** Takes the directory's lock file, or fails with `locked` if a live process holds it. */
async function lock(dir: string): Promise<void> {
  const path = join(dir, "lock");
  if (openDirs.has(dir)) throw new QueueError("locked", `${dir} is already open in this process`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fh = await open(path, "wx");
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      openDirs.add(dir);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    // A lock left by a process that died (kill -9) is stale: take it over.
    const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
    if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid)) {
      throw new QueueError("locked", `${dir} is held by process ${pid}`);
    }
    await rm(path, { force: true });
  }
  throw new QueueError("locked", `${dir}: could not take the lock file`);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A write-ahead log open in this process: its writer, its consumer and counters. */
export interface LocalWal {
  readonly writer: WalWriter;
  readonly consumer: WalConsumer;
  readonly partitions: number;
  /** Counters since open (syncs, records, bytes, recovery truncation, deletions). */
  readonly stats: Readonly<WalStats>;
  /** Offset the next record of `partition` will get. */
  endOffset(partition: number): number;
  /** Oldest offset of `partition` still on disk. */
  firstOffset(partition: number): number;
  /** Number of segment files of `partition`. */
  segmentCount(partition: number): number;
  /** Stops the consumer, waits for in-flight appends, closes files, releases the lock. */
  close(): Promise<void>;
}

/**
 * Opens (creating if needed) the write-ahead log in `options.dir`, recovering every
 * partition: torn or damaged tails are cut, so everything readable was acknowledged.
 */
export async function openWal(options: WalOptions): Promise<LocalWal> {
  const o = resolveOptions(options);
  await mkdir(o.dir, { recursive: true });
  await lock(o.dir);
  const logs: PartitionLog[] = [];
  try {
    const offsets = await OffsetsFile.open(join(o.dir, "offsets"), o.partitions);
    const stats: WalStats = {
      syncs: 0,
      appends: 0,
      records: 0,
      bytes: 0,
      truncatedBytes: 0,
      segmentsDeleted: 0,
    };
    for (let p = 0; p < o.partitions; p++) {
      const dir = join(o.dir, `partition-${p}`);
      await mkdir(dir, { recursive: true });
      logs.push(await PartitionLog.open(p, dir, offsets.committed[p]!, o, stats));
    }
    const writer = new WalWriter(logs, o.maxRecordBytes);
    const consumer = new WalConsumer(logs, offsets, o);
    return {
      writer,
      consumer,
      partitions: o.partitions,
      stats,
      endOffset: (p) => logAt(logs, p).nextOffset,
      firstOffset: (p) => logAt(logs, p).firstOffset,
      segmentCount: (p) => logAt(logs, p).segmentCount,
      async close() {
        await consumer.stop();
        await writer.close();
        await offsets.flushed();
        await Promise.all(logs.map((log) => log.close()));
        await rm(join(o.dir, "lock"), { force: true });
        openDirs.delete(o.dir);
      },
    };
  } catch (error) {
    await Promise.all(logs.map((log) => log.close()));
    await rm(join(o.dir, "lock"), { force: true });
    openDirs.delete(o.dir);
    throw error;
  }
}

function logAt(logs: readonly PartitionLog[], partition: number): PartitionLog {
  const log = Number.isInteger(partition) ? logs[partition] : undefined;
  if (log === undefined) {
    throw new QueueError("invalid_partition", `${partition} not in 0..${logs.length - 1}`);
  }
  return log;
}

/** The distributor's side of the write-ahead log. */
export class WalWriter implements QueueWriter {
  private closed = false;

  /** @internal Use {@link openWal}. */
  constructor(
    private readonly logs: readonly PartitionLog[],
    private readonly maxRecordBytes: number,
  ) {}

  get partitions(): number {
    return this.logs.length;
  }

  /**
   * Validates every record first (so a bad one writes nothing), then appends each
   * partition's records in order; resolves once all are fsynced. Records spanning
   * several partitions are durable per partition: if one partition fails, the others
   * may hold their records, which a retry then repeats (the ingester drops duplicates).
   * The caller must not change the records' bytes until the promise settles.
   */
  async append(records: readonly OutgoingRecord[]): Promise<void> {
    if (this.closed) throw new QueueError("closed");
    const byPartition = new Map<number, PartitionItem[]>();
    for (const record of records) {
      const log = logAt(this.logs, record.partition);
      if (record.key.length > MAX_KEY_BYTES) {
        throw new QueueError("record_too_large", `key of ${record.key.length} bytes`);
      }
      const size = record.key.length + record.value.length;
      if (size > this.maxRecordBytes) {
        throw new QueueError("record_too_large", `${size} bytes, maximum ${this.maxRecordBytes}`);
      }
      let items = byPartition.get(log.partition);
      if (items === undefined) byPartition.set(log.partition, (items = []));
      items.push(record);
    }
    await Promise.all([...byPartition].map(([p, items]) => this.logs[p]!.append(items)));
  }

  /** Refuses further appends; in-flight ones still complete. */
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

/** The committed offsets of every partition, in one atomically replaced file. */
class OffsetsFile {
  private queued: Promise<void> | undefined;
  private tail: Promise<void> = Promise.resolve();

  private constructor(
    private readonly path: string,
    readonly committed: number[],
  ) {}

  static async open(path: string, partitions: number): Promise<OffsetsFile> {
    let bytes: Buffer | undefined;
    try {
      bytes = await readFile(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    if (bytes === undefined) {
      const file = new OffsetsFile(path, new Array<number>(partitions).fill(0));
      await file.persist();
      return file;
    }
    const decoded = decodeOffsets(bytes);
    if (!decoded.ok) throw new QueueError(decoded.code, `offsets file ${path}`);
    if (decoded.committed.length !== partitions) {
      throw new QueueError(
        "partitions_mismatch",
        `${path} has ${decoded.committed.length} partitions, opened with ${partitions}`,
      );
    }
    return new OffsetsFile(path, decoded.committed);
  }

  /**
   * Writes the current offsets; resolves once a write that began after this call is
   * durable. Calls made while a write is waiting to start share it.
   */
  persist(): Promise<void> {
    if (this.queued !== undefined) return this.queued;
    const write = this.tail.then(() => {
      this.queued = undefined;
      return replaceFileAtomically(this.path, encodeOffsets(this.committed));
    });
    this.queued = write;
    this.tail = write.catch(() => undefined);
    return write;
  }

  /** Resolves once no write is in flight. */
  flushed(): Promise<void> {
    return this.tail;
  }
}

/**
 * The ingester's side of the write-ahead log: one loop per partition delivers batches in
 * offset order from the committed offset and sleeps on the partition's append signal
 * when caught up. A failing `assigned` or handler is retried with exponential backoff and
 * jitter while its error is retriable (see `isRetriable`); a non-retriable one, or an
 * unreadable partition, stops that partition's delivery. Every failure goes to `onError`
 * and the listener's `failed`; the first success after failures to its `recovered`.
 */
export class WalConsumer implements QueueConsumer {
  private running = false;
  private stopped = deferred();
  private abort = new AbortController();
  private loops: Promise<void>[] = [];
  private listener: PartitionListener | undefined;
  private readonly delivery = new DeliveryReporter(
    () => this.listener,
    (failure) => this.options.onError?.(failure.error, failure.partition),
  );

  /** @internal Use {@link openWal}. */
  constructor(
    private readonly logs: readonly PartitionLog[],
    private readonly offsets: OffsetsFile,
    private readonly options: ResolvedOptions,
  ) {}

  async start(
    handler: (batch: ConsumedBatch) => Promise<void>,
    listener?: PartitionListener,
  ): Promise<void> {
    if (this.running) throw new QueueError("invalid_options", "consumer already started");
    this.running = true;
    this.stopped = deferred();
    this.abort = new AbortController();
    this.listener = listener;
    const all = this.logs.map((log) => log.partition);
    const cursors: PartitionCursor[] = [];
    try {
      if (listener?.assigned !== undefined) {
        await this.attempt(all, "assigned", () => listener.assigned?.(all) ?? Promise.resolve());
      }
      for (const log of this.logs) {
        const committed = this.offsets.committed[log.partition]!;
        cursors.push(await PartitionCursor.open(log, committed, this.options));
      }
    } catch (error) {
      await Promise.all(cursors.map((cursor) => cursor.close()));
      this.running = false;
      throw error;
    }
    this.loops = cursors.map((cursor, p) => this.loop(this.logs[p]!, cursor, handler));
  }

  private async loop(
    log: PartitionLog,
    cursor: PartitionCursor,
    handler: (batch: ConsumedBatch) => Promise<void>,
  ): Promise<void> {
    const stopped = this.stopped.promise;
    const partition = log.partition;
    try {
      while (this.running) {
        let records: ConsumedRecord[];
        try {
          records = await cursor.read();
        } catch (error) {
          // A cursor that failed mid-read cannot be trusted to resume: stop the partition.
          this.report({ partition, stage: "read", error, attempt: 1, retrying: false });
          return;
        }
        if (records.length === 0) {
          await Promise.race([log.waitBeyond(cursor.nextOffset), stopped]);
          continue;
        }
        const batch: ConsumedBatch = { partition, records };
        await this.attempt([partition], "handler", () => handler(batch));
      }
    } catch {
      // Not retriable (reported by attempt), or stopped while waiting to retry.
    } finally {
      await cursor.close();
    }
  }

  /** Runs `call` for `partitions`, retrying while retriable, reporting every failure. */
  private attempt(
    partitions: readonly number[],
    stage: DeliveryStage,
    call: () => Promise<void>,
  ): Promise<void> {
    return this.delivery.attempt(partitions, stage, call, {
      minBackoffMs: this.options.retryBackoffMs,
      maxBackoffMs: MAX_RETRY_BACKOFF_MS,
      signal: this.abort.signal,
      shouldRetry: () => this.isRunning(),
    });
  }

  private report(failure: DeliveryFailure): void {
    this.delivery.report(failure);
  }

  /** Read through a method: `running` changes while a loop awaits. */
  private isRunning(): boolean {
    return this.running;
  }

  async commit(partition: number, nextOffset: number): Promise<void> {
    const log = logAt(this.logs, partition);
    const committed = this.offsets.committed[partition]!;
    if (
      !Number.isSafeInteger(nextOffset) ||
      nextOffset < committed ||
      nextOffset > log.nextOffset
    ) {
      throw new QueueError(
        "invalid_offset",
        `commit ${nextOffset} to partition ${partition}: must be ${committed}..${log.nextOffset}`,
      );
    }
    if (nextOffset === committed) return;
    this.offsets.committed[partition] = nextOffset;
    await this.offsets.persist();
    await log.release(nextOffset);
  }

  /** Every partition's: one log, one consumer, so it owns them all. */
  positions(): Promise<ReadonlyMap<number, QueuePosition>> {
    return Promise.resolve(
      new Map(
        this.logs.map((log) => [
          log.partition,
          { end: log.nextOffset, committed: this.offsets.committed[log.partition]! },
        ]),
      ),
    );
  }

  /** The committed offset of `partition`. */
  committed(partition: number): number {
    logAt(this.logs, partition);
    return this.offsets.committed[partition]!;
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.stopped.resolve();
    this.abort.abort(new QueueError("closed", "consumer stopped"));
    await Promise.all(this.loops);
    this.loops = [];
    await this.listener?.revoked?.(this.logs.map((log) => log.partition));
  }
}
