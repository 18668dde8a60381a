/**
 * The load side of `pnpm bench:push`, a child process (forked with advanced serialisation)
 * so that it shares neither the server's event loop nor its CPU accounting: it receives
 * the job as its first message, runs `connections` loops, each POSTing the prepared bodies
 * in turn over a keep-alive undici pool until the deadline, and answers with its counts.
 * Plain JavaScript, so it needs no loader.
 */
import { once } from "node:events";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";

/** @type {[{ url: string, path: string, ok: number, contentType: string, bodies: Uint8Array[], connections: number, durationMs: number }]} */
const [job] = /** @type {any} */ (await once(globalThis.process, "message"));
const pool = new Pool(job.url, { connections: job.connections, pipelining: 1 });
const deadline = performance.now() + job.durationMs;
/** @type {number[]} */
const latencies = [];
let ok = 0;
let failed = 0;
let firstError = "";

/** @param {number} start */
async function loop(start) {
  for (let i = start; performance.now() < deadline; i++) {
    const body = job.bodies[i % job.bodies.length];
    const t = performance.now();
    const res = await pool.request({
      path: job.path,
      method: "POST",
      headers: { "content-type": job.contentType },
      body,
    });
    const text = await res.body.text();
    latencies.push(performance.now() - t);
    if (res.statusCode === job.ok) ok++;
    else {
      failed++;
      firstError ||= `${res.statusCode} ${text.slice(0, 200)}`;
    }
  }
}

const started = performance.now();
await Promise.all(Array.from({ length: job.connections }, (_, c) => loop(c)));
const elapsedMs = performance.now() - started;
await pool.close();
latencies.sort((a, b) => a - b);
globalThis.process.send?.({
  ok,
  failed,
  firstError,
  elapsedMs,
  p50Ms: latencies[Math.floor(latencies.length / 2)] ?? 0,
  p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
});
