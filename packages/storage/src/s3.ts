import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import type { S3ClientConfig } from "@aws-sdk/client-s3";
import { StorageError } from "./errors.js";
import { compareUtf8, prefixCanMatch, validateKey, validatePrefix, validateRange } from "./keys.js";
import type { ObjectInfo, ObjectStore } from "./store.js";

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
  /** Longest wait for a TCP connection, ms; default 5,000. */
  connectTimeoutMs?: number;
  /** Longest time for one request and its response, ms; default 60,000. */
  requestTimeoutMs?: number;
  /**
   * Attempts per request including the first, default 5. The SDK's standard retry
   * strategy retries only retriable failures (throttling, 5xx, timeouts, connection
   * errors), with exponential backoff and full jitter; a 4xx answer is final.
   */
  maxAttempts?: number;
}

/** The defaults of {@link S3ObjectStoreConfig}. */
export const S3_DEFAULTS = {
  connectTimeoutMs: 5_000,
  requestTimeoutMs: 60_000,
  maxAttempts: 5,
} as const;

/**
 * An {@link ObjectStore} in an S3 bucket, over `@aws-sdk/client-s3`: AWS S3, MinIO or any
 * S3-compatible store. Keys are validated exactly as by the file store, so the two are
 * interchangeable. A put is one PutObject, which S3 applies atomically.
 */
export class S3ObjectStore implements ObjectStore {
  /** The SDK client, for callers that need bucket-level operations (tests create buckets). */
  readonly client: S3Client;
  readonly bucket: string;

  constructor(config: S3ObjectStoreConfig) {
    validateConfig(config);
    this.bucket = config.bucket;
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

  async get(key: string): Promise<Uint8Array> {
    validateKey(key);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (out.Body === undefined) return new Uint8Array(0);
      return await out.Body.transformToByteArray();
    } catch (err) {
      throw s3Error(err, "get", key);
    }
  }

  async getRange(key: string, offset: number, length: number): Promise<Uint8Array> {
    validateKey(key);
    validateRange(offset, length);
    // HTTP has no empty range; a zero-length read still has to say whether the key exists.
    if (length === 0) {
      const { size } = await this.head(key);
      if (offset > size) throw pastEnd(key, offset, size);
      return new Uint8Array(0);
    }
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: `bytes=${offset}-${offset + length - 1}`,
        }),
      );
      if (out.Body === undefined) return new Uint8Array(0);
      return await out.Body.transformToByteArray();
    } catch (err) {
      if (!isStatus(err, 416, "InvalidRange")) throw s3Error(err, "get range of", key);
    }
    // 416: the range starts at or past the end; at exactly the end it is an empty read.
    const { size } = await this.head(key);
    if (offset === size) return new Uint8Array(0);
    throw pastEnd(key, offset, size);
  }

  async head(key: string): Promise<ObjectInfo> {
    validateKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: out.ContentLength ?? 0 };
    } catch (err) {
      throw s3Error(err, "head", key);
    }
  }

  async put(key: string, data: Uint8Array): Promise<void> {
    validateKey(key);
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: data,
          ContentLength: data.byteLength,
        }),
      );
    } catch (err) {
      throw s3Error(err, "put", key);
    }
  }

  async list(prefix: string): Promise<string[]> {
    validatePrefix(prefix);
    if (!prefixCanMatch(prefix)) return []; // MinIO refuses such prefixes; nothing matches
    const keys: string[] = [];
    try {
      // The paginator follows continuation tokens: S3 returns at most 1,000 keys a page.
      const pages = paginateListObjectsV2(
        { client: this.client },
        { Bucket: this.bucket, Prefix: prefix },
      );
      for await (const page of pages) {
        for (const obj of page.Contents ?? []) if (obj.Key !== undefined) keys.push(obj.Key);
      }
    } catch (err) {
      throw s3Error(err, "list", prefix);
    }
    // S3 already lists in UTF-8 byte order; some compatible stores do not promise it.
    return keys.sort(compareUtf8);
  }

  async delete(key: string): Promise<void> {
    validateKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      if (isNotFoundError(err)) return;
      throw s3Error(err, "delete", key);
    }
  }

  /** Closes the client's sockets. */
  close(): void {
    this.client.destroy();
  }
}

function validateConfig(config: S3ObjectStoreConfig): void {
  if (typeof config.bucket !== "string" || config.bucket === "") {
    throw new StorageError("invalid_config", "bucket is required");
  }
  if (config.endpoint !== undefined && !URL.canParse(config.endpoint)) {
    throw new StorageError("invalid_config", `endpoint is not a URL: ${config.endpoint}`);
  }
  for (const name of ["connectTimeoutMs", "requestTimeoutMs", "maxAttempts"] as const) {
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

function s3Error(err: unknown, op: string, key: string): StorageError {
  if (err instanceof StorageError) return err;
  if (isNotFoundError(err)) return new StorageError("not_found", key, { cause: err });
  const name = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new StorageError("backend", `${op} ${key}: ${name}`, { cause: err });
}
