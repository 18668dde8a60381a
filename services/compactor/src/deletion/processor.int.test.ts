/** The delete processing suite over the real S3 server (MinIO at S3_ENDPOINT). */
import { randomBytes } from "node:crypto";
import { CreateBucketCommand, DeleteBucketCommand } from "@aws-sdk/client-s3";
import { S3ObjectStore } from "@sieve/storage";
import { deletionSuite } from "./suite.test-helper.js";

/** A fresh bucket of its own, emptied and removed by `close`. */
async function s3Store(): Promise<{ store: S3ObjectStore; close: () => Promise<void> }> {
  const endpoint = process.env.S3_ENDPOINT;
  if (endpoint === undefined)
    throw new Error("S3_ENDPOINT is not set: run via `sh scripts/test.sh`");
  const bucket = `sieve-deletes-${randomBytes(6).toString("hex")}`;
  const store = new S3ObjectStore({ bucket, endpoint, forcePathStyle: true });
  await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
  return {
    store,
    close: async () => {
      for (const key of await store.list("")) await store.delete(key);
      await store.client.send(new DeleteBucketCommand({ Bucket: bucket }));
    },
  };
}

deletionSuite("the S3 server", s3Store);
