import { MessageChannel } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { SieveError } from "./errors.js";
import { PortPeer, Transfer } from "./port.js";
import { isRetriable } from "./retry.js";

type Left = { double: (n: number) => number; fail: (code: string) => never };
type Right = { echo: (s: string) => string; bytes: (n: number) => Uint8Array };

const opened: MessageChannel[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) {
    c.port1.close();
    c.port2.close();
  }
});

function pair(): { left: PortPeer<Right>; right: PortPeer<Left> } {
  const channel = new MessageChannel();
  opened.push(channel);
  const left = new PortPeer<Right>(channel.port1, {
    double: (n: number) => n * 2,
    fail: (code: string) => {
      throw new SieveError(code, 503, `failed with ${code}`, { retriable: true });
    },
  });
  const right = new PortPeer<Left>(channel.port2, {
    echo: (s: string) => Promise.resolve(`${s}!`),
    bytes: (n: number) => {
      const out = new Uint8Array(n).fill(7);
      return new Transfer(out, [out.buffer]);
    },
  });
  return { left, right };
}

describe("PortPeer", () => {
  it("calls both ways, many at once, each answer to its call", async () => {
    const { left, right } = pair();
    const doubled = await Promise.all(
      Array.from({ length: 50 }, (_, i) => right.call("double", i)),
    );
    expect(doubled).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(await left.call("echo", "hi")).toBe("hi!");
  });

  it("carries an error's code, status and retriable across", async () => {
    const { right } = pair();
    const error = await right.call("fail", "store_unavailable").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({
      name: "Error",
      message: "failed with store_unavailable",
      code: "store_unavailable",
      status: 503,
      retriable: true,
    });
    expect(isRetriable(error)).toBe(true);
  });

  it("refuses a method the other side does not answer", async () => {
    const { left } = pair();
    await expect(left.call("nope" as "echo", "x")).rejects.toThrow(/no method nope/);
  });

  it("transfers what a method wraps in Transfer", async () => {
    const { left } = pair();
    const got = await left.call("bytes", 1024);
    expect(got).toBeInstanceOf(Uint8Array);
    expect(got.length).toBe(1024);
    expect(got.every((b) => b === 7)).toBe(true);
  });

  it("rejects waiting calls on close, and refuses new ones", async () => {
    const channel = new MessageChannel();
    opened.push(channel);
    // The other side never answers: nobody listens on port2.
    const lonely = new PortPeer<Left>(channel.port1);
    const waiting = lonely.call("double", 1);
    lonely.close("worker exited");
    await expect(waiting).rejects.toThrow("worker exited");
    await expect(lonely.call("double", 2)).rejects.toThrow(/port closed/);
  });

  it("leaves messages of other shapes to their own listeners", async () => {
    const { left, right } = pair();
    const seen: unknown[] = [];
    const channel = opened[0]!;
    channel.port2.on("message", (m: unknown) => seen.push(m));
    channel.port1.postMessage({ other: 1 });
    expect(await left.call("echo", "still")).toBe("still!");
    expect(await right.call("double", 4)).toBe(8);
    expect(seen).toContainEqual({ other: 1 });
  });
});
