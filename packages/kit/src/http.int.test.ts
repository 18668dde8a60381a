import { Writable } from "node:stream";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { SieveError, defineErrors, errorMessage } from "./errors.js";
import { TEXT_ERROR_TYPE, errorHandler } from "./http.js";
import type { ErrorHandlerOptions } from "./http.js";

const DEMO_ERRORS = defineErrors({
  invalid_request: { status: 400, message: "invalid request" },
  not_ready: { status: 503, message: "not ready", retriable: true },
});

class DemoError extends SieveError<keyof typeof DEMO_ERRORS> {
  override readonly name = "DemoError";
  constructor(code: keyof typeof DEMO_ERRORS, detail?: string) {
    super(code, DEMO_ERRORS[code].status, errorMessage(DEMO_ERRORS, code, detail));
  }
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A real server on loopback with the handler, its routes throwing; answers its URL and logs. */
async function serve(options: ErrorHandlerOptions = {}): Promise<{ url: string; logs: string[] }> {
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const server = Fastify({ logger: { level: "error", stream }, bodyLimit: 64 });
  await server.register((scope, _opts, done) => {
    scope.setErrorHandler(errorHandler(options));
    scope.get("/bad", () => {
      throw new DemoError("invalid_request", "no tenant");
    });
    scope.get("/down", () => {
      throw new DemoError("not_ready");
    });
    scope.get("/bug", () => {
      throw new TypeError("x is undefined");
    });
    scope.post("/echo", (request, reply) => reply.send(request.body));
    done();
  });
  app = server;
  const url = await server.listen({ port: 0, host: "127.0.0.1" });
  return { url, logs };
}

async function call(url: string, init?: RequestInit) {
  const res = await fetch(url, init);
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

describe("errorHandler", () => {
  it("answers a service error with its status and Loki's plain-text body", async () => {
    const { url, logs } = await serve();
    expect(await call(`${url}/bad`)).toEqual({
      status: 400,
      type: TEXT_ERROR_TYPE,
      body: "invalid request: no tenant\n",
    });
    expect(logs).toEqual([]); // a 4xx is the client's, not logged
  });

  it("logs a 5xx with its error", async () => {
    const { url, logs } = await serve({ logMessage: "demo request failed" });
    expect(await call(`${url}/down`)).toEqual({
      status: 503,
      type: TEXT_ERROR_TYPE,
      body: "not ready\n",
    });
    expect(logs).toHaveLength(1);
    expect(JSON.parse(logs[0]!)).toMatchObject({
      level: 50,
      msg: "demo request failed",
      err: { type: "DemoError", message: "not ready" },
    });
  });

  it("answers an unexpected error as a 500 with its message", async () => {
    const { url, logs } = await serve();
    expect(await call(`${url}/bug`)).toEqual({
      status: 500,
      type: TEXT_ERROR_TYPE,
      body: "x is undefined\n",
    });
    expect(logs).toHaveLength(1);
  });

  it("maps fastify's own errors to their status: body too large, bad media type", async () => {
    const { url } = await serve({
      message: (error, status) => (status === 413 ? "too big" : undefined),
    });
    const tooLarge = await call(`${url}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ pad: "x".repeat(200) }),
    });
    expect(tooLarge).toEqual({ status: 413, type: TEXT_ERROR_TYPE, body: "too big\n" });
    const media = await call(`${url}/echo`, {
      method: "POST",
      headers: { "content-type": "application/x-unknown" },
      body: "x",
    });
    expect(media.status).toBe(415);
    expect(media.type).toBe(TEXT_ERROR_TYPE);
    const badJson = await call(`${url}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{",
    });
    expect(badJson.status).toBe(400);
    expect(badJson.type).toBe(TEXT_ERROR_TYPE);
  });

  it("answers JSON {code, message} when asked, leaving foreign errors to fastify", async () => {
    const { url } = await serve({ body: "json", foreign: "default" });
    const bad = await call(`${url}/bad`);
    expect(bad.status).toBe(400);
    expect(bad.type).toBe("application/json; charset=utf-8");
    expect(JSON.parse(bad.body)).toEqual({
      code: "invalid_request",
      message: "invalid request: no tenant",
    });
    const bug = await call(`${url}/bug`);
    expect(bug.status).toBe(500);
    expect(JSON.parse(bug.body)).toEqual({
      statusCode: 500,
      error: "Internal Server Error",
      message: "x is undefined",
    });
  });

  it("tells every answered error to onError (request metrics)", async () => {
    const seen: number[] = [];
    const { url } = await serve({ onError: (status) => seen.push(status) });
    await call(`${url}/bad`);
    await call(`${url}/down`);
    expect(seen).toEqual([400, 503]);
  });
});

describe("defineErrors", () => {
  it("refuses a status that is not HTTP's", () => {
    expect(() => defineErrors({ nope: { status: 42, message: "no" } })).toThrow(RangeError);
  });
});
