import { createServer } from "node:http";
import type { ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { expectCode, objectStoreContract } from "./contract.test-helper.js";
import { StorageError } from "./errors.js";
import { S3ObjectStore, type S3ObjectStoreConfig } from "./s3.js";
import { createTestBucket, dropTestBucket, s3Endpoint } from "./s3.test-helper.js";

let shared: S3ObjectStore | undefined;
let setupError: Error | undefined;
// A failed set-up (S3_ENDPOINT unset, server down) is kept and thrown by every test, so
// each one fails with the reason instead of being reported as skipped.
beforeAll(async () => {
  try {
    shared = await createTestBucket();
  } catch (err) {
    setupError = err instanceof Error ? err : new Error(String(err));
  }
});
afterAll(async () => {
  if (shared !== undefined) await dropTestBucket(shared);
});

// One bucket for the contract: its tests use disjoint prefixes, as they do on the file store.
objectStoreContract("S3ObjectStore on MinIO", () => {
  if (shared === undefined) throw setupError ?? new Error("the test bucket was not created");
  return shared;
});

const creds = { accessKeyId: "test", secretAccessKey: "test" };

/** A store of bucket `b` at a loopback server of the test's own, with `options` on top. */
function storeAt(url: string, options: Partial<S3ObjectStoreConfig>): S3ObjectStore {
  return new S3ObjectStore({
    bucket: "b",
    region: "us-east-1",
    endpoint: url,
    forcePathStyle: true,
    credentials: creds,
    ...options,
  });
}

/**
 * A loopback HTTP server that answers every request with `answer`, counting requests:
 * a real peer for the SDK's timeout and retry handling, where MinIO cannot be made to fail.
 */
async function answering(
  answer: (res: ServerResponse) => void,
): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server = createServer((req, res) => {
    count++;
    req.resume();
    answer(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** The SDK's request metadata on the S3 error a StorageError wraps. */
function sdkMetadata(err: unknown): { attempts?: number; totalRetryDelay?: number } {
  const cause = (err as StorageError).cause as { $metadata?: object } | undefined;
  return cause?.$metadata ?? {};
}

describe("S3ObjectStore", () => {
  test("a missing bucket is a backend error, not a missing object", async () => {
    const store = new S3ObjectStore({
      bucket: "sieve-test-no-such-bucket",
      endpoint: s3Endpoint(),
      forcePathStyle: true,
      maxAttempts: 1,
    });
    try {
      const err: unknown = await store.get("some/key").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as StorageError).code).toBe("backend");
      expect((err as StorageError).message).toContain("NoSuchBucket");
    } finally {
      store.close();
    }
  });

  test("wrong credentials are a backend error, not retried", async () => {
    const store = await createTestBucket();
    const wrong = new S3ObjectStore({
      bucket: store.bucket,
      endpoint: s3Endpoint(),
      forcePathStyle: true,
      credentials: { accessKeyId: "nobody", secretAccessKey: "wrong-secret" },
    });
    try {
      const err = await wrong.put("k", new Uint8Array(1)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as StorageError).code).toBe("backend");
      expect(sdkMetadata(err).attempts).toBe(1); // a 403 is final: not retried
    } finally {
      wrong.close();
      await dropTestBucket(store);
    }
  });

  test("retries 503 answers up to maxAttempts, with backoff", async () => {
    const server = await answering((res) => {
      res.writeHead(503, { "content-type": "application/xml" });
      res.end("<Error><Code>SlowDown</Code><Message>slow down</Message></Error>");
    });
    const store = storeAt(server.url, { maxAttempts: 3 });
    try {
      const err = await store.get("k").catch((e: unknown) => e);
      expect((err as StorageError).code).toBe("backend");
      expect(server.requests()).toBe(3);
      expect(sdkMetadata(err).attempts).toBe(3);
      expect(sdkMetadata(err).totalRetryDelay).toBeGreaterThan(0);
    } finally {
      store.close();
      await server.close();
    }
  });

  test("does not retry a 403", async () => {
    const server = await answering((res) => {
      res.writeHead(403, { "content-type": "application/xml" });
      res.end("<Error><Code>AccessDenied</Code><Message>no</Message></Error>");
    });
    const store = storeAt(server.url, { maxAttempts: 3 });
    try {
      await expectCode(store.get("k"), "backend");
      expect(server.requests()).toBe(1);
    } finally {
      store.close();
      await server.close();
    }
  });

  test("a server that never answers times out, and the timeout is retried", async () => {
    const server = await answering(() => undefined); // holds every request open
    const store = storeAt(server.url, { requestTimeoutMs: 300, maxAttempts: 2 });
    try {
      await expectCode(store.head("k"), "backend");
      expect(server.requests()).toBe(2);
    } finally {
      store.close();
      await server.close();
    }
  });

  test("refuses bad configuration with invalid_config", () => {
    const bad = [
      { bucket: "" },
      { bucket: "b", endpoint: "not a url" },
      { bucket: "b", maxAttempts: 0 },
      { bucket: "b", requestTimeoutMs: -5 },
      { bucket: "b", connectTimeoutMs: 1.5 },
    ];
    for (const config of bad) {
      let err: unknown;
      try {
        new S3ObjectStore(config);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(config)).toBeInstanceOf(StorageError);
      expect((err as StorageError).code).toBe("invalid_config");
    }
  });
});
