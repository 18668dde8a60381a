/**
 * The gateway on the real S3-compatible server (MinIO, started by `sh scripts/test.sh` via
 * scripts/minio.sh): blooms written to a bucket, filtered by a gateway server reading them
 * with S3ObjectStore, through the client. Without S3_ENDPOINT every test fails and says
 * how to get a server: they never skip.
 */
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import type { FastifyInstance } from "fastify";
import { extractBloomTests, parseExpr } from "@sieve/logql";
import { S3ObjectStore } from "@sieve/storage";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BloomGatewayClient } from "./client.js";
import { DEFAULT_CONFIG } from "./config.js";
import { keptChunks, writeBlock } from "./fixtures.test-helper.js";
import type { WrittenSeries } from "./fixtures.test-helper.js";
import type { FilterRequest } from "@sieve/proto";
import { createBloomGatewayServer } from "./http.js";

function endpoint(): string {
  const value = process.env.S3_ENDPOINT;
  if (value === undefined || value === "") {
    throw new Error(
      "S3_ENDPOINT is not set: these tests need a real S3-compatible server. Run them via " +
        "`sh scripts/test.sh`, or `sh scripts/minio.sh start` and export " +
        "S3_ENDPOINT=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=sieve-test " +
        "AWS_SECRET_ACCESS_KEY=sieve-test-secret AWS_REGION=us-east-1",
    );
  }
  return value;
}

let store: S3ObjectStore | undefined;
let setupError: Error | undefined;
let app: FastifyInstance | undefined;
let client: BloomGatewayClient;

beforeAll(async () => {
  try {
    const s = new S3ObjectStore({
      bucket: `sieve-gateway-${randomBytes(6).toString("hex")}`,
      endpoint: endpoint(),
      forcePathStyle: true,
      maxAttempts: 2,
    });
    await s.client.send(new CreateBucketCommand({ Bucket: s.bucket }));
    store = s;
    const logger = pino({ level: "silent" });
    app = await createBloomGatewayServer({
      config: DEFAULT_CONFIG,
      store: s,
      logger,
      registry: new Registry(),
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as AddressInfo;
    client = new BloomGatewayClient({ urls: [`http://127.0.0.1:${port}`] });
  } catch (err) {
    setupError = err instanceof Error ? err : new Error(String(err));
  }
});

afterAll(async () => {
  await app?.close();
  if (store === undefined) return;
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
});

function s3(): S3ObjectStore {
  if (store === undefined) throw setupError ?? new Error("the test bucket was not created");
  return store;
}

function request(query: string, series: readonly WrittenSeries[]): FilterRequest {
  return {
    tenant: "team-a",
    from: 0n,
    through: 2n ** 62n,
    test: extractBloomTests(parseExpr(query)),
    series,
  };
}

async function data(key: string): Promise<WrittenSeries[]> {
  return writeBlock(
    s3(),
    key,
    Array.from({ length: 10 }, (_, s) => ({
      labels: { app: "api", pod: `p${s}` },
      chunks: Array.from({ length: 5 }, (_, c) =>
        Array.from({ length: 20 }, (_, l) => ({ trace_id: `t-${s}-${c}-${l}` })),
      ),
    })),
  );
}

describe("bloom gateway on S3 (MinIO)", () => {
  test("a needle query reads blooms by range from the bucket and prunes", async () => {
    const series = await data("team-a/blooms/s3-needle");
    const res = await client.filterChunkRefs(request('{app="api"} | trace_id="t-4-2-7"', series));
    expect(keptChunks(res).has(`${series[4]!.fingerprint}/${series[4]!.chunks[2]!.from}`)).toBe(
      true,
    );
    // The block is one object: one read for its 10 series.
    expect(res.stats).toMatchObject({ series: 10, chunks: 50, blocksRead: 1, failedOpen: {} });
    expect(res.stats.chunksPruned).toBeGreaterThanOrEqual(47);
  });

  test("a deleted block and corrupted bytes fail open", async () => {
    const deleted = await data("team-a/blooms/s3-deleted");
    await s3().delete("team-a/blooms/s3-deleted");
    const gone = await client.filterChunkRefs(request('{app="api"} | trace_id="x"', deleted));
    expect(gone.stats.failedOpen).toEqual({ block_not_found: 50 });
    expect(keptChunks(gone).size).toBe(50);

    const damaged = await data("team-a/blooms/s3-damaged");
    const bytes = await s3().get("team-a/blooms/s3-damaged");
    const copy = Uint8Array.from(bytes);
    for (const s of damaged) {
      const loc = s.bloom as { offset: number; length: number };
      copy[loc.offset + loc.length - 5]! ^= 0x5a; // inside each series' filter: its CRC fails
    }
    await s3().put("team-a/blooms/s3-damaged", copy);
    const bad = await client.filterChunkRefs(request('{app="api"} | trace_id="x"', damaged));
    expect(bad.stats.failedOpen).toEqual({ corrupt_bloom: 50 });
    expect(keptChunks(bad).size).toBe(50);
  });
});
