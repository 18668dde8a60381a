/**
 * Connects the S3 tests to the real S3-compatible server that `sh scripts/test.sh` starts
 * (MinIO, via scripts/minio.sh). Without S3_ENDPOINT the tests fail with instructions:
 * they never skip.
 */
import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import { S3ObjectStore } from "./s3.js";
import type { S3ObjectStoreConfig } from "./s3.js";

/** The endpoint of the test server, or a clear error saying how to get one. */
export function s3Endpoint(): string {
  const endpoint = process.env.S3_ENDPOINT;
  if (endpoint === undefined || endpoint === "") {
    throw new Error(
      "S3_ENDPOINT is not set: the S3 tests need a real S3-compatible server. Run them via " +
        "`sh scripts/test.sh`, or `sh scripts/minio.sh start` and export " +
        "S3_ENDPOINT=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=sieve-test " +
        "AWS_SECRET_ACCESS_KEY=sieve-test-secret AWS_REGION=us-east-1",
    );
  }
  return endpoint;
}

/** Creates a fresh bucket and a store over it; credentials come from the environment. */
export async function createTestBucket(
  overrides: Partial<S3ObjectStoreConfig> = {},
): Promise<S3ObjectStore> {
  const store = new S3ObjectStore({
    bucket: `sieve-test-${randomBytes(6).toString("hex")}`,
    endpoint: s3Endpoint(),
    forcePathStyle: true,
    ...overrides,
  });
  await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
  return store;
}

/** Empties and removes the bucket, then closes the client. */
export async function dropTestBucket(store: S3ObjectStore): Promise<void> {
  const pages = paginateListObjectsV2({ client: store.client }, { Bucket: store.bucket });
  for await (const page of pages) {
    const objects = (page.Contents ?? []).map((o) => ({ Key: o.Key }));
    if (objects.length > 0) {
      await store.client.send(
        new DeleteObjectsCommand({ Bucket: store.bucket, Delete: { Objects: objects } }),
      );
    }
  }
  await store.client.send(new DeleteBucketCommand({ Bucket: store.bucket }));
  store.close();
}
