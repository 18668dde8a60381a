/**
 * A server's close that does not wait for connections no request ever came on.
 *
 * Node's `server.close()` (which fastify's `close()` calls) stops accepting, ends the idle
 * keep-alive connections, then waits for every other connection to end. Node 20 counts a
 * connection accepted but not yet sent a byte as busy, not idle (its HTTP parser starts
 * the headers timeout at accept, against a client that connects and sends nothing), and
 * `close()` also stops the timer that would have ended it: such a connection holds the
 * close until its client goes away (nodejs/node#63452, fixed upstream by #63470; Node
 * 20.20.2 still does it). Fetch opens one: undici (Node 20's fetch) reconnects for a
 * request aborted while its answer streams, drops the request, and keeps the new
 * connection pooled, unused (nodejs/undici#5845). Every querier that ends a tail on an
 * ingester does that.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** What {@link closeUnusedConnections} needs of a fastify instance, whatever its logger. */
export interface ClosingServer {
  readonly server: Server;
  addHook(name: "preClose", hook: (done: () => void) => void): unknown;
}

/**
 * Makes `app.close()` end the connections no request is on: at its start, those that have
 * not sent a byte (and any accepted after); then each as the request in progress on it is
 * answered (Node ends the idle keep-alive ones only once, as the close begins, and fastify
 * marks `connection: close` only the answers to requests that arrive while it closes). No
 * request is cut; a client sending one as the server closes gets what it gets on an idle
 * keep-alive connection Node ends. Call before `app` is ready.
 */
export function closeUnusedConnections(app: ClosingServer): void {
  const server = app.server;
  const open = new Set<Socket>();
  let closing = false;
  server.on("connection", (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  });
  server.on("request", (_request: IncomingMessage, response: ServerResponse) => {
    // Emitted once the answer is sent (its connection then idle) or the connection gone.
    response.once("close", () => {
      if (closing) server.closeIdleConnections();
    });
  });
  app.addHook("preClose", (done) => {
    closing = true;
    // `bytesRead` counts what the HTTP parser consumed too: 0 is a connection never used.
    for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
    done();
  });
}
