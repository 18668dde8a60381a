/**
 * Calls both ways over a MessagePort (a `Worker`, its `parentPort`, or a channel's port):
 * each side names the methods it answers, and calls the other's by name with one
 * structured-clone argument. Errors keep their `name`, `message`, `code`, `status` and
 * `retriable`, which the retry helper ({@link isRetriable}) and the HTTP error mapper
 * read; a class does not cross a thread, so the receiving side rebuilds its own from
 * `code` where it needs one.
 *
 * Written here rather than taken from comlink: comlink's errors cross as bare `Error`s
 * (code and retriable lost), and its proxies hide which calls cross a thread.
 */
import type { Transferable } from "node:worker_threads";

/** What a port needs to carry calls: Node's `MessagePort`, `Worker` and `parentPort` all are. */
export interface PortLike {
  postMessage(value: unknown, transferList?: readonly Transferable[]): void;
  on(event: "message", listener: (value: unknown) => void): unknown;
  off(event: "message", listener: (value: unknown) => void): unknown;
}

/** The methods one side answers: each takes one cloneable argument. */
export type PortMethods = Record<string, (arg: never) => unknown>;

/** An error as it crosses a port. */
export interface PortError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  readonly status?: number;
  readonly retriable?: boolean;
  readonly stack?: string;
}

type Message =
  | { readonly port: "call"; readonly id: number; readonly method: string; readonly arg: unknown }
  | { readonly port: "reply"; readonly id: number; readonly value: unknown }
  | { readonly port: "error"; readonly id: number; readonly error: PortError };

/** An error's crossing form. */
export function toPortError(error: unknown): PortError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const e = error as Error & { code?: unknown; status?: unknown; retriable?: unknown };
  return {
    name: e.name,
    message: e.message,
    ...(typeof e.code === "string" && { code: e.code }),
    ...(typeof e.status === "number" && { status: e.status }),
    ...(typeof e.retriable === "boolean" && { retriable: e.retriable }),
    ...(e.stack !== undefined && { stack: e.stack }),
  };
}

/** An `Error` carrying what crossed: name, message, code, status, retriable. */
export function fromPortError(crossed: PortError): Error {
  const error = new Error(crossed.message) as Error & Partial<PortError>;
  error.name = crossed.name;
  if (crossed.code !== undefined) Object.assign(error, { code: crossed.code });
  if (crossed.status !== undefined) Object.assign(error, { status: crossed.status });
  if (crossed.retriable !== undefined) Object.assign(error, { retriable: crossed.retriable });
  if (crossed.stack !== undefined) error.stack = crossed.stack;
  return error;
}

/** What a method may answer with: a value, or a value and the buffers to transfer with it. */
export class Transfer<T> {
  constructor(
    readonly value: T,
    readonly transferList: readonly Transferable[],
  ) {}
}

/**
 * One side of a port: answers calls to `methods`, and calls the other side's. Messages of
 * other shapes on the same port are left to their own listeners.
 */
export class PortPeer<Remote extends PortMethods = PortMethods> {
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void }
  >();
  private closed = false;
  private readonly listener = (raw: unknown): void => {
    this.receive(raw);
  };

  constructor(
    private readonly port: PortLike,
    private readonly methods: PortMethods = {},
  ) {
    port.on("message", this.listener);
  }

  /** Calls the other side's `method`; rejects with its error, or when this side is closed. */
  call<M extends keyof Remote & string>(
    method: M,
    arg: Parameters<Remote[M]>[0],
    transferList?: readonly Transferable[],
  ): Promise<Awaited<ReturnType<Remote[M]>>> {
    if (this.closed) return Promise.reject(new Error(`port closed: ${method} not sent`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.port.postMessage({ port: "call", id, method, arg } satisfies Message, transferList);
    });
  }

  /**
   * Stops listening; calls still waiting reject with `reason` (the other side is gone).
   * Answers of this side's methods that finish later are dropped.
   */
  close(reason = "port closed"): void {
    if (this.closed) return;
    this.closed = true;
    this.port.off("message", this.listener);
    for (const { reject } of this.pending.values()) reject(new Error(reason));
    this.pending.clear();
  }

  private receive(raw: unknown): void {
    if (typeof raw !== "object" || raw === null || !("port" in raw)) return;
    const msg = raw as Message;
    if (msg.port === "call") {
      void this.answer(msg.id, msg.method, msg.arg);
      return;
    }
    const waiting = this.pending.get(msg.id);
    if (waiting === undefined) return;
    this.pending.delete(msg.id);
    if (msg.port === "reply") waiting.resolve(msg.value);
    else waiting.reject(fromPortError(msg.error));
  }

  private async answer(id: number, method: string, arg: unknown): Promise<void> {
    let reply: Message;
    let transferList: readonly Transferable[] | undefined;
    try {
      const fn = this.methods[method] as ((arg: unknown) => unknown) | undefined;
      if (fn === undefined) throw new TypeError(`no method ${method} on this side of the port`);
      let value = await fn(arg);
      if (value instanceof Transfer) {
        transferList = value.transferList;
        value = value.value;
      }
      reply = { port: "reply", id, value };
    } catch (error) {
      reply = { port: "error", id, error: toPortError(error) };
    }
    if (!this.closed) this.port.postMessage(reply, transferList);
  }
}
