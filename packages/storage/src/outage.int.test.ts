/**
 * The S3 store while its server is down or frozen, on a private MinIO (never the shared
 * one): every call ends by its deadline with a retriable `backend` error naming the store,
 * a caller's signal ends it at once, and after recovery the objects written before are
 * all there.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { StorageError } from "./errors.js";
import { startPrivateMinio, type PrivateMinio } from "./testing.js";
import type { S3ObjectStore } from "./s3.js";

const READ_TIMEOUT_MS = 1_000;
const WRITE_TIMEOUT_MS = 2_000;
/** Time a call may take past its deadline: timers, a destroyed socket, a loaded machine. */
const SLACK_MS = 750;

let minio: PrivateMinio;
let store: S3ObjectStore;
const enc = new TextEncoder();

beforeAll(async () => {
  minio = await startPrivateMinio();
  store = await minio.bucket({ readTimeoutMs: READ_TIMEOUT_MS, writeTimeoutMs: WRITE_TIMEOUT_MS });
  for (let i = 0; i < 20; i++) await store.put(`o/${i}`, enc.encode(`value ${i}`));
}, 90_000);

afterAll(async () => {
  store.close();
  await minio.close();
});

/** The error `p` fails with and how long it took, in ms. */
async function failure(p: Promise<unknown>): Promise<{ err: StorageError; ms: number }> {
  const t0 = performance.now();
  const err: unknown = await p.then(
    () => new Error("the call succeeded"),
    (e: unknown) => e,
  );
  const ms = performance.now() - t0;
  expect(err, String(err)).toBeInstanceOf(StorageError);
  return { err: err as StorageError, ms };
}

/** Every object written in beforeAll, read back. */
async function expectAllThere(): Promise<void> {
  expect(await store.list("o/")).toHaveLength(20);
  for (let i = 0; i < 20; i++) {
    expect(new TextDecoder().decode(await store.get(`o/${i}`))).toBe(`value ${i}`);
  }
}

describe("S3ObjectStore during an outage", () => {
  test("frozen: each read ends at readTimeoutMs, a write at writeTimeoutMs", async () => {
    minio.freeze();
    try {
      // All at once: each ends at its own deadline, whatever the others do.
      const reads = await Promise.all(
        (
          [
            ["get", store.get("o/1")],
            ["getRange", store.getRange("o/1", 0, 3)],
            ["head", store.head("o/1")],
            ["list", store.list("o/")],
          ] as const
        ).map(async ([name, call]) => ({ name, ...(await failure(call)) })),
      );
      for (const { name, err, ms } of reads) {
        expect(err.code, name).toBe("backend");
        expect(err.retriable, name).toBe(true);
        expect(err.message, name).toContain(`${store.label} gave no answer within 1000 ms`);
        expect(ms, name).toBeGreaterThanOrEqual(READ_TIMEOUT_MS - 50);
        expect(ms, name).toBeLessThan(READ_TIMEOUT_MS + SLACK_MS);
      }
      // A write that timed out may still land once the store thaws (S3 promises nothing
      // either way), so it goes outside the prefix the test counts.
      const put = await failure(store.put("w/new", enc.encode("x")));
      expect(put.err.retriable).toBe(true);
      expect(put.ms).toBeGreaterThanOrEqual(WRITE_TIMEOUT_MS - 50);
      expect(put.ms).toBeLessThan(WRITE_TIMEOUT_MS + SLACK_MS);
      // A call's own deadline, shorter than the store's.
      const short = await failure(store.get("o/2", { timeoutMs: 200 }));
      expect(short.ms).toBeLessThan(200 + SLACK_MS);
      // The caller's signal ends a call before any deadline, as `aborted`.
      const controller = new AbortController();
      const aborted = failure(store.get("o/3", { signal: controller.signal }));
      setTimeout(() => {
        controller.abort();
      }, 100);
      const { err, ms } = await aborted;
      expect(err.code).toBe("aborted");
      expect(ms).toBeLessThan(100 + SLACK_MS);
    } finally {
      minio.thaw();
    }
    await expectAllThere();
  });

  test("stopped: a read fails fast (connection refused), retriable; after a restart all is there", async () => {
    await minio.stop();
    try {
      const { err, ms } = await failure(store.get("o/1"));
      expect(err.code).toBe("backend");
      expect(err.retriable).toBe(true);
      expect(err.message).toContain(store.label);
      expect(err.message).toContain("ECONNREFUSED");
      expect(ms).toBeLessThan(1_000); // the SDK's retries back off for well under a second
      const put = await failure(store.put("w/new", enc.encode("x")));
      expect(put.err.retriable).toBe(true);
      expect(put.ms).toBeLessThan(1_000);
    } finally {
      await minio.start();
    }
    await expectAllThere();
  });

  test("a 4xx answer is not retriable", async () => {
    const wrong = await minio.bucket();
    const { S3ObjectStore } = await import("./s3.js");
    const denied = new S3ObjectStore({
      bucket: wrong.bucket,
      endpoint: minio.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "nobody", secretAccessKey: "wrong-secret" },
    });
    try {
      const { err } = await failure(denied.get("k"));
      expect(err.code).toBe("backend");
      expect(err.retriable).toBe(false);
    } finally {
      denied.close();
      wrong.close();
    }
  });
});
