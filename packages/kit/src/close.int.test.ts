import { once } from "node:events";
import { connect } from "node:net";
import type { Socket } from "node:net";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { closeUnusedConnections } from "./close.js";

/** What `promise` settled to within `ms`, or "pending". */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | "pending"> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"pending">((resolve) => {
    timer = setTimeout(() => {
      resolve("pending");
    }, ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const sockets: Socket[] = [];
let app: FastifyInstance | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await app?.close();
  app = undefined;
});

/** A server on loopback with the helper: `/stream` answers a chunk and never ends. */
async function serve(
  routes?: (server: FastifyInstance) => void,
): Promise<{ url: string; port: number; server: FastifyInstance }> {
  const server = Fastify();
  closeUnusedConnections(server);
  server.post("/stream", (_request, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, { "content-type": "application/octet-stream" });
    reply.raw.write("x");
  });
  routes?.(server);
  app = server;
  const url = await server.listen({ port: 0, host: "127.0.0.1" });
  return { url, port: new URL(url).port === "" ? 80 : Number(new URL(url).port), server };
}

describe("closeUnusedConnections", () => {
  it("does not let a connection that never sent a byte hold the close", async () => {
    const { port, server } = await serve();
    const accepted = once(server.server, "connection");
    const socket = connect(port, "127.0.0.1");
    sockets.push(socket);
    socket.on("error", () => undefined);
    await once(socket, "connect");
    await accepted;
    const closed = once(socket, "close");
    expect(await within(server.close(), 2000)).not.toBe("pending");
    await closed;
  });

  it("does not wait for the connection fetch opens after an aborted streamed answer", async () => {
    // undici reconnects for the aborted request and keeps the new connection, unused.
    const { url, server } = await serve();
    const abort = new AbortController();
    const response = await fetch(`${url}/stream`, {
      method: "POST",
      body: "tail",
      signal: abort.signal,
    });
    await response.body!.getReader().read();
    abort.abort();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await within(server.close(), 2000)).not.toBe("pending");
  });

  it("still waits for a request in progress, and answers it", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const { url, server } = await serve((s) => {
      s.get("/slow", async () => {
        entered();
        await released;
        return "done";
      });
    });
    const answer = fetch(`${url}/slow`).then(async (r) => ({
      status: r.status,
      body: await r.text(),
    }));
    await inHandler;
    const closing = server.close();
    expect(await within(closing, 300)).toBe("pending");
    release();
    expect(await answer).toEqual({ status: 200, body: "done" });
    expect(await within(closing, 2000)).not.toBe("pending");
  });
});
