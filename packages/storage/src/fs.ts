import { createHash, randomBytes } from "node:crypto";
import { closeSync, fstatSync, openSync, readFileSync, readSync, type Stats } from "node:fs";
import { mkdir, open, readFile, readdir, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import { StorageError } from "./errors.js";
import {
  TEMP_PREFIX,
  compareUtf8,
  prefixCanMatch,
  validateKey,
  validatePrefix,
  validateRange,
} from "./keys.js";
import type {
  CallOptions,
  ListedObject,
  ObjectInfo,
  ObjectStore,
  ObjectTail,
  TaggedObject,
  WriteCondition,
} from "./store.js";

/** How an {@link FsObjectStore} reads. */
export interface FsObjectStoreOptions {
  /**
   * Reads (`get`, `getRange`) with blocking calls, for a thread that serves one request at
   * a time (a query worker), where nothing else waits while it reads. Through the thread
   * pool each step of a read (open, stat, read, close) is a round trip: a 220 KB chunk in
   * the page cache took 0.25-0.56 ms that way and 0.09-0.13 ms with one blocking call, on
   * this 2-core machine. Never on a thread that serves many requests (a read from a slow
   * disk would stall them all).
   */
  readonly blockingReads?: boolean;
}

/**
 * An {@link ObjectStore} in a directory: key `a/b/c` is the file `<root>/a/b/c`. The single
 * process's default store, under its data directory.
 *
 * A put writes a temporary file in the target's directory, fsyncs it, renames it over the
 * target and fsyncs the directory (and any directories it had to create), so after a crash
 * the key holds the old object or the new one, and a put that returned survives the crash.
 * Deleting leaves empty directories behind: removing them would race with a concurrent put
 * into the same directory. A key that is a directory prefix of another key (`a` and `a/b`)
 * cannot exist on a file system; such a put fails with `key_conflict`.
 *
 * A call's `signal` is checked before each step (a read in progress in the kernel cannot
 * be cancelled); an aborted call fails with `aborted`. Local files have no deadline of
 * their own: `timeoutMs` is ignored.
 */
export class FsObjectStore implements ObjectStore {
  /** Absolute root directory; created on the first put. */
  readonly root: string;
  private readonly blockingReads: boolean;

  constructor(root: string, options: FsObjectStoreOptions = {}) {
    this.root = resolve(root);
    this.blockingReads = options.blockingReads === true;
  }

  async get(key: string, options?: CallOptions): Promise<Uint8Array> {
    const path = this.pathOf(key);
    checkSignal(options, "get", key);
    try {
      if (this.blockingReads) return readFileSync(path);
      return await readFile(path, { signal: options?.signal });
    } catch (err) {
      throw this.readError(err, key);
    }
  }

  async getRange(
    key: string,
    offset: number,
    length: number,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    validateRange(offset, length);
    const span = (st: Stats): Span => ({ offset, length: rangeLength(key, st, offset, length) });
    return (await this.readSpan(key, span, "get range of", options, { offset, length })).data;
  }

  async getTail(key: string, length: number, options?: CallOptions): Promise<ObjectTail> {
    validateRange(0, length);
    const span = (st: Stats): Span => {
      if (!st.isFile()) throw new StorageError("not_found", key);
      const n = Math.min(length, st.size);
      return { offset: st.size - n, length: n };
    };
    return this.readSpan(key, span, "get tail of", options);
  }

  /**
   * Reads the span `span` picks from the file's stats; answers it and the file's size.
   * With `known` (a range read: the span is the caller's), the file is read without its
   * stats, which are asked only when the read comes up short (a range past the end, which
   * `span` then refuses or cuts), and the size answered is then unknown (-1). Each step is
   * a thread-pool round trip (~60-100 µs on this 2-core machine), so a range read takes
   * two, open and read, and the close is not waited for.
   */
  private async readSpan(
    key: string,
    span: (st: Stats) => Span,
    what: string,
    options: CallOptions | undefined,
    known?: Span,
  ): Promise<ObjectTail> {
    const path = this.pathOf(key);
    checkSignal(options, what, key);
    if (this.blockingReads) return this.readSpanBlocking(key, path, span);
    let fh;
    try {
      fh = await open(path, "r");
    } catch (err) {
      throw this.readError(err, key);
    }
    try {
      const st = known === undefined ? await fh.stat() : undefined;
      const { offset, length: n } = known ?? span(st!);
      const out = Buffer.allocUnsafe(n);
      let got = 0;
      while (got < n) {
        checkSignal(options, what, key);
        const { bytesRead } = await fh.read(out, got, n - got, offset + got);
        if (bytesRead === 0) break; // at the end (a range past it; a file cannot shrink)
        got += bytesRead;
      }
      // Short: the stats say whether the range was past the end (refused) or ran into it.
      if ((got < n || n === 0) && st === undefined) span(await fh.stat());
      return { data: got === n ? out : out.subarray(0, got), size: st?.size ?? -1 };
    } catch (err) {
      throw this.readError(err, key);
    } finally {
      fh.close().catch(() => undefined); // a read-only descriptor: nothing to learn from it
    }
  }

  /** {@link readSpan} with blocking calls (see {@link FsObjectStoreOptions.blockingReads}). */
  private readSpanBlocking(key: string, path: string, span: (st: Stats) => Span): ObjectTail {
    let fd;
    try {
      fd = openSync(path, "r");
    } catch (err) {
      throw this.readError(err, key);
    }
    try {
      const st = fstatSync(fd);
      const { offset, length: n } = span(st);
      const out = Buffer.allocUnsafe(n);
      let got = 0;
      while (got < n) {
        const read = readSync(fd, out, got, n - got, offset + got);
        if (read === 0) break; // shrank under us: cannot happen with atomic puts
        got += read;
      }
      return { data: got === n ? out : out.subarray(0, got), size: st.size };
    } catch (err) {
      throw this.readError(err, key);
    } finally {
      closeSync(fd);
    }
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo> {
    const path = this.pathOf(key);
    checkSignal(options, "head", key);
    try {
      const st = await stat(path);
      if (!st.isFile()) throw new StorageError("not_found", key);
      return { size: st.size };
    } catch (err) {
      throw this.readError(err, key);
    }
  }

  async getTagged(key: string, options?: CallOptions): Promise<TaggedObject> {
    const data = await this.get(key, options);
    return { data, etag: etagOf(data) };
  }

  async put(key: string, data: Uint8Array, options?: CallOptions): Promise<void> {
    const path = this.pathOf(key);
    checkSignal(options, "put", key);
    await this.write(key, path, await this.makeParents(key, path), data, options);
  }

  async putIf(
    key: string,
    data: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions,
  ): Promise<string> {
    const path = this.pathOf(key);
    checkSignal(options, "put", key);
    const created = await this.makeParents(key, path);
    const release = await lockKey(path, key, options);
    try {
      let current: string | undefined;
      try {
        current = etagOf(await readFile(path));
      } catch (err) {
        if (!hasCode(err, "ENOENT")) throw this.readError(err, key);
      }
      const holds = "ifMatch" in condition ? current === condition.ifMatch : current === undefined;
      if (!holds) throw new StorageError("precondition_failed", key);
      await this.write(key, path, created, data, options);
      return etagOf(data);
    } finally {
      await release();
    }
  }

  /** Creates the directories of `path`; returns the first one created, if any. */
  private async makeParents(key: string, path: string): Promise<string | undefined> {
    try {
      return await mkdir(dirname(path), { recursive: true });
    } catch (err) {
      if (hasCode(err, "ENOTDIR", "EEXIST")) {
        throw new StorageError("key_conflict", `a parent of ${key} is an object`, { cause: err });
      }
      throw backend(`mkdir for ${key}`, err);
    }
  }

  /** Writes `path` through a synced temporary file and a rename (see the class comment). */
  private async write(
    key: string,
    path: string,
    created: string | undefined,
    data: Uint8Array,
    options: CallOptions | undefined,
  ): Promise<void> {
    const dir = dirname(path);
    const tmp = join(dir, TEMP_PREFIX + randomBytes(8).toString("hex"));
    try {
      const fh = await open(tmp, "wx", 0o644);
      try {
        await fh.writeFile(data);
        await fh.sync();
      } finally {
        await fh.close();
      }
      // Last look before the object becomes visible: an aborted put leaves nothing.
      checkSignal(options, "put", key);
      await rename(tmp, path);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      if (err instanceof StorageError) throw err;
      if (hasCode(err, "EISDIR", "ENOTEMPTY", "EEXIST")) {
        throw new StorageError("key_conflict", `${key} is a prefix of other keys`, { cause: err });
      }
      throw backend(`put ${key}`, err);
    }
    // The rename is durable once its directory is synced; new directories need their
    // parents synced too, from the first one created down to the target's directory.
    try {
      await fsyncDir(dir);
      if (created !== undefined) {
        for (let d = dir; d !== dirname(created); d = dirname(d)) await fsyncDir(dirname(d));
      }
    } catch (err) {
      throw backend(`fsync directory of ${key}`, err);
    }
  }

  async list(prefix: string, options?: CallOptions): Promise<string[]> {
    return (await this.walk(prefix, options, false)).map((o) => o.key);
  }

  async listInfo(prefix: string, options?: CallOptions): Promise<ListedObject[]> {
    return this.walk(prefix, options, true);
  }

  async listPrefixes(prefix: string, options?: CallOptions): Promise<string[]> {
    const at = this.locate(prefix, options);
    if (at === undefined) return [];
    let entries;
    try {
      entries = await readdir(at.dir, { withFileTypes: true });
    } catch (err) {
      if (hasCode(err, "ENOENT", "ENOTDIR")) return [];
      throw backend(`list ${prefix}`, err);
    }
    const out: string[] = [];
    for (const e of entries) {
      if (!e.isDirectory() || e.name.startsWith(TEMP_PREFIX) || !e.name.startsWith(at.rest)) {
        continue;
      }
      const key = at.dirKey === "" ? e.name : `${at.dirKey}/${e.name}`;
      // A directory is a prefix only while it holds an object (S3 has no empty ones).
      if ((await this.walk(`${key}/`, options, false, 1)).length > 0) out.push(`${key}/`);
    }
    return out.sort(compareUtf8);
  }

  /**
   * Where `prefix` lists from: the directory of its complete segments and the start of
   * the names under it; undefined when no valid key can start with it (and it must not be
   * joined: `..` would leave the root).
   */
  private locate(
    prefix: string,
    options: CallOptions | undefined,
  ): { dir: string; dirKey: string; rest: string } | undefined {
    validatePrefix(prefix);
    checkSignal(options, "list", prefix);
    if (!prefixCanMatch(prefix)) return undefined;
    const slash = prefix.lastIndexOf("/");
    const dirKey = slash >= 0 ? prefix.slice(0, slash) : "";
    const rest = prefix.slice(slash + 1);
    const dir = join(this.root, ...(dirKey === "" ? [] : dirKey.split("/")));
    return { dir, dirKey, rest };
  }

  /**
   * The files under `prefix`, sorted by key; stat'ed only when `info` is asked for; the
   * first `limit` found (in no order) when given.
   */
  private async walk(
    prefix: string,
    options: CallOptions | undefined,
    info: boolean,
    limit = Infinity,
  ): Promise<ListedObject[]> {
    const at = this.locate(prefix, options);
    if (at === undefined) return [];
    const out: ListedObject[] = [];
    // Explicit stack rather than recursion: depth is bounded by the key length anyway.
    const stack: { dir: string; key: string; filter: string }[] = [
      { dir: at.dir, key: at.dirKey, filter: at.rest },
    ];
    for (let top = stack.pop(); top !== undefined && out.length < limit; top = stack.pop()) {
      checkSignal(options, "list", prefix);
      let entries;
      try {
        entries = await readdir(top.dir, { withFileTypes: true });
      } catch (err) {
        if (hasCode(err, "ENOENT", "ENOTDIR")) continue; // nothing there, or deleted meanwhile
        throw backend(`list ${prefix}`, err);
      }
      for (const e of entries) {
        if (e.name.startsWith(TEMP_PREFIX) || !e.name.startsWith(top.filter)) continue;
        const key = top.key === "" ? e.name : `${top.key}/${e.name}`;
        if (e.isDirectory()) stack.push({ dir: join(top.dir, e.name), key, filter: "" });
        else if (!e.isFile()) continue;
        else if (!info) out.push({ key, size: 0, lastModifiedMs: 0 });
        else {
          const st = await stat(join(top.dir, e.name)).catch((err: unknown) => {
            if (hasCode(err, "ENOENT")) return undefined; // deleted meanwhile
            throw backend(`list ${prefix}`, err);
          });
          if (st !== undefined) out.push({ key, size: st.size, lastModifiedMs: st.mtimeMs });
        }
      }
    }
    return out.sort((a, b) => compareUtf8(a.key, b.key));
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    const path = this.pathOf(key);
    checkSignal(options, "delete", key);
    try {
      await unlink(path);
    } catch (err) {
      // Missing, a parent is a file, or a directory (no object by that key): nothing to do.
      if (hasCode(err, "ENOENT", "ENOTDIR", "EISDIR", "EPERM")) return;
      throw backend(`delete ${key}`, err);
    }
  }

  /** The file of a validated key; the prefix check is a second guard behind validateKey. */
  private pathOf(key: string): string {
    validateKey(key);
    const path = join(this.root, ...key.split("/"));
    if (!path.startsWith(this.root + sep)) throw new StorageError("invalid_key", key);
    return path;
  }

  private readError(err: unknown, key: string): StorageError {
    if (err instanceof StorageError) return err;
    if (hasCode(err, "ENOENT", "ENOTDIR", "EISDIR")) {
      return new StorageError("not_found", key, { cause: err });
    }
    if (err instanceof Error && err.name === "AbortError") {
      return new StorageError("aborted", `read ${key}`, { cause: err });
    }
    return backend(`read ${key}`, err);
  }
}

/** Where a read starts and how many bytes it takes. */
interface Span {
  readonly offset: number;
  readonly length: number;
}

/** The bytes a range read of `key` returns; refuses a directory and an offset past the end. */
function rangeLength(key: string, st: Stats, offset: number, length: number): number {
  if (!st.isFile()) throw new StorageError("not_found", key);
  if (offset > st.size) {
    throw new StorageError("invalid_range", `offset ${offset} past the end (${st.size}) of ${key}`);
  }
  return Math.min(length, st.size - offset);
}

// A full disk, too many open files or a busy device can clear up; a permission cannot.
const RETRIABLE_CODES = ["ENOSPC", "EIO", "EMFILE", "ENFILE", "EAGAIN", "EBUSY"];

/** A `backend` error for a failed file call, retriable when the failure can clear up. */
function backend(detail: string, err: unknown): StorageError {
  return new StorageError("backend", detail, {
    cause: err,
    retriable: hasCode(err, ...RETRIABLE_CODES),
  });
}

/** The file store's entity tag: the MD5 of the bytes, quoted, as S3 tags a simple put. */
function etagOf(data: Uint8Array): string {
  return `"${createHash("md5").update(data).digest("hex")}"`;
}

/** How long a lock file may stand before it is taken for a crashed holder's and removed. */
const STALE_LOCK_MS = 10_000;
/** The longest a conditional write waits for its key's lock before failing (retriable). */
const LOCK_WAIT_MS = 5_000;

/**
 * Takes the per-key lock of a conditional write: a file created with O_EXCL beside the
 * object, under the temporary prefix so that lists skip it and no key can name it. Held
 * for one read and one write; a lock older than {@link STALE_LOCK_MS} is a crashed
 * holder's and is removed. Written here because no file-locking library in the ecosystem
 * is both cross-process and free of native code; a store that needs more than one writer
 * per key across machines is S3.
 */
async function lockKey(
  path: string,
  key: string,
  options: CallOptions | undefined,
): Promise<() => Promise<void>> {
  const name = createHash("sha1").update(basename(path)).digest("hex").slice(0, 20);
  const lock = join(dirname(path), `${TEMP_PREFIX}lock-${name}`);
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
    checkSignal(options, "put", key);
    try {
      await (await open(lock, "wx", 0o644)).close();
      return () => unlink(lock).catch(() => undefined);
    } catch (err) {
      if (!hasCode(err, "EEXIST")) throw backend(`lock ${key}`, err);
    }
    const st = await stat(lock).catch(() => undefined);
    if (st !== undefined && Date.now() - st.mtimeMs > STALE_LOCK_MS) {
      await unlink(lock).catch(() => undefined);
      continue;
    }
    if (Date.now() > deadline) {
      throw new StorageError("backend", `${key} stayed locked by another writer`, {
        retriable: true,
      });
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}

/** Throws `aborted` when the call's signal has ended it. */
function checkSignal(options: CallOptions | undefined, op: string, key: string): void {
  const signal = options?.signal;
  if (signal?.aborted === true) {
    throw new StorageError("aborted", `${op} ${key}`, { cause: signal.reason });
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function hasCode(err: unknown, ...codes: string[]): boolean {
  return (
    typeof err === "object" &&
    err !== null &&
    "code" in err &&
    typeof err.code === "string" &&
    codes.includes(err.code)
  );
}
