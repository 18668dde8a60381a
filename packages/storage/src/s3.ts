import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import type { S3ClientConfig } from "@aws-sdk/client-s3";
import { deadlineSignal, settleBy } from "@sieve/kit";
import { StorageError } from "./errors.js";
import { compareUtf8, prefixCanMatch, validateKey, validatePrefix, validateRange } from "./keys.js";
import type {
  CallOptions,
  ListedObject,
  ObjectInfo,
  ObjectTail,
  ObjectStore,
  TaggedObject,
  WriteCondition,
} from "./store.js";

/** Options of {@link S3ObjectStore}; units are in the names. */
export interface S3ObjectStoreConfig {
  /** Bucket holding the objects; it must exist. */
  bucket: string;
  /** Region; default: the SDK's chain (`AWS_REGION`, then the shared config file). */
  region?: string;
  /** Endpoint URL for MinIO and other S3-compatible stores, e.g. `http://127.0.0.1:9000`. */
  endpoint?: string;
  /** Path-style addressing (`host/bucket/key`), which MinIO needs; default false. */
  forcePathStyle?: boolean;
  /**
   * Credentials; default: the SDK's standard chain (environment, shared files, SSO, web
   * identity, container and instance metadata).
   */
  credentials?: S3ClientConfig["credentials"];
  /** Longest wait for a TCP connection, per attempt, ms; default 2,000. */
  connectTimeoutMs?: number;
  /**
   * Longest wait for the first byte of an answer, per attempt, ms; default 60,000. The
   * call's deadline (`readTimeoutMs`, `writeTimeoutMs`) ends the call sooner.
   */
  requestTimeoutMs?: number;
  /**
   * Deadline of a whole read (get, getRange, head, list), every attempt and backoff
   * included, ms; default 5,000. Reads serve queries, which should fail fast with a 503
   * while the store is down or frozen rather than hang.
   */
  readTimeoutMs?: number;
  /**
   * Deadline of a whole write (put, delete), ms; default 30,000. Writes serve flushes,
   * whose caller (the ingester) retries a failed flush itself.
   */
  writeTimeoutMs?: number;
  /**
   * Attempts per call including the first, default 3. The SDK's standard retry strategy
   * retries only retriable failures (throttling, 5xx, timeouts, connection errors), with
   * exponential backoff and full jitter; a 4xx answer is final. The retries happen inside
   * the call's deadline, so they never multiply the wait.
   */
  maxAttempts?: number;
}

/** The defaults of {@link S3ObjectStoreConfig}. */
export const S3_DEFAULTS = {
  connectTimeoutMs: 2_000,
  requestTimeoutMs: 60_000,
  readTimeoutMs: 5_000,
  writeTimeoutMs: 30_000,
  maxAttempts: 3,
} as const;

/**
 * An {@link ObjectStore} in an S3 bucket, over `@aws-sdk/client-s3`: AWS S3, MinIO or any
 * S3-compatible store. Keys are validated exactly as by the file store, so the two are
 * interchangeable. A put is one PutObject, which S3 applies atomically. Every call has a
 * deadline (see {@link S3ObjectStoreConfig}) and is cancelled at it: its socket is
 * destroyed and it fails with a retriable `backend` error naming the store.
 */
export class S3ObjectStore implements ObjectStore {
  /** The SDK client, for callers that need bucket-level operations (tests create buckets). */
  readonly client: S3Client;
  readonly bucket: string;
  /** How errors name this store: `s3://bucket` and the endpoint's host when one is set. */
  readonly label: string;
  private readonly readTimeoutMs: number;
  private readonly writeTimeoutMs: number;

  constructor(config: S3ObjectStoreConfig) {
    validateConfig(config);
    this.bucket = config.bucket;
    this.label =
      `s3://${config.bucket}` +
      (config.endpoint === undefined ? "" : ` at ${new URL(config.endpoint).host}`);
    this.readTimeoutMs = config.readTimeoutMs ?? S3_DEFAULTS.readTimeoutMs;
    this.writeTimeoutMs = config.writeTimeoutMs ?? S3_DEFAULTS.writeTimeoutMs;
    const clientConfig: S3ClientConfig = {
      forcePathStyle: config.forcePathStyle ?? false,
      maxAttempts: config.maxAttempts ?? S3_DEFAULTS.maxAttempts,
      retryMode: "standard",
      requestHandler: {
        connectionTimeout: config.connectTimeoutMs ?? S3_DEFAULTS.connectTimeoutMs,
        requestTimeout: config.requestTimeoutMs ?? S3_DEFAULTS.requestTimeoutMs,
        throwOnRequestTimeout: true,
      },
    };
    if (config.region !== undefined) clientConfig.region = config.region;
    if (config.endpoint !== undefined) clientConfig.endpoint = config.endpoint;
    if (config.credentials !== undefined) clientConfig.credentials = config.credentials;
    this.client = new S3Client(clientConfig);
  }

  async get(key: string, options?: CallOptions): Promise<Uint8Array> {
    validateKey(key);
    return this.call("read", "get", key, options, async (abortSignal) => {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
        abortSignal,
      });
      return readBody(out.Body, abortSignal);
    });
  }

  async getTagged(key: string, options?: CallOptions): Promise<TaggedObject> {
    validateKey(key);
    return this.call("read", "get", key, options, async (abortSignal) => {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
        abortSignal,
      });
      return { data: await readBody(out.Body, abortSignal), etag: out.ETag ?? "" };
    });
  }

  async getRange(
    key: string,
    offset: number,
    length: number,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    validateKey(key);
    validateRange(offset, length);
    // HTTP has no empty range; a zero-length read still has to say whether the key exists.
    if (length === 0) {
      const { size } = await this.head(key, options);
      if (offset > size) throw pastEnd(key, offset, size);
      return new Uint8Array(0);
    }
    const got = await this.call("read", "get range of", key, options, async (abortSignal) => {
      try {
        const out = await this.client.send(
          new GetObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Range: `bytes=${offset}-${offset + length - 1}`,
          }),
          { abortSignal },
        );
        return await readBody(out.Body, abortSignal);
      } catch (err) {
        if (isStatus(err, 416, "InvalidRange")) return undefined;
        throw err;
      }
    });
    if (got !== undefined) return got;
    // 416: the range starts at or past the end; at exactly the end it is an empty read.
    const { size } = await this.head(key, options);
    if (offset === size) return new Uint8Array(0);
    throw pastEnd(key, offset, size);
  }

  async getTail(key: string, length: number, options?: CallOptions): Promise<ObjectTail> {
    validateKey(key);
    validateRange(0, length);
    const got = await this.call("read", "get tail of", key, options, async (abortSignal) => {
      // HTTP has no empty suffix range: a zero-length tail asks for the size alone, below.
      if (length === 0) return undefined;
      try {
        const out = await this.client.send(
          new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=-${length}` }),
          { abortSignal },
        );
        const data = await readBody(out.Body, abortSignal);
        // `bytes 0-99/100`; a server that ignores the range sends the whole object.
        const total = /\/(\d+)$/.exec(out.ContentRange ?? "")?.[1];
        return { data, size: total === undefined ? data.byteLength : Number(total) };
      } catch (err) {
        // 416: an empty object has no last byte to range over.
        if (isStatus(err, 416, "InvalidRange")) return undefined;
        throw err;
      }
    });
    if (got !== undefined) return got;
    const { size } = await this.head(key, options);
    if (size > 0 && length > 0) throw new StorageError("backend", `${key}: tail refused`);
    return { data: new Uint8Array(0), size };
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo> {
    validateKey(key);
    return this.call("read", "head", key, options, async (abortSignal) => {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), {
        abortSignal,
      });
      return { size: out.ContentLength ?? 0 };
    });
  }

  async put(key: string, data: Uint8Array, options?: CallOptions): Promise<void> {
    validateKey(key);
    await this.call("write", "put", key, options, async (abortSignal) => {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: data,
          ContentLength: data.byteLength,
        }),
        { abortSignal },
      );
    });
  }

  async putIf(
    key: string,
    data: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions,
  ): Promise<string> {
    validateKey(key);
    return this.call("write", "put", key, options, async (abortSignal) => {
      try {
        const out = await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Body: data,
            ContentLength: data.byteLength,
            ...("ifMatch" in condition
              ? { IfMatch: condition.ifMatch }
              : { IfNoneMatch: condition.ifNoneMatch }),
          }),
          { abortSignal },
        );
        return out.ETag ?? "";
      } catch (err) {
        // 412: the condition failed; 409: a concurrent conditional write of the key won
        // (AWS's ConditionalRequestConflict); 404: If-Match of a key that does not exist.
        if (
          isStatus(err, 412, "PreconditionFailed") ||
          isStatus(err, 409, "ConditionalRequestConflict") ||
          isNotFoundError(err)
        ) {
          throw new StorageError("precondition_failed", key, { cause: err });
        }
        throw err;
      }
    });
  }

  async list(prefix: string, options?: CallOptions): Promise<string[]> {
    return (await this.listInfo(prefix, options)).map((o) => o.key);
  }

  async listInfo(prefix: string, options?: CallOptions): Promise<ListedObject[]> {
    validatePrefix(prefix);
    if (!prefixCanMatch(prefix)) return []; // MinIO refuses such prefixes; nothing matches
    const listed = await this.call("read", "list", prefix, options, async (abortSignal) => {
      const out: ListedObject[] = [];
      // The paginator follows continuation tokens: S3 returns at most 1,000 keys a page.
      const pages = paginateListObjectsV2(
        { client: this.client },
        { Bucket: this.bucket, Prefix: prefix },
        { abortSignal }, // passed on to every page's send
      );
      for await (const page of pages) {
        for (const obj of page.Contents ?? []) {
          if (obj.Key === undefined) continue;
          out.push({
            key: obj.Key,
            size: obj.Size ?? 0,
            lastModifiedMs: obj.LastModified?.getTime() ?? 0,
          });
        }
      }
      return out;
    });
    // S3 already lists in UTF-8 byte order; some compatible stores do not promise it.
    return listed.sort((a, b) => compareUtf8(a.key, b.key));
  }

  async listPrefixes(prefix: string, options?: CallOptions): Promise<string[]> {
    validatePrefix(prefix);
    if (!prefixCanMatch(prefix)) return [];
    const listed = await this.call("read", "list", prefix, options, async (abortSignal) => {
      const out: string[] = [];
      const pages = paginateListObjectsV2(
        { client: this.client },
        { Bucket: this.bucket, Prefix: prefix, Delimiter: "/" },
        { abortSignal },
      );
      for await (const page of pages) {
        for (const p of page.CommonPrefixes ?? []) if (p.Prefix !== undefined) out.push(p.Prefix);
      }
      return out;
    });
    return listed.sort(compareUtf8);
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    validateKey(key);
    await this.call("write", "delete", key, options, async (abortSignal) => {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }), {
          abortSignal,
        });
      } catch (err) {
        if (!isNotFoundError(err)) throw err;
      }
    });
  }

  /** Closes the client's sockets. */
  close(): void {
    this.client.destroy();
  }

  /**
   * Runs one call under its deadline and the caller's signal: `fn` gets the signal that
   * ends it (the SDK destroys the request's socket on it), and the call settles at the
   * deadline even if the SDK does not, so no caller waits longer than the deadline.
   */
  private async call<T>(
    kind: "read" | "write",
    op: string,
    key: string,
    options: CallOptions | undefined,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const timeoutMs =
      options?.timeoutMs ?? (kind === "read" ? this.readTimeoutMs : this.writeTimeoutMs);
    const caller = options?.signal;
    const signal = deadlineSignal(timeoutMs, caller);
    try {
      return await settleBy(fn(signal), signal);
    } catch (err) {
      if (caller?.aborted === true) {
        throw new StorageError("aborted", `${op} ${key}`, { cause: caller.reason });
      }
      // Not the caller's: the deadline's (the signal aborts for no other reason).
      if (signal.aborted) {
        throw new StorageError(
          "backend",
          `${op} ${key}: ${this.label} gave no answer within ${timeoutMs} ms`,
          { cause: err, retriable: true },
        );
      }
      throw s3Error(err, op, key, this.label);
    }
  }
}

/**
 * The bytes of an answer's body. Aborting `signal` destroys the body stream too: the SDK's
 * own abort listener is gone once the answer's headers are in.
 */
async function readBody(
  body: { transformToByteArray(): Promise<Uint8Array> } | undefined,
  signal: AbortSignal,
): Promise<Uint8Array> {
  if (body === undefined) return new Uint8Array(0);
  const destroy = (): void => {
    (body as { destroy?: () => void }).destroy?.();
  };
  signal.addEventListener("abort", destroy, { once: true });
  try {
    return await body.transformToByteArray();
  } finally {
    signal.removeEventListener("abort", destroy);
  }
}

function validateConfig(config: S3ObjectStoreConfig): void {
  if (typeof config.bucket !== "string" || config.bucket === "") {
    throw new StorageError("invalid_config", "bucket is required");
  }
  if (config.endpoint !== undefined && !URL.canParse(config.endpoint)) {
    throw new StorageError("invalid_config", `endpoint is not a URL: ${config.endpoint}`);
  }
  for (const name of [
    "connectTimeoutMs",
    "requestTimeoutMs",
    "readTimeoutMs",
    "writeTimeoutMs",
    "maxAttempts",
  ] as const) {
    const v = config[name];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 1)) {
      throw new StorageError("invalid_config", `${name} must be a positive integer, got ${v}`);
    }
  }
}

function pastEnd(key: string, offset: number, size: number): StorageError {
  return new StorageError("invalid_range", `offset ${offset} past the end (${size}) of ${key}`);
}

function isStatus(err: unknown, status: number, name: string): boolean {
  if (typeof err !== "object" || err === null) return false;
  const e = err as { name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  return e.name === name || e.$metadata?.httpStatusCode === status;
}

/** NoSuchKey (GetObject) or NotFound (HeadObject, which has no body to name the error). */
function isNotFoundError(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const e = err as { name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  if (e.name === "NoSuchKey" || e.name === "NotFound") return true;
  // A 404 that names something else (NoSuchBucket) is a configuration problem, not a miss.
  return e.$metadata?.httpStatusCode === 404 && e.name !== "NoSuchBucket";
}

// Node's codes for a peer that is down, unreachable or dropped the connection.
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

/**
 * Whether a failed S3 call may succeed later: no answer (timeouts, connection errors),
 * 5xx, or throttling. What the SDK's standard strategy retries, so an error that still
 * arrives here after its retries is worth retrying later, not at once.
 */
function isRetriable(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const e = err as {
    name?: unknown;
    code?: unknown;
    $metadata?: { httpStatusCode?: unknown };
    $retryable?: unknown;
  };
  if (e.$retryable !== undefined) return true;
  if (e.name === "TimeoutError" || e.name === "SlowDown" || e.name === "ThrottlingException")
    return true;
  if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return true;
  const status = e.$metadata?.httpStatusCode;
  return typeof status === "number" && (status >= 500 || status === 429);
}

function s3Error(err: unknown, op: string, key: string, label: string): StorageError {
  if (err instanceof StorageError) return err;
  if (isNotFoundError(err)) return new StorageError("not_found", key, { cause: err });
  const name = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new StorageError("backend", `${op} ${key} on ${label}: ${name}`, {
    cause: err,
    retriable: isRetriable(err),
  });
}
