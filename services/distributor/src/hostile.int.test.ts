// Hostile pushes over real HTTP (issue 10, cases 1 and 4): each is answered with the right
// 4xx while a concurrent /ready probe keeps answering within 200 ms at p99.
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { parseLabels } from "@sieve/labels";
import { readUntil, startDistributor } from "./harness.test-helper.js";
import type { Harness } from "./harness.test-helper.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const nowNs = () => BigInt(Date.now()) * 1_000_000n;

/**
 * Probes /ready every 10 ms until stopped; each latency is counted from when the probe was
 * due, so a blocked event loop (which delays the probe's own timer, the test sharing the
 * server's process) shows in full.
 */
function probeReady(url: string): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  const state = { stopped: false };
  const run = (async () => {
    let due = performance.now();
    while (!state.stopped) {
      due += 10;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const res = await fetch(`${url}/ready`);
      await res.text();
      latencies.push(performance.now() - due);
      due = Math.max(due, performance.now());
    }
  })();
  return {
    async stop() {
      state.stopped = true;
      await run;
      return latencies.sort((a, b) => a - b);
    },
  };
}

const p99 = (sorted: number[]) => sorted[Math.floor(sorted.length * 0.99)] ?? Infinity;

async function pushWithProbe(
  body: Uint8Array | string,
  headers: Record<string, string>,
): Promise<{ status: number; text: string; readyP99Ms: number; probes: number }> {
  const probe = probeReady(h!.url);
  const res = await fetch(`${h!.url}/loki/api/v1/push`, { method: "POST", body, headers });
  const text = await res.text();
  const latencies = await probe.stop();
  return { status: res.status, text, readyP99Ms: p99(latencies), probes: latencies.length };
}

const json = { "content-type": "application/json" };

describe("hostile pushes", () => {
  it("accepts a lone surrogate in a label value as U+FFFD: the stream reads back", async () => {
    h = await startDistributor();
    const body = String.raw`{"stream":{"app":"x","k":"\ud800"},"values":[["${nowNs()}","line"]]}`;
    const res = await fetch(`${h.url}/loki/api/v1/push`, {
      method: "POST",
      body: `{"streams":[${body}]}`,
      headers: json,
    });
    expect(res.status).toBe(204);
    const [record] = await readUntil(h.wal.consumer, (r) => r.length === 1);
    expect(record!.labels).toBe('{app="x", k="\uFFFD"}');
    expect(parseLabels(record!.labels)).toEqual([
      { name: "app", value: "x" },
      { name: "k", value: "\uFFFD" },
    ]);
  });

  it("refuses a stream of 200,000 labels (400) without stalling /ready", async () => {
    h = await startDistributor();
    const stream: Record<string, string> = {};
    for (let i = 0; i < 200_000; i++) stream[`l${i}`] = "v";
    const body = JSON.stringify({ streams: [{ stream, values: [[String(nowNs()), "x"]] }] });
    const res = await pushWithProbe(body, json);
    expect(res.status).toBe(400);
    expect(res.text).toMatch(
      /^entry for stream '\{l0="v", .* has 200000 label names; limit 15\n$/s,
    );
    expect(res.readyP99Ms).toBeLessThan(200);
  });

  it("refuses JSON nested 1,000,000 deep (400) without stalling /ready", async () => {
    h = await startDistributor();
    const body = `{"streams":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`;
    const res = await pushWithProbe(body, json);
    expect(res.status).toBe(400);
    expect(res.readyP99Ms).toBeLessThan(200);
    expect(res.text).toBe("nesting deeper than 64 levels\n");
  });

  it("refuses a 1 GiB gzip bomb (413) without stalling /ready", async () => {
    h = await startDistributor();
    // 64 gzip members of 16 MiB of zeros each: gzip readers inflate members one after another.
    const member = gzipSync(Buffer.alloc(16 << 20));
    const bomb = Buffer.concat(new Array<Buffer>(64).fill(member));
    const res = await pushWithProbe(bomb, {
      ...json,
      "content-encoding": "gzip",
    });
    expect(res.status).toBe(413);
    expect(res.text).toMatch(/^request body too large: \d+ bytes, limit: 16777216 bytes/);
    expect(res.readyP99Ms).toBeLessThan(200);
  });
});
