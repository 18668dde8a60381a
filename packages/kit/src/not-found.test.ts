import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { NOT_FOUND_BODY, notFoundHandler } from "./http.js";

describe("notFoundHandler (Go's http.NotFound, as Loki answers)", () => {
  it.each([
    ["GET", "/loki/api/v1/nope"],
    ["POST", "/"],
    ["GET", "/loki/api/v1/pushed"],
  ] as const)("%s %s → 404 page not found, plain text", async (method, url) => {
    const app = Fastify();
    app.setNotFoundHandler(notFoundHandler);
    // A route in an encapsulated plugin: its siblings' misses still get Loki's answer.
    await app.register((child, _options, done) => {
      child.post("/loki/api/v1/push", () => "pushed");
      done();
    });
    const response = await app.inject({ method, url });
    expect(response.statusCode).toBe(404);
    expect(response.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(response.headers["x-content-type-options"]).toBe("nosniff");
    expect(response.body).toBe(NOT_FOUND_BODY);
    expect(NOT_FOUND_BODY).toBe("404 page not found\n");
    await app.close();
  });
});
